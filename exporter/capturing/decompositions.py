"""The catalogue of local decompositions: composite ops of training IR rewritten, node by node,
into exactly the ops torch's decomposition would have produced (the planner that decides when
they apply is `exporter.capturing.functionalize`).

Each is registered where it is defined, by `@local_decomposition(target, ...)`, with its flags:

* `batch_norm` in eval mode (running statistics, training=False) becomes
  `_native_batch_norm_legit_no_training`, whose first output replaces it;
* `dropout` with train=False is the identity: its users read its input;
* `flatten` and `unflatten` become `view` (symbolic sizes read with `sym_size`), `reshape`
  becomes `view` (or `_unsafe_view` of a `clone` where the strides allow no view), and
  `contiguous` is its input (or a `clone` when that is not contiguous);
* `silu` becomes `mul(x, sigmoid(x))`, `zeros_like`/`ones_like` `full_like`, `new_zeros`/
  `new_ones`/`new_full` `full` and `new_empty` `empty` in the result's dtype and device, the
  short `arange` forms `arange(start, end, 1)`;
* `a & b`, `a | b` become `bitwise_and`, `bitwise_or`; `zeros`/`ones` `full`; `diff(x)` (one
  step, numeric x) the difference of two slices; `where` and `masked_fill` with a Python
  scalar `where.self` of a `scalar_tensor`; `chunk` along a static dim `split`, constant
  `pad` `constant_pad_nd`; `baddbmm` with unit scales `add(self, bmm)`; `rms_norm` in float32
  or float64 its formula;
* `to` is its input where it changes nothing, else `_to_copy` to the result's dtype (a device
  change is left to the decomposition); `detach` is its input, `lift_fresh_copy` (a tensor
  literal) a `clone`;
* the tensor-list ops (`stack`, `unbind`, `meshgrid`, `where(cond)`, `expand_as`) are in
  `exporter.capturing.list_decompositions`, registered with the same decorator when the planner
  (`functionalize`) imports them.

A decomposition's plan `plan(node, keep)` returns the `Rewrite` to apply, or None when the node's
arguments (or the ops it would need, absent from `keep`) leave it to torch's decomposition.
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

logger = logging.getLogger(__name__)

aten = torch.ops.aten

Apply = Callable[[torch.fx.Graph, torch.fx.Node], None]


@dataclass(frozen=True)
class Rewrite:
    """One planned rewrite: the node and the function that replaces it in the graph."""

    node: torch.fx.Node
    apply: Apply
    forwards: bool = False  # its users will read its first argument (dropout, a no-op `to`)


Plan = Callable[[torch.fx.Node, frozenset[str]], "Rewrite | None"]


@dataclass(frozen=True)
class LocalDecomposition:
    """A registered local decomposition of one ATen overload."""

    target: str  # the overload's name, `aten.silu.default`
    plan: Plan
    fresh_result: bool  # when applied (not forwarded), its ops compute a new tensor: it aliases nothing


LOCAL_DECOMPOSITIONS: dict[str, LocalDecomposition] = {}


def local_decomposition(*targets: str, fresh_result: bool = False,
                        per_target: Mapping[str, Mapping[str, Any]] | None = None) -> Callable[[Plan], Plan]:
    """Register `plan(node, keep) -> Rewrite | None` as the local decomposition of each overload
    in `targets` (`"aten.silu.default"`).

    `per_target` maps more overloads to the keyword arguments `plan` takes for each
    (`{"aten.zeros.default": {"fill": 0}}`): one plan serves a family, each member's parameters
    bound at registration (the planner also applies it to the op's in-place form, whose own
    name differs). `fresh_result`: the ops it makes compute a new tensor (not a view of an
    input), so an in-place form of the op may become it when nothing observes the mutation.
    """

    def register(plan: Plan) -> Plan:
        bound = {target: plan for target in targets}
        bound.update({target: functools.partial(plan, **options) for target, options in (per_target or {}).items()})
        for target, target_plan in bound.items():
            if target in LOCAL_DECOMPOSITIONS:
                raise ValueError(f"two local decompositions for {target}: keep one")
            LOCAL_DECOMPOSITIONS[target] = LocalDecomposition(target, target_plan, fresh_result)
        return plan

    return register


def replace_with(functional: torch._ops.OpOverload) -> Apply:
    """Replace a node by one call of `functional` on the same arguments."""

    def apply(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
        with graph.inserting_before(node):
            new = _call(graph, functional, node.args, node.kwargs)
        _take_over(node, new)

    return apply


def _call(graph: torch.fx.Graph, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
          ) -> torch.fx.Node:
    """A call_function node named as torch's decomposition names them (`relu`, `relu_1`, ...,
    `sym_size_int`), so rows and reports read the same whichever way the graph was made."""
    if target is operator.getitem:
        name = "getitem"
    elif target is aten.sym_size.int:
        name = "sym_size_int"
    else:
        name = target.overloadpacket.__name__
    return graph.create_node("call_function", target, tuple(args), dict(kwargs or {}), name=name)


def _take_over(old: torch.fx.Node, new: torch.fx.Node, val: Any = None) -> None:
    """Give `new` the meta (provenance, value) of `old`, point `old`'s users at it, drop `old`."""
    new.meta = dict(old.meta)
    if val is not None:
        new.meta["val"] = val
    old.replace_all_uses_with(new)
    old.graph.erase_node(old)


