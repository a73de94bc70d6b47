"""The graph that symbolic functions write into, with the seed's API.

`g.op("Conv", x, w, b, kernel_shape_i=[3, 3], strides_i=[1, 1])` adds a node and returns its
output `Value` (a tuple of them with `outputs=k`). Attribute names carry the seed's type
suffixes: `_i` int(s), `_f` float(s), `_s` string(s), `_t` tensor, `_g` graph. Every node is
stamped with the provenance of the FX node being translated (see `Graph.provenance`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from exporter.translate.dtypes import numpy_type, onnx_type, to_numpy, torch_dtype_of

Dim = int | str | None  # static size, symbolic name, or unknown

_ATTR_SUFFIX = re.compile(r"^(?P<name>.+)_(?P<kind>[ifstg])$")


class Type:
    """Type of a value as the seed exposes it: `sizes()` and `scalarType()`."""

    def __init__(self, dtype: torch.dtype | None, shape: tuple[Dim, ...] | None) -> None:
        self.dtype = dtype
        self.shape = shape

    def sizes(self) -> tuple[Dim, ...] | None:
        """The shape: ints for static sizes, names for symbolic ones, None when unknown."""
        return self.shape

    def scalarType(self) -> str | None:  # noqa: N802 - the seed's spelling
        return None if self.dtype is None else str(self.dtype).removeprefix("torch.")

    def __repr__(self) -> str:
        dims = "?" if self.shape is None else ", ".join(str(d) for d in self.shape)
        return f"{self.scalarType() or 'UNKNOWN_TYPE'}({dims})"


class Value:
    """An ONNX value: a graph input, an initializer or a node output."""

    __slots__ = ("name", "dtype", "shape", "producer", "const")

    def __init__(
        self,
        name: str,
        dtype: torch.dtype | None = None,
        shape: tuple[Dim, ...] | None = None,
        producer: Node | None = None,
        const: np.ndarray | None = None,
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.producer = producer
        self.const = const  # the value when known at export time (constants, initializers)

    def type(self) -> Type:
        return Type(self.dtype, self.shape)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def __repr__(self) -> str:
        return f"%{self.name} : {self.type()!r}"


@dataclass
class Node:
    """One ONNX node; inputs may be None for omitted optional inputs."""

    op_type: str
    domain: str
    inputs: list[Value | None]
    outputs: list[Value]
    attributes: dict[str, Any]
    provenance: dict[str, str] = field(default_factory=dict)


def _attribute(key: str, value: Any) -> onnx.AttributeProto:
    match = _ATTR_SUFFIX.match(key)
    name, kind = (match["name"], match["kind"]) if match else (key, None)
    if kind == "i":
        value = [int(v) for v in value] if isinstance(value, (list, tuple)) else int(value)
    elif kind == "f":
        value = [float(v) for v in value] if isinstance(value, (list, tuple)) else float(value)
    elif kind == "s":
        value = [str(v).encode() for v in value] if isinstance(value, (list, tuple)) else str(value).encode()
    elif kind == "t":
        value = _tensor_proto(value, name="")
    return helper.make_attribute(name, value)


def _tensor_proto(value: Any, name: str) -> onnx.TensorProto:
    if isinstance(value, onnx.TensorProto):
        return value
    if isinstance(value, torch.Tensor):
        value = to_numpy(value)  # bfloat16 and float8 keep their bits (ml_dtypes arrays)
    return numpy_helper.from_array(np.asarray(value), name=name)


class Graph:
    """Collects nodes, graph inputs, initializers and outputs for one ONNX graph."""

    def __init__(self, opset_version: int) -> None:
        self.opset_version = opset_version
        self.nodes: list[Node] = []
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.initializers: dict[str, np.ndarray] = {}
        self.initializer_values: dict[str, Value] = {}
        self.custom_domains: dict[str, int] = {}
        self.provenance: dict[str, str] = {}
        # runtime checks of the program that ONNX cannot carry: {"expression", "fx_node", "source"}
        self.dropped_checks: list[dict[str, str]] = []
        self.ctx: Any = None  # the SymbolicContext of the FX node being translated
        self._temp_prefix = "tmp"
        self._counter = itertools.count()

    # -- the seed's API -------------------------------------------------------------------
    def op(self, opname: str, *inputs: Any, outputs: int = 1, **attrs: Any) -> Value | tuple[Value, ...]:
        """Add an ONNX node and return its output value(s).

        `opname` may carry a domain, `"mydomain::MyOp"`; custom domains are imported at
        version 1 unless `g.custom_domains[domain]` says otherwise. Python numbers, lists,
        numpy arrays and tensors among the inputs become Constant nodes.
        """
        domain, _, op_type = opname.rpartition("::")
        if domain and domain not in ("", "ai.onnx"):
            self.custom_domains.setdefault(domain, 1)
        else:
            domain = ""
        node_inputs = [self._as_value(v) for v in inputs]
        attributes = {k: v for k, v in attrs.items() if v is not None}
        node = Node(op_type, domain, node_inputs, [], attributes, dict(self.provenance))
        node.outputs = [Value(self._temp_name(op_type), producer=node) for _ in range(outputs)]
        self.nodes.append(node)
        return node.outputs[0] if outputs == 1 else tuple(node.outputs)

    # -- helpers for symbolic functions ---------------------------------------------------
    def constant(self, value: Any, dtype: torch.dtype | None = None) -> Value:
        """A Constant node holding `value` (ints default to int64, floats to float32)."""
        if isinstance(value, torch.Tensor):
            array = to_numpy(value if dtype is None else value.to(dtype))
        else:
            array = np.asarray(value)
            if dtype is not None:
                array = array.astype(numpy_type(dtype))
            elif array.dtype == np.float64:
                array = array.astype(np.float32)
            elif array.dtype.kind in "iu":
                array = array.astype(np.int64)
        # ascontiguousarray would make a 0-d array 1-D: keep the shape
        array = np.ascontiguousarray(array).reshape(array.shape)
        out = self.op("Constant", value_t=numpy_helper.from_array(array))
        out.dtype = torch_dtype_of(array.dtype)
        out.shape = tuple(array.shape)
        out.const = array
        return out

    def add_input(self, name: str, dtype: torch.dtype, shape: tuple[Dim, ...] | None) -> Value:
        value = Value(name, dtype, shape)
        self.inputs.append(value)
        return value

    def add_initializer(self, name: str, tensor: torch.Tensor | np.ndarray) -> Value:
        array = to_numpy(tensor) if isinstance(tensor, torch.Tensor) else np.asarray(tensor)
        self.initializers[name] = array
        value = Value(name, torch_dtype_of(array.dtype), tuple(array.shape), const=array)
        self.initializer_values[name] = value
        return value

    @contextmanager
    def node_context(self, provenance: dict[str, str], temp_prefix: str) -> Iterator[None]:
        """Stamp every node created inside with `provenance`; name temporaries after the node."""
        saved = (self.provenance, self._temp_prefix)
        self.provenance, self._temp_prefix = provenance, temp_prefix
        try:
            yield
        finally:
            self.provenance, self._temp_prefix = saved

    def nodes_since(self, start: int) -> Sequence[Node]:
        return self.nodes[start:]

    # -- internals -------------------------------------------------------------------------
    def _temp_name(self, op_type: str) -> str:
        # '::' never occurs in FX node names, so temporaries cannot collide with them.
        return f"{self._temp_prefix}::{op_type}_{next(self._counter)}"

    def _as_value(self, value: Any) -> Value | None:
        if value is None or isinstance(value, Value):
            return value
        if isinstance(value, (bool, int, float, list, tuple, np.ndarray, np.generic, torch.Tensor)):
            return self.constant(value)
        raise TypeError(f"g.op input of type {type(value).__name__} is not a Value or a constant")


def attribute_protos(attributes: dict[str, Any]) -> list[onnx.AttributeProto]:
    """The AttributeProtos for a node's `key_suffix=value` attributes."""
    return [_attribute(k, v) for k, v in attributes.items()]


def tensor_proto(value: Any, name: str) -> onnx.TensorProto:
    return _tensor_proto(value, name)


def elem_type(value: Value) -> int | None:
    return None if value.dtype is None else onnx_type(value.dtype)
