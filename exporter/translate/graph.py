"""The graph that symbolic functions write into, with the seed's API, recording onnx_ir nodes.

`g.op("Conv", x, w, b, kernel_shape_i=[3, 3], strides_i=[1, 1])` records an `ir.Node` and
returns its output `Value` (a tuple of them with `outputs=k`). Attribute names carry the seed's
type suffixes: `_i` int(s), `_f` float(s), `_s` string(s), `_t` tensor, `_g` graph. Every node
is stamped with the provenance of the FX node being translated (see `Graph.provenance`).
A `Value` is the seed-style handle on an `ir.Value`: it carries torch's dtype, the shape with
symbolic sizes by name and the constant when known, which symbolic functions read;
exporter.translate.ir_model makes the recorded nodes the `ir.Model` the later stages work on.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import torch
from onnx import helper, numpy_helper

from exporter.translate.dtypes import numpy_type, to_numpy, torch_dtype_of

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
    """An ONNX value (a graph input, an initializer or a node output) as symbolic functions see
    it: the `ir.Value` (`.ir`) with torch's dtype, the shape and the constant when known."""

    __slots__ = ("ir", "dtype", "shape", "const")

    def __init__(
        self,
        value: ir.Value,
        dtype: torch.dtype | None = None,
        shape: tuple[Dim, ...] | None = None,
        const: np.ndarray | None = None,
    ) -> None:
        self.ir = value
        self.dtype = dtype
        self.shape = shape
        self.const = const  # the value when known at export time (constants, initializers)

    @property
    def name(self) -> str:
        return self.ir.name or ""

    @name.setter
    def name(self, name: str) -> None:
        self.ir.name = name

    @property
    def producer(self) -> ir.Node | None:
        """The node computing this value (None for inputs and initializers)."""
        return self.ir.producer()

    def type(self) -> Type:
        return Type(self.dtype, self.shape)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def __repr__(self) -> str:
        return f"%{self.name} : {self.type()!r}"


def _attribute(key: str, value: Any) -> ir.Attr:
    """The `ir.Attr` of a `key_suffix=value` attribute."""
    match = _ATTR_SUFFIX.match(key)
    name, kind = (match["name"], match["kind"]) if match else (key, None)
    many = isinstance(value, (list, tuple))
    if kind == "i":
        return ir.AttrInt64s(name, [int(v) for v in value]) if many else ir.AttrInt64(name, int(value))
    if kind == "f":
        return ir.AttrFloat32s(name, [float(v) for v in value]) if many else ir.AttrFloat32(name, float(value))
    if kind == "s":
        return ir.AttrStrings(name, [str(v) for v in value]) if many else ir.AttrString(name, str(value))
    if kind == "t":
        return ir.AttrTensor(name, ir.serde.deserialize_tensor(_tensor_proto(value, name="")))
    return ir.serde.deserialize_attribute(helper.make_attribute(name, value))


def _tensor_proto(value: Any, name: str) -> onnx.TensorProto:
    if isinstance(value, onnx.TensorProto):
        return value
    if isinstance(value, torch.Tensor):
        value = to_numpy(value)  # bfloat16 and float8 keep their bits (ml_dtypes arrays)
    return numpy_helper.from_array(np.asarray(value), name=name)


class Graph:
    """Records the nodes, graph inputs, initializers and outputs of one ONNX graph into an
    `ir.Graph` (`ir_graph`); exporter.translate.ir_model.build_model makes it a model."""

    def __init__(self, opset_version: int) -> None:
        self.opset_version = opset_version
        self.ir_graph = ir.Graph([], [], nodes=[], opset_imports={"": opset_version})
        self.nodes: list[ir.Node] = []  # the nodes recorded, in order (translation's bookkeeping)
        self._outputs: list[Value] = []  # the handles on the nodes' outputs
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
        """Record an ONNX node (an `ir.Node`) and return its output value(s).

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
        attributes = [_attribute(k, v) for k, v in attrs.items() if v is not None]
        node = ir.Node(domain, op_type, [v.ir if v is not None else None for v in node_inputs], attributes,
                       num_outputs=outputs, metadata_props=dict(self.provenance))
        for out in node.outputs:
            out.name = self._temp_name(op_type)
        self.ir_graph.append(node)
        self.nodes.append(node)
        values = tuple(Value(out) for out in node.outputs)
        self._outputs.extend(values)
        return values[0] if outputs == 1 else values

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
        value = Value(ir.Value(name=name), dtype, shape)
        self.inputs.append(value)
        self.ir_graph.inputs.append(value.ir)
        return value

    def add_initializer(self, name: str, tensor: torch.Tensor | np.ndarray) -> Value:
        array = to_numpy(tensor) if isinstance(tensor, torch.Tensor) else np.asarray(tensor)
        self.initializers[name] = array
        tensor = ir.Tensor(array, name=name)  # a view of the array: no copy
        value = Value(ir.Value(name=name, type=ir.TensorType(tensor.dtype), shape=tensor.shape, const_value=tensor),
                      torch_dtype_of(array.dtype), tuple(array.shape), const=array)
        self.initializer_values[name] = value
        self.ir_graph.register_initializer(value.ir)
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

    def values(self) -> Sequence[Value]:
        """The handles on every node output recorded so far, in the order they were made."""
        return self._outputs

    def nodes_since(self, start: int) -> Sequence[ir.Node]:
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