# --- composite ops ---------------------------------------------------------------------------


@local_decomposition("aten.batch_norm.default")
def _batch_norm(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """batch_norm(x, w, b, mean, var, training=False, momentum, eps, cudnn) in eval mode."""
    target = aten._native_batch_norm_legit_no_training.default
    if node.kwargs or len(node.args) != 9:
        return None
    _, _, _, mean, var, training, _, _, _ = node.args
    if str(target) not in keep or training is not False or mean is None or var is None:
        return None

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        x, weight, bias, mean, var, _, momentum, eps, _ = old.args
        out = old.meta.get("val")
        with graph.inserting_before(old):
            new = _call(graph, target, (x, weight, bias, mean, var, momentum, eps))
            first = _call(graph, operator.getitem, (new, 0))
        new.meta = dict(old.meta)
        if isinstance(out, torch.Tensor):
            with _fake_mode_of(out):
                new.meta["val"] = (out, out.new_empty((0,)), out.new_empty((0,)))
        first.meta = dict(old.meta)
        old.replace_all_uses_with(first)
        graph.erase_node(old)

    return Rewrite(node, apply)


@local_decomposition("aten.dropout.default")
def _dropout(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """dropout(x, p, train=False) is x."""
    train = node.kwargs.get("train", node.args[2] if len(node.args) > 2 else True)
    if train is not False:
        return None

    return Rewrite(node, _forward, forwards=True)


@local_decomposition("aten.detach.default")
def _detach(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """detach(x) is x in a captured inference graph (the decomposition makes it an alias)."""
    return Rewrite(node, _forward, forwards=True)


@local_decomposition("aten.lift_fresh_copy.default", fresh_result=True)
def _lift_fresh_copy(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """lift_fresh_copy(constant) (a tensor literal in forward) as clone(constant)."""
    if "aten.clone.default" not in keep or node.kwargs or len(node.args) != 1:
        return None
    return Rewrite(node, _replaced_by(aten.clone.default, lambda old: (old.args[0],), lambda old: {}))


def _forward(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
    """Drop `old`, an op whose result is its first argument; its users read that."""
    old.replace_all_uses_with(old.args[0])
    graph.erase_node(old)


@local_decomposition("aten.flatten.using_ints")
def _flatten(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """flatten(x, start, end) as view(x, shape), each symbolic size read off x with sym_size."""
    x = node.args[0]
    source, out = getattr(x, "meta", {}).get("val"), node.meta.get("val")
    if not (isinstance(source, torch.Tensor) and isinstance(out, torch.Tensor)) or node.kwargs:
        return None
    if not {"aten.view.default", "aten.sym_size.int"} <= keep:
        return None
    rank = source.dim()
    start = _dim(node.args[1] if len(node.args) > 1 else 0, rank)
    end = _dim(node.args[2] if len(node.args) > 2 else -1, rank)
    if rank == 0 or start > end:
        return None
    kept_dims = list(range(start)) + [None] + list(range(end + 1, rank))  # None: the merged one
    sizes: list[Any] = []
    for index, size in zip(kept_dims, out.shape):
        if isinstance(size, int) or (hasattr(size, "node") and size.node.is_constant()):
            sizes.append(int(size))
        elif index is None:
            sizes.append(-1)  # the one merged symbolic size; view infers it
        else:
            sizes.append(("sym_size", index, size))

    return Rewrite(node, _view_as_sizes(sizes))


def _view_as_sizes(sizes: list[Any]) -> Callable[[torch.fx.Graph, torch.fx.Node], None]:
    """Replace a node by `view(x, shape)`: each size an int, a node, or ("sym_size", dim, symbol)
    for a symbolic size of x read with sym_size."""

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        x = old.args[0]
        shape: list[Any] = []
        with graph.inserting_before(old):
            for size in sizes:
                if isinstance(size, tuple):
                    _, index, symbol = size
                    read = _read_before(old, symbol)
                    if read is None:
                        read = _call(graph, aten.sym_size.int, (x, index))
                        read.meta = {**old.meta, "val": symbol}
                    shape.append(read)
                else:
                    shape.append(size)
            new = _call(graph, aten.view.default, (x, shape))
        _take_over(old, new)

    return apply


def _read_before(node: torch.fx.Node, symbol: Any) -> torch.fx.Node | None:
    """A sym_size node before `node` that already reads `symbol` (as the decomposition reuses
    one read of each size), or None."""
    for earlier in node.graph.nodes:
        if earlier is node:
            return None
        if earlier.target is aten.sym_size.int:
            value = earlier.meta.get("val")
            if hasattr(value, "node") and value.node.expr == symbol.node.expr:
                return earlier
    return None


def _source_size(size: Any, index: int) -> Any:
    """A size of x as `view` takes it: an int, or ("sym_size", index, symbol) to read it."""
    if isinstance(size, int) or (hasattr(size, "node") and size.node.is_constant()):
        return int(size)
    return ("sym_size", index, size)


@local_decomposition("aten.unflatten.int")
def _unflatten(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """unflatten(x, dim, sizes) as view(x, shape): x's other sizes (read with sym_size where
    symbolic) around `sizes`."""
    source = getattr(node.args[0], "meta", {}).get("val")
    if not isinstance(source, torch.Tensor) or node.kwargs or len(node.args) != 3:
        return None
    if not {"aten.view.default", "aten.sym_size.int"} <= keep or source.dim() == 0:
        return None
    dim, inner = _dim(node.args[1], source.dim()), list(node.args[2])
    if not all(isinstance(s, (int, torch.fx.Node)) for s in inner):
        return None
    outer = [_source_size(size, i) for i, size in enumerate(source.shape)]
    return Rewrite(node, _view_as_sizes(outer[:dim] + inner + outer[dim + 1:]))


def _dim(value: int, rank: int) -> int:
    return value + rank if value < 0 else value


def _fake_mode_of(value: torch.Tensor):
    mode = getattr(value, "fake_mode", None)
    return nullcontext() if mode is None else mode


# --- composite ops kept whole by training IR, as torch's decomposition makes them ---------------


@local_decomposition("aten.silu.default", fresh_result=True)
def _silu(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """silu(x) as mul(x, sigmoid(x))."""
    if not {"aten.sigmoid.default", "aten.mul.Tensor"} <= keep or node.kwargs or len(node.args) != 1:
        return None

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        x = old.args[0]
        with graph.inserting_before(old):
            gate = _call(graph, aten.sigmoid.default, (x,))
            new = _call(graph, aten.mul.Tensor, (x, gate))
        gate.meta = dict(old.meta)  # the same shape and dtype as the result
        _take_over(old, new)

    return Rewrite(node, apply)


@local_decomposition("aten.baddbmm.default")
def _baddbmm(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """baddbmm(self, b1, b2) with beta = alpha = 1 (attention's mask plus scores) as
    add(self, bmm(b1, b2)); other scalings are left to torch's decomposition."""
    if not {"aten.bmm.default", "aten.add.Tensor"} <= keep or len(node.args) != 3:
        return None
    if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
        return None

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        bias, first, second = old.args
        with graph.inserting_before(old):
            product = _call(graph, aten.bmm.default, (first, second))
            new = _call(graph, aten.add.Tensor, (bias, product))
        product.meta = dict(old.meta)  # [B, N, P]: the result's shape (self only broadcasts to it)
        _take_over(old, new)

    return Rewrite(node, apply)


@local_decomposition("aten.rms_norm.default")
def _rms_norm(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """rms_norm(x, shape, weight, eps) in float32 or float64 as x * rsqrt(mean(x^2) + eps) * weight,
    over the last len(shape) axes (eps None: the dtype's machine epsilon); half types, which the
    decomposition computes in float32, are left to it."""
    needed = {"aten.pow.Tensor_Scalar", "aten.mean.dim", "aten.add.Scalar", "aten.rsqrt.default", "aten.mul.Tensor"}
    value = node.meta.get("val")
    if not needed <= keep or node.kwargs or not isinstance(value, torch.Tensor):
        return None
    if value.dtype not in (torch.float32, torch.float64) or not 2 <= len(node.args) <= 4:
        return None
    eps = node.args[3] if len(node.args) > 3 and node.args[3] is not None else torch.finfo(value.dtype).eps
    dims = list(range(-len(node.args[1]), 0))

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        x = old.args[0]  # read when applied: an earlier rewrite may have replaced the producers
        weight = old.args[2] if len(old.args) > 2 else None
        x_val = x.meta["val"]
        with _fake_mode_of(x_val):
            square_val = x_val.pow(2)
            mean_val = torch.mean(square_val, dims, keepdim=True)
        with graph.inserting_before(old):
            square = _call(graph, aten.pow.Tensor_Scalar, (x, 2))
            mean = _call(graph, aten.mean.dim, (square, dims, True))
            shifted = _call(graph, aten.add.Scalar, (mean, eps))
            scale = _call(graph, aten.rsqrt.default, (shifted,))
            new = normed = _call(graph, aten.mul.Tensor, (x, scale))
            if weight is not None:
                new = _call(graph, aten.mul.Tensor, (normed, weight))
        for part, val in ((square, square_val), (mean, mean_val), (shifted, mean_val), (scale, mean_val)):
            part.meta = {**old.meta, "val": val}
        if weight is not None:
            normed.meta = dict(old.meta)
        _take_over(old, new)

    return Rewrite(node, apply)


def _replaced_by(target: torch._ops.OpOverload, args: Callable[[torch.fx.Node], tuple[Any, ...]],
                 kwargs: Callable[[torch.fx.Node], dict[str, Any]]) -> Callable[[torch.fx.Graph, torch.fx.Node], None]:
    """Replace a node by one call of `target` on arguments made from the old node."""

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        with graph.inserting_before(old):
            new = _call(graph, target, args(old), kwargs(old))
        _take_over(old, new)

    return apply


@local_decomposition(per_target={"aten.zeros_like.default": {"fill": 0}, "aten.ones_like.default": {"fill": 1}})
def _like(node: torch.fx.Node, keep: frozenset[str], *, fill: int) -> Rewrite | None:
    """zeros_like / ones_like(x, **options) as full_like(x, fill, **options)."""
    if "aten.full_like.default" not in keep or len(node.args) != 1:
        return None
    return Rewrite(node, _replaced_by(aten.full_like.default, lambda old: (old.args[0], fill),
                                      lambda old: dict(old.kwargs)))


def _factory_options(node: torch.fx.Node) -> dict[str, Any]:
    """The dtype and device of the node's result, as a factory's keyword arguments."""
    out = node.meta["val"]
    return {"dtype": out.dtype, "layout": torch.strided, "device": out.device, "pin_memory": False}


@local_decomposition(per_target={  # fill "given": the call's own; None: new_empty, as empty
    "aten.new_zeros.default": {"fill": 0}, "aten.new_ones.default": {"fill": 1},
    "aten.new_full.default": {"fill": "given"}, "aten.new_empty.default": {"fill": None},
})
def _new(node: torch.fx.Node, keep: frozenset[str], *, fill: Any) -> Rewrite | None:
    """x.new_zeros / new_ones / new_full(size[, fill]) as full(size, fill) in the result's dtype
    and device; new_empty as empty."""
    target = aten.empty.memory_format if fill is None else aten.full.default
    if str(target) not in keep or not isinstance(node.meta.get("val"), torch.Tensor):
        return None
    if node.meta["val"].layout != torch.strided or len(node.args) != (3 if fill == "given" else 2):
        return None
    value = (lambda old: old.args[2]) if fill == "given" else (lambda old: fill)
    args = (lambda old: (old.args[1],)) if fill is None else (lambda old: (old.args[1], value(old)))
    return Rewrite(node, _replaced_by(target, args, _factory_options))


@local_decomposition("aten.arange.default", "aten.arange.start")
def _arange(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """arange(end) and arange(start, end) as arange(start, end, 1)."""
    if "aten.arange.start_step" not in keep or len(node.args) not in (1, 2) or "val" not in node.meta:
        return None
    bounds = (lambda old: (0, old.args[0], 1)) if len(node.args) == 1 else (lambda old: (*old.args, 1))
    return Rewrite(node, _replaced_by(aten.arange.start_step, bounds, _typed_options))


@local_decomposition("aten.to.dtype", "aten.to.device", "aten.to.dtype_layout", "aten.to.other", fresh_result=True)
def _to(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """Every `to` overload: nothing when the result is its input (same dtype and device, no
    copy asked), else `_to_copy` to the result's dtype. A device change is left to torch's
    decomposition (ONNX has no devices)."""
    source, out = getattr(node.args[0], "meta", {}).get("val"), node.meta.get("val")
    if not (isinstance(source, torch.Tensor) and isinstance(out, torch.Tensor)):
        return None
    if source.device != out.device:
        logger.debug("%s moves a tensor from %s to %s", node.name, source.device, out.device)
        return None
    if out.layout != torch.strided or "aten._to_copy.default" not in keep:
        return None
    if source.dtype == out.dtype and not _bound(node).get("copy", False):
        return Rewrite(node, _forward, forwards=True)
    return Rewrite(node, _replaced_by(aten._to_copy.default, lambda old: (old.args[0],),
                                       lambda old: {"dtype": out.dtype}))


def _bound(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by their schema names."""
    names = [a.name for a in node.target._schema.arguments]
    return {**dict(zip(names, node.args)), **node.kwargs}


@local_decomposition("aten.contiguous.default")
def _contiguous(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """contiguous(x): x itself where it already is contiguous, else clone(x) in that format."""
    source = getattr(node.args[0], "meta", {}).get("val")
    layout = _bound(node).get("memory_format", torch.contiguous_format)
    if not isinstance(source, torch.Tensor) or "aten.clone.default" not in keep:
        return None
    if source.is_contiguous(memory_format=layout):
        return Rewrite(node, _forward, forwards=True)
    return Rewrite(node, _replaced_by(aten.clone.default, lambda old: (old.args[0],),
                                       lambda old: {"memory_format": layout}))


@local_decomposition("aten.reshape.default")
def _reshape(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """reshape(x, shape) as x where the shape is x's, view(x, shape) where x's strides allow a
    view, else as _unsafe_view(clone(x), shape)."""
    source, out = getattr(node.args[0], "meta", {}).get("val"), node.meta.get("val")
    if not (isinstance(source, torch.Tensor) and isinstance(out, torch.Tensor)) or node.kwargs:
        return None
    if not {"aten.view.default", "aten._unsafe_view.default", "aten.clone.default"} <= keep:
        return None
    if [str(size) for size in out.shape] == [str(size) for size in source.shape]:
        return Rewrite(node, _forward, forwards=True)  # to its own shape: torch returns x itself
    try:
        with _fake_mode_of(source):
            source.view(out.shape)
    except (RuntimeError, ValueError):  # the strides do not allow it: torch copies
        return Rewrite(node, _cloned_view)
    return Rewrite(node, _replaced_by(aten.view.default, lambda old: tuple(old.args), lambda old: {}))


def _cloned_view(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
    x, shape = old.args
    with graph.inserting_before(old):
        copy = _call(graph, aten.clone.default, (x,), {"memory_format": torch.contiguous_format})
        new = _call(graph, aten._unsafe_view.default, (copy, shape))
    source = x.meta["val"]
    with _fake_mode_of(source):
        copy.meta = {**old.meta, "val": source.clone(memory_format=torch.contiguous_format)}
    _take_over(old, new)


@local_decomposition(per_target={"aten.__and__.Tensor": {"target": aten.bitwise_and.Tensor},
                                 "aten.__or__.Tensor": {"target": aten.bitwise_or.Tensor}})
def _renamed(node: torch.fx.Node, keep: frozenset[str], *, target: torch._ops.OpOverload) -> Rewrite | None:
    """An op that is another under a Python name (`a & b` is bitwise_and): same arguments."""
    if str(target) not in keep:
        return None
    return Rewrite(node, replace_with(target))


@local_decomposition(per_target={"aten.zeros.default": {"fill": 0}, "aten.ones.default": {"fill": 1}})
def _filled(node: torch.fx.Node, keep: frozenset[str], *, fill: int) -> Rewrite | None:
    """zeros / ones(size, **options) as full(size, fill, **options)."""
    if "aten.full.default" not in keep or len(node.args) != 1 or "val" not in node.meta:
        return None
    return Rewrite(node, _replaced_by(aten.full.default, lambda old: (old.args[0], fill), _typed_options))


def _typed_options(node: torch.fx.Node) -> dict[str, Any]:
    """The node's keyword arguments with the dtype torch inferred for its result spelled out
    (`zeros(n)` is float32 where `full(n, 0)` would be int64)."""
    return {**node.kwargs, "dtype": node.meta["val"].dtype}


_INT64_MAX = 2**63 - 1  # slice's "to the end", as torch writes it


@local_decomposition("aten.diff.default")
def _diff(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """diff(x, 1, dim, prepend, append) of a numeric x as sub(y[1:], y[:-1]) along dim, y being
    x with `prepend` and `append` concatenated around it."""
    source = getattr(node.args[0], "meta", {}).get("val")
    options = _bound(node)
    if not isinstance(source, torch.Tensor) or source.dtype == torch.bool or source.dim() == 0:
        return None  # diff of bools is a logical_xor
    ends = [options.get("prepend"), options.get("append")]
    if options.get("n", 1) != 1 or not {"aten.slice.Tensor", "aten.sub.Tensor", "aten.cat.default"} <= keep:
        return None
    vals = [getattr(e, "meta", {}).get("val") for e in ends if e is not None]
    if any(not isinstance(v, torch.Tensor) or v.dim() != source.dim() or v.dtype != source.dtype for v in vals):
        return None  # a 0-d or differently typed end: torch broadcasts or promotes it first
    dim = _dim(options.get("dim", -1), source.dim())

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        x = old.args[0]
        with graph.inserting_before(old):
            if ends != [None, None]:
                parts = [e for e in (ends[0], x, ends[1]) if e is not None]
                joined = _call(graph, aten.cat.default, (parts, dim))
                with _fake_mode_of(source):
                    joined.meta = {**old.meta, "val": torch.cat([p.meta["val"] for p in parts], dim)}
                x = joined
            later = _call(graph, aten.slice.Tensor, (x, dim, 1, _INT64_MAX))
            earlier = _call(graph, aten.slice.Tensor, (x, dim, 0, -1))
            new = _call(graph, aten.sub.Tensor, (later, earlier))
        for part in (later, earlier):
            part.meta = dict(old.meta)  # the shape and dtype of the result
        _take_over(old, new)

    return Rewrite(node, apply)


@local_decomposition(per_target={
    "aten.where.ScalarOther": {"position": 2}, "aten.where.ScalarSelf": {"position": 1},
    "aten.masked_fill.Scalar": {"position": 2, "masked": True},
})
def _where_scalar(node: torch.fx.Node, keep: frozenset[str], *, position: int, masked: bool = False) -> Rewrite | None:
    """where(cond, a, b) with a Python scalar at argument `position` as where.self, the scalar a
    0-d tensor of the result's dtype; masked_fill(x, mask, value) (`masked`) as
    where(mask, value, x)."""
    out = node.meta.get("val")
    if not {"aten.where.self", "aten.scalar_tensor.default"} <= keep or not isinstance(out, torch.Tensor):
        return None
    if node.kwargs or len(node.args) != 3 or isinstance(node.args[position], torch.fx.Node):
        return None
    tensor = node.args[0 if masked else 3 - position]
    if getattr(tensor, "meta", {}).get("val", out).dtype != out.dtype:
        return None  # the decomposition casts the tensor first (an int where a float scalar)

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        args, value = list(old.args), old.args[position]
        with graph.inserting_before(old):
            args[position] = _call(graph, aten.scalar_tensor.default, (value,),
                                   {"dtype": out.dtype, "layout": torch.strided, "device": out.device})
            cond, a, b = (args[1], args[2], args[0]) if masked else args
            new = _call(graph, aten.where.self, (cond, a, b))
        scalar = args[position]
        with _fake_mode_of(out):
            scalar.meta = {**old.meta, "val": torch.scalar_tensor(value, dtype=out.dtype, device=out.device)}
        _take_over(old, new)

    return Rewrite(node, apply)


@local_decomposition("aten.chunk.default")
def _chunk(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """chunk(x, chunks, dim) of a static-sized dim as split(x, ceil(size / chunks), dim)."""
    source, options = getattr(node.args[0], "meta", {}).get("val"), _bound(node)
    if not isinstance(source, torch.Tensor) or source.dim() == 0 or "aten.split.Tensor" not in keep:
        return None
    dim, chunks = _dim(options.get("dim", 0), source.dim()), options.get("chunks")
    size = source.shape[dim]
    if not isinstance(size, int) or not isinstance(chunks, int) or chunks <= 0 or size == 0:
        return None
    step = -(-size // chunks)
    return Rewrite(node, _replaced_by(aten.split.Tensor, lambda old: (old.args[0], step, dim), lambda old: {}))


@local_decomposition("aten.pad.default")
def _pad(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """pad(x, pad) in constant mode as constant_pad_nd(x, pad, value)."""
    options = _bound(node)
    if options.get("mode", "constant") != "constant" or "aten.constant_pad_nd.default" not in keep:
        return None
    value = options.get("value")
    return Rewrite(node, _replaced_by(aten.constant_pad_nd.default,
                                       lambda old: (old.args[0], options["pad"], 0 if value is None else value),
                                       lambda old: {}))

