"""roundtrip's exporter: torch.nn.Module -> onnx.ModelProto through per-op symbolic functions.

`export(model, args)` in one step, or `capture(model, args)` once and `convert(program,
opset_version=...)` at each opset wanted.
"""

from __future__ import annotations

from exporter.errors import ExportError, ExportWarning, SymbolicError, UnsupportedOperator, UnsupportedOperatorError
from exporter.exporting import ExportResult, __version__, convert, convert_program, export, export_program, save
from exporter.graph import Graph, Type, Value
from exporter.registry import (
    DEFAULT_OPSET,
    MAX_OPSET,
    MIN_OPSET,
    register_symbolic,
    unregister_symbolic,
)
from exporter.trace import capture, normalize_dynamic_axes

__all__ = [
    "DEFAULT_OPSET", "MAX_OPSET", "MIN_OPSET", "ExportError", "ExportResult", "ExportWarning", "Graph",
    "SymbolicError", "Type", "UnsupportedOperator", "UnsupportedOperatorError", "Value",
    "__version__", "capture", "convert", "convert_program", "export", "export_program",
    "normalize_dynamic_axes", "register_symbolic", "save", "unregister_symbolic",
]
