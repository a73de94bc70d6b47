"""roundtrip's exporter: torch.nn.Module -> onnx.ModelProto through per-op symbolic functions.

`export(model, args)` in one step, or `capture(model, args)` once and `convert(program,
opset_version=...)` at each opset wanted.

The package is grouped as its pipeline: contract/ (torch-free: metadata keys, skeleton, file
I/O, the records readers use) < capturing/ < translate/ < optimize/ < write/ < api. The public
names below are loaded on first use (PEP 562), so `import exporter.contract` never imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "ExportError": "exporter.errors", "ExportWarning": "exporter.errors", "SymbolicError": "exporter.errors",
    "UnsupportedOperator": "exporter.errors", "UnsupportedOperatorError": "exporter.errors",
    "ExportResult": "exporter.api", "__version__": "exporter.api", "capture": "exporter.api",
    "convert": "exporter.api", "convert_program": "exporter.api", "export": "exporter.api",
    "export_program": "exporter.api", "save": "exporter.api", "ExportOptions": "exporter.contract.options",
    "Graph": "exporter.translate.graph", "Type": "exporter.translate.graph", "Value": "exporter.translate.graph",
    "DEFAULT_OPSET": "exporter.translate.registry", "MAX_OPSET": "exporter.translate.registry",
    "MIN_OPSET": "exporter.translate.registry", "register_symbolic": "exporter.translate.registry",
    "unregister_symbolic": "exporter.translate.registry",
    "normalize_dynamic_axes": "exporter.capturing.signature",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    """Load a public name from the module that defines it, on first use."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'exporter' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
