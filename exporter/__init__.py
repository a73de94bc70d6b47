"""roundtrip's exporter: torch.nn.Module -> onnx.ModelProto through per-op symbolic functions."""

from __future__ import annotations

from exporter.errors import ExportError, SymbolicError, UnsupportedOperator, UnsupportedOperatorError
from exporter.export import ExportResult, __version__, export, export_program, save
from exporter.graph import Graph, Type, Value
from exporter.registry import (
    DEFAULT_OPSET,
    MAX_OPSET,
    MIN_OPSET,
    register_symbolic,
    unregister_symbolic,
)

__all__ = [
    "DEFAULT_OPSET", "MAX_OPSET", "MIN_OPSET", "ExportError", "ExportResult", "Graph",
    "SymbolicError", "Type", "UnsupportedOperator", "UnsupportedOperatorError", "Value",
    "__version__", "export", "export_program", "register_symbolic", "save", "unregister_symbolic",
]
