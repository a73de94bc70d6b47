"""Every `roundtrip.*` key the exporter writes: ONNX node and model metadata_props, and the
keys it keeps in `graph_module.meta` between its stages. The harness and other readers take
them from here (docs/ARCHITECTURE.md, "Provenance")."""

from __future__ import annotations

# Node metadata every emitted ONNX node carries.
FX_NODE_KEY = "roundtrip.fx_node"
ATEN_KEY = "roundtrip.aten"
SCOPE_KEY = "roundtrip.scope"
SOURCE_KEY = "roundtrip.source"
# A node that stands for several FX nodes after optimisation (a folded BatchNorm, a fused
# activation): JSON list of {"fx_node", "aten", "scope", "source"} in graph order; its
# roundtrip.fx_node is the last member, whose output the node computes.
REGION_KEY = "roundtrip.region"
# A node the exporter wrapped in Casts because ONNX does not define it for the dtype at the
# target opset: "bfloat16->float32: <why>".
CAST_KEY = "roundtrip.cast"

# Model metadata: JSON {initializer name: FX node} for FX values folded into initializers at export.
FOLDED_VALUES_KEY = "roundtrip.folded_values"
# Model metadata: JSON {value name: value name} for FX values the optimisation stage merged into
# another value that carries the same data (a removed Identity/no-op, a shared sub-expression).
ALIASED_VALUES_KEY = "roundtrip.aliased_values"
# Model metadata: JSON {FX value name: ONNX name} for the inputs/outputs renamed by
# input_names/output_names.
RENAMED_VALUES_KEY = "roundtrip.renamed_values"
# Model metadata: "true" when the optimisation stage ran (export(optimize=True)), else "false".
OPTIMIZED_KEY = "roundtrip.optimized"
# Model metadata: JSON list of {"expression", "fx_node", "source"}, one per runtime check of the
# program (a guard torch.export could not prove for every size) that the ONNX model does not carry.
DROPPED_CHECKS_KEY = "roundtrip.dropped_checks"
# Model metadata: JSON list of {"initializer", "shape", "fx_node", "source", "reason"}: initializers
# holding a value that depends on a dynamic axis (exporter.optimize.baked_sizes), found at export.
BAKED_SIZES_KEY = "roundtrip.baked_sizes"
# Model metadata: JSON list of SpecialisedAxis dicts, the declared dynamic axes exported static.
STATIC_AXES_KEY = "roundtrip.static_axes"
# Model metadata: JSON list of FixedSize dicts, sizes computed from dynamic axes that the export
# fixed to their value at the traced shapes (`int(h * 0.5)`).
STATIC_SIZES_KEY = "roundtrip.static_sizes"

# graph_module.meta of a captured program: where `capture` keeps its CaptureRecord.
CAPTURE_KEY = "roundtrip.capture"
# graph_module.meta: the guards a Dim.DYNAMIC retry let go.
RELAXED_GUARDS_KEY = "roundtrip.relaxed_guards"
# graph_module.meta: what the Dim.AUTO retry recorded (exporter.capturing.specialise).
SPECIALISED_META = "roundtrip.specialised"
# graph_module.meta: True when the program was captured with sizes oblivious to 0 and 1 (a
# dynamic axis whose example was 0 or 1).
SIZE_OBLIVIOUS_KEY = "roundtrip.size_oblivious"
# graph_module.meta: the sizes computed from dynamic sizes that the trace turned into Python ints.
FIXED_SIZES_META = "roundtrip.fixed_sizes"
# ir.Graph.meta during optimisation: what a pass said it merged.
MERGED_VALUES_META = "roundtrip.merged_values"
# ir.Model.meta during optimisation (in memory, never serialised): the Ledger the passes write to.
LEDGER_META = "roundtrip.optimize.ledger"
