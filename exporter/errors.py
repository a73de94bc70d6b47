"""Errors raised by the exporter, each naming the problem and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass


class ExportError(RuntimeError):
    """The model could not be exported; the message says why and what to try."""


@dataclass(frozen=True)
class UnsupportedOperator:
    """One FX node whose ATen overload has no symbolic function at the target opset."""

    fx_node: str
    target: str
    scope: str
    source: str
    reason: str
    hint: str = ""  # what to do; by default, how to register a symbolic for `target`

    def describe(self) -> str:
        hint = self.hint or (
            f"hint: exporter.register_symbolic({self.target!r}, fn) with "
            f"fn(g, *args) -> Value, or pass custom_symbolics={{{self.target!r}: fn}}"
        )
        return (
            f"  {self.target} (node {self.fx_node!r}) at {self.scope}, {self.source or 'unknown source'}\n"
            f"      {self.reason}\n"
            f"      {hint}"
        )


class UnsupportedOperatorError(ExportError):
    """Every operator of the graph that the registry cannot translate, reported together."""

    def __init__(self, operators: list[UnsupportedOperator], opset_version: int) -> None:
        self.operators = list(operators)
        self.opset_version = opset_version
        targets = sorted({op.target for op in self.operators})
        lines = [
            f"{len(self.operators)} node(s) use {len(targets)} operator(s) that roundtrip cannot "
            f"export at opset {opset_version}: {', '.join(targets)}"
        ]
        lines += [op.describe() for op in self.operators]
        super().__init__("\n".join(lines))


class SymbolicError(ExportError):
    """A symbolic function raised; the message names the node, the op and the symbolic."""


class ExportWarning(UserWarning):
    """The export succeeded, but the ONNX model leaves out something the module does (the
    message says what): e.g. updates of buffers or inputs, which ONNX graphs cannot hold."""
