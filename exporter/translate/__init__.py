"""The translate stage: an ExportedProgram -> the exporter's Graph, one symbolic per ATen overload
(translator), through the graph builder `g.op(...)` (graph), the registry dispatching by opset
(registry), dtype mapping (dtypes), node provenance (provenance) and the built-ins (symbolics/).

Importing the stage registers the built-in symbolics (as importing `exporter` did before its
public names loaded lazily), so whoever reads the registry sees them."""

from __future__ import annotations

from exporter.translate import symbolics  # noqa: F401  (registers the built-ins)
