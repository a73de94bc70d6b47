"""Constant folding of weight-only subgraphs: preprocessing of the weights done once, at export.

Some symbolics rearrange weights in the graph so that the translation also holds when the
weights are inputs (the recurrent layers reorder gate blocks with Gather, Unsqueeze and
Concat; a Linear on a 3-D input transposes its weight). When those inputs are initializers
the result is the same at every inference: `fold(graph)` computes it at export and stores it
as an initializer instead, so the runtime neither repeats the work nor holds both forms.

Only data movement is folded (Transpose, Gather, Concat, Unsqueeze, Squeeze, Reshape,
Flatten, Slice) and Cast: the folded values are bit for bit what the runtime would
have computed. A node folds when every input is known at export time (an initializer, a
Constant, or an earlier folded value) and at least one is a weight, its outputs are not graph
outputs, and it does not grow the data. The nodes that remain keep their provenance; a folded
value that carried an FX node's name keeps the name, as an initializer, and `fold` returns
which FX node each such value came from (the model records it as `roundtrip.folded_values`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from exporter.dtypes import torch_dtype_of
from exporter.graph import Graph, Node, Value

FOLDED_VALUES_KEY = "roundtrip.folded_values"
"""Model metadata: JSON {initializer name: FX node} for FX values folded into initializers."""


@dataclass
class Folding:
    """What `fold` did: nodes removed, initializers added and dropped, FX values folded."""

    folded_nodes: int = 0
    added: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    fx_values: dict[str, str] = field(default_factory=dict)  # initializer name -> FX node


def fold(graph: Graph) -> Folding:
    """Fold `graph`'s weight-only subgraphs into initializers, in place."""
    result = Folding()
    graph_outputs = {id(v) for v in graph.outputs}
    derived: set[int] = {id(v) for v in graph.initializer_values.values()}  # weights and folded values
    kept: list[Node] = []
    for node in graph.nodes:
        outputs = _evaluate(node, derived, graph_outputs)
        if outputs is None:
            kept.append(node)
            continue
        result.folded_nodes += 1
        for value, array in zip(node.outputs, outputs):
            _become_initializer(graph, value, array)
            derived.add(id(value))
            result.added.append(value.name)
            fx_node = node.provenance.get("roundtrip.fx_node")
            if fx_node and "::" not in value.name:
                result.fx_values[value.name] = fx_node
    if result.folded_nodes:
        graph.nodes[:] = kept
        result.dropped = _drop_unused(graph)
        result.added = [name for name in result.added if name in graph.initializers]
    return result


def _evaluate(node: Node, derived: set[int], graph_outputs: set[int]) -> list[np.ndarray] | None:
    """The node's outputs computed at export time, or None when it should stay in the graph."""
    fn = _FOLDERS.get(node.op_type)
    if fn is None or node.domain or any(id(out) in graph_outputs for out in node.outputs):
        return None
    inputs = node.inputs
    if any(v is not None and v.const is None for v in inputs):
        return None
    if not any(v is not None and id(v) in derived for v in inputs):
        return None  # constants alone: not a weight's preprocessing
    arrays = [None if v is None else v.const for v in inputs]
    try:
        outputs = fn(arrays, node.attributes)
    except Exception:  # an input the folder does not handle (odd dtype, bad axes): the runtime will
        return None
    total_in = sum(a.nbytes for a in arrays if a is not None)
    if sum(o.nbytes for o in outputs) > total_in:
        return None
    return [np.ascontiguousarray(o).reshape(o.shape) for o in outputs]


def _become_initializer(graph: Graph, value: Value, array: np.ndarray) -> None:
    value.producer = None
    value.const = array
    value.dtype = torch_dtype_of(array.dtype)
    value.shape = tuple(array.shape)
    graph.initializers[value.name] = array
    graph.initializer_values[value.name] = value


def _drop_unused(graph: Graph) -> list[str]:
    """Remove the Constant nodes and initializers nothing reads any more; return the initializers."""
    while True:
        read = {id(v) for node in graph.nodes for v in node.inputs if v is not None}
        read |= {id(v) for v in graph.outputs}
        unused = {id(n) for n in graph.nodes if n.op_type == "Constant" and not any(id(o) in read for o in n.outputs)}
        if not unused:
            break
        graph.nodes[:] = [n for n in graph.nodes if id(n) not in unused]
    dropped = [name for name, value in graph.initializer_values.items() if id(value) not in read]
    for name in dropped:
        del graph.initializers[name]
        del graph.initializer_values[name]
    return dropped


# --- the folders: numpy versions of ONNX's data-movement ops ----------------------------------


def _attr(attributes: dict[str, Any], name: str, default: Any) -> Any:
    for key, value in attributes.items():
        if key == name or key.rsplit("_", 1)[0] == name:
            return value
    return default


def _ints(array: np.ndarray | None) -> list[int]:
    return [] if array is None else [int(v) for v in np.asarray(array).reshape(-1)]


def _transpose(a: Sequence[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    perm = _attr(attrs, "perm", None)
    return [np.transpose(a[0], perm)]


def _gather(a, attrs) -> list[np.ndarray]:
    return [np.take(a[0], a[1].astype(np.int64), axis=int(_attr(attrs, "axis", 0)))]


def _concat(a, attrs) -> list[np.ndarray]:
    return [np.concatenate([x for x in a if x is not None], axis=int(_attr(attrs, "axis", 0)))]


def _unsqueeze(a, attrs) -> list[np.ndarray]:
    axes = _ints(a[1]) if len(a) > 1 and a[1] is not None else list(_attr(attrs, "axes", []))
    rank = a[0].ndim + len(axes)
    return [np.expand_dims(a[0], tuple(sorted(x % rank for x in axes)))]


def _squeeze(a, attrs) -> list[np.ndarray]:
    axes = _ints(a[1]) if len(a) > 1 and a[1] is not None else _attr(attrs, "axes", None)
    return [np.squeeze(a[0], axis=None if axes is None else tuple(int(x) % a[0].ndim for x in axes))]


def _reshape(a, attrs) -> list[np.ndarray]:
    shape = _ints(a[1])
    if not int(_attr(attrs, "allowzero", 0)):
        shape = [a[0].shape[i] if size == 0 else size for i, size in enumerate(shape)]
    return [np.reshape(a[0], shape)]


def _flatten(a, attrs) -> list[np.ndarray]:
    axis = int(_attr(attrs, "axis", 1)) % (a[0].ndim + 1)
    outer = int(np.prod(a[0].shape[:axis], dtype=np.int64))
    return [np.reshape(a[0], (outer, -1) if a[0].size else (outer, int(np.prod(a[0].shape[axis:]))))]


def _slice(a, attrs) -> list[np.ndarray]:
    data = a[0]
    starts, ends = _ints(a[1]), _ints(a[2])
    axes = _ints(a[3]) if len(a) > 3 and a[3] is not None else list(range(len(starts)))
    steps = _ints(a[4]) if len(a) > 4 and a[4] is not None else [1] * len(starts)
    index: list[slice] = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[axis % data.ndim] = slice(start, end, step)
    return [data[tuple(index)]]


def _cast(a, attrs) -> list[np.ndarray]:
    to = int(_attr(attrs, "to", onnx.TensorProto.FLOAT))
    return [a[0].astype(helper.tensor_dtype_to_np_dtype(to))]


_FOLDERS: dict[str, Callable[[Sequence[np.ndarray], dict[str, Any]], list[np.ndarray]]] = {
    "Transpose": _transpose,
    "Gather": _gather,
    "Concat": _concat,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Slice": _slice,
    "Cast": _cast,
}
