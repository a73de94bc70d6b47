"""The translate stage: an ExportedProgram -> the exporter's Graph, one symbolic per ATen overload
(translator), through the graph builder `g.op(...)` (graph), the registry dispatching by opset
(registry), dtype mapping (dtypes), node provenance (provenance) and the built-ins (symbolics/)."""
