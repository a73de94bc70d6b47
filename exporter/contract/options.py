"""`ExportOptions`: the settings of one export, documented once.

`exporter.export`, `export_program`, `capture`, `convert` and `convert_program` keep their keyword
arguments for users; each builds one `ExportOptions` from them and hands it down the stages.
Torch-free (a symbolic is any callable, a dynamic axis a name), so a caller may build one without
importing torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class ExportOptions:
    """How to export a module (every field optional; the defaults are `exporter.export`'s).

    * `input_names`, `output_names`: the graph's input and output names (default: the forward's
      parameter names, and the FX output nodes' names). Checked before anything is traced:
      duplicates, an input and an output sharing a name, or more names than values are errors.
    * `opset_version`: the ONNX opset (None: `DEFAULT_OPSET`). Capture does not depend on it.
    * `dynamic_axes`: axes to export dynamic, keyed by input or output name
      (`{"x": {0: "batch"}}`, or a list of dims). A declared axis the model fixes to one size is
      exported static with an ExportWarning (the axis, the reason, the user's line) and listed in
      the model's `roundtrip.static_axes` metadata.
    * `strict_dynamic`: raise ExportError instead of that warning, and instead of the warning
      for an initializer holding a size-dependent value (`roundtrip.baked_sizes`).
    * `custom_symbolics`: overload name -> symbolic function, for this call only (they win over
      `register_symbolic` and the built-ins).
    * `optimize`: run the optimisation stage (constant folding, BatchNorm into Conv, fused
      HardSwish/HardSigmoid, no-op removal, ...); each fused node lists the FX nodes it stands
      for (`roundtrip.region`). False keeps one node per op.
    * `do_constant_folding`: with `optimize=False`, still compute weight-only subgraphs (the
      recurrent layers' gate reordering) at export and store them as initializers.
    * `graph_name`: the graph's name, which also roots every node's scope (default: the
      module's class name).
    * `external_data`: writing to a path, True puts the weights in `<f>.data` beside the model,
      None does so only past protobuf's 2 GB limit, False never.
    * `verbose`: print the graph with its scopes after export.
    """

    input_names: Sequence[str] | None = None
    output_names: Sequence[str] | None = None
    opset_version: int | None = None
    dynamic_axes: Mapping[str, Any] | Sequence[Any] | None = None
    strict_dynamic: bool = False
    custom_symbolics: Mapping[Any, Callable[..., Any]] | None = None
    optimize: bool = True
    do_constant_folding: bool = True
    graph_name: str | None = None
    external_data: bool | None = None
    verbose: bool = False

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> ExportOptions:
        """The options among a public function's arguments (its `locals()`), the rest ignored."""
        return cls(**{f.name: arguments[f.name] for f in fields(cls) if f.name in arguments})

    def with_defaults(self, **defaults: Any) -> ExportOptions:
        """These options with each field that is None here taken from `defaults` (what the
        capture recorded, for a conversion that does not say)."""
        return replace(self, **{name: value for name, value in defaults.items() if getattr(self, name) is None})
