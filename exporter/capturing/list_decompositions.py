"""Local decompositions of the tensor-list ops training IR keeps (registered like those of
exporter.capturing.decompositions): each node becomes exactly the ops torch's decomposition makes of it, so a
program that holds them (torchvision's detectors: anchors, box decoding, the score filter) is not
traced a second time by `run_decompositions`.

* `stack(tensors, dim)`: `cat(tensors, dim)` viewed to the stacked shape, or, stacking after the
  last dim, `cat` of each tensor unsqueezed there;
* `unbind(x, dim)` of a static-sized dim: each item read is `squeeze(slice(x, dim, i, i + 1), dim)`;
* `meshgrid(tensors, indexing)`: each grid read is its tensor viewed along its own axis and
  expanded to the grid's shape (`xy` swaps the first two axes, as torch does);
* `where(cond)`: `nonzero(cond)`, each item read its column, `squeeze(slice(nz, 1, i, i + 1), 1)`;
* `expand_as(x, y)`: `expand(x, y's sizes)`, symbolic sizes read with `sym_size`.

Symbolic sizes are read with `sym_size` from the tensor they belong to, once (as the
decomposition reuses one read of each size).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from exporter.capturing.decompositions import (
    Rewrite, _call, _dim, _fake_mode_of, _read_before, _take_over, local_decomposition,
)

aten = torch.ops.aten

_INT64_MAX = 2**63 - 1


def _val(node: Any) -> Any:
    return getattr(node, "meta", {}).get("val")


def _size_node(graph: torch.fx.Graph, before: torch.fx.Node, source: torch.fx.Node, index: int, size: Any) -> Any:
    """`size` (dim `index` of `source`) as view and expand take it: an int, or a sym_size node
    (an earlier read of the same symbol where there is one)."""
    if isinstance(size, int) or (hasattr(size, "node") and size.node.is_constant()):
        return int(size)
    read = _read_before(before, size)
    if read is None:
        with graph.inserting_before(before):
            read = _call(graph, aten.sym_size.int, (source, index))
        read.meta = {**before.meta, "val": size}
    return read


def _item_users(node: torch.fx.Node) -> list[torch.fx.Node] | None:
    """The getitem nodes that read `node`'s items; None when anything else reads the list."""
    users = list(node.users)
    if not all(user.target is operator.getitem and isinstance(user.args[1], int) for user in users):
        return None
    return users


@local_decomposition("aten.stack.default")
def _stack(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """stack(tensors, dim) as torch's decomposition makes it."""
    tensors = node.args[0]
    out = _val(node)
    vals = [_val(t) for t in tensors] if isinstance(tensors, (list, tuple)) else []
    if not vals or not all(isinstance(v, torch.Tensor) for v in vals) or not isinstance(out, torch.Tensor):
        return None
    if node.kwargs or not {"aten.cat.default", "aten.view.default", "aten.unsqueeze.default",
                           "aten.sym_size.int"} <= keep:
        return None
    rank = vals[0].dim()
    dim = _dim(node.args[1] if len(node.args) > 1 else 0, rank + 1)
    if any(v.dim() != rank for v in vals):
        return None

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        items = list(old.args[0])
        first = items[0]
        if dim < rank:
            with graph.inserting_before(old):
                joined = _call(graph, aten.cat.default, (items, dim))
            with _fake_mode_of(out):
                joined.meta = {**old.meta, "val": torch.cat([_val(t) for t in items], dim)}
            sizes = [_size_node(graph, old, first, i, s) for i, s in enumerate(_val(first).shape)]
            sizes.insert(dim, len(items))
            with graph.inserting_before(old):
                new = _call(graph, aten.view.default, (joined, sizes))
        else:
            unsqueezed = []
            with graph.inserting_before(old):
                for item in items:
                    step = _call(graph, aten.unsqueeze.default, (item, dim))
                    with _fake_mode_of(out):
                        step.meta = {**old.meta, "val": _val(item).unsqueeze(dim)}
                    unsqueezed.append(step)
                new = _call(graph, aten.cat.default, (unsqueezed, dim))
        _take_over(old, new)

    return Rewrite(node, apply)


def _column_reads(source_of: Callable[[torch.fx.Graph, torch.fx.Node], torch.fx.Node], dim: int
                  ) -> Callable[[torch.fx.Graph, torch.fx.Node], None]:
    """Replace a list-returning node whose items are read by getitem: item i becomes
    squeeze(slice(source, dim, i, i + 1), dim), `source` made by `source_of(graph, old)`."""

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        source = source_of(graph, old)
        for user in list(old.users):
            index = user.args[1]
            if user.users and all(reader.target is aten.sym_size.int for reader in user.users):
                # only its sizes are read: read them off the source (item dim d is the source's
                # d, or d + 1 past `dim`), as the decomposition does
                for reader in list(user.users):
                    item_dim = reader.args[1]
                    reader.args = (source, item_dim if item_dim < dim else item_dim + 1)
                graph.erase_node(user)
                continue
            item = _val(user)
            with graph.inserting_before(user):
                cut = _call(graph, aten.slice.Tensor, (source, dim, index, index + 1))
                new = _call(graph, aten.squeeze.dim, (cut, dim))
            if isinstance(item, torch.Tensor):
                with _fake_mode_of(item):
                    cut.meta = {**user.meta, "val": item.unsqueeze(dim)}
            _take_over(user, new)
        graph.erase_node(old)

    return apply


@local_decomposition("aten.unbind.int")
def _unbind(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """unbind(x, dim) of a static-sized dim: the items read, as slices squeezed."""
    source = _val(node.args[0])
    if not isinstance(source, torch.Tensor) or source.dim() == 0 or node.kwargs:
        return None
    if not {"aten.slice.Tensor", "aten.squeeze.dim"} <= keep or _item_users(node) is None:
        return None
    dim = _dim(node.args[1] if len(node.args) > 1 else 0, source.dim())
    if not isinstance(source.shape[dim], int):
        return None
    return Rewrite(node, _column_reads(lambda graph, old: old.args[0], dim))


@local_decomposition("aten.where.default")
def _where_condition(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """where(cond) (the indices of the true elements, one tensor per dim) as nonzero's columns."""
    condition = _val(node.args[0])
    if not isinstance(condition, torch.Tensor) or condition.dim() == 0 or node.kwargs:
        return None
    if not {"aten.nonzero.default", "aten.slice.Tensor", "aten.squeeze.dim"} <= keep or _item_users(node) is None:
        return None
    if not node.users:
        return None

    def nonzero(graph: torch.fx.Graph, old: torch.fx.Node) -> torch.fx.Node:
        first = next(iter(old.users))
        with graph.inserting_before(old):
            found = _call(graph, aten.nonzero.default, (old.args[0],))
        item = _val(first)
        if isinstance(item, torch.Tensor):
            with _fake_mode_of(item):
                found.meta = {**old.meta, "val": item.new_empty((item.shape[0], condition.dim()))}
        return found

    return Rewrite(node, _column_reads(nonzero, 1))


@local_decomposition("aten.meshgrid.indexing")
def _meshgrid(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """meshgrid(tensors, indexing): each grid read is its 1-D (or 0-d) tensor viewed along its
    own axis and expanded to the grid's shape."""
    tensors = node.args[0]
    vals = [_val(t) for t in tensors] if isinstance(tensors, (list, tuple)) else []
    if not vals or not all(isinstance(v, torch.Tensor) and v.dim() <= 1 for v in vals):
        return None
    if not {"aten.view.default", "aten.expand.default", "aten.sym_size.int"} <= keep or _item_users(node) is None:
        return None
    indexing = node.kwargs.get("indexing", node.args[1] if len(node.args) > 1 else "ij")
    if indexing not in ("ij", "xy"):
        return None
    count = len(vals)
    swap = indexing == "xy" and count >= 2
    order = list(range(count))  # order[axis]: the tensor along grid axis `axis`
    if swap:
        order[0], order[1] = 1, 0

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        items = list(old.args[0])
        sizes = []
        for axis in range(count):
            source = items[order[axis]]
            value = _val(source)
            sizes.append(1 if value.dim() == 0 else _size_node(graph, old, source, 0, value.shape[0]))
        for user in list(old.users):
            index = user.args[1]
            axis = order.index(index)
            shape = [1] * count
            shape[axis] = -1
            with graph.inserting_before(user):
                viewed = _call(graph, aten.view.default, (items[index], shape))
                new = _call(graph, aten.expand.default, (viewed, list(sizes)))
            with _fake_mode_of(_val(user)):
                viewed.meta = {**user.meta, "val": _val(items[index]).reshape(shape)}
            _take_over(user, new)
        graph.erase_node(old)

    return Rewrite(node, apply)


@local_decomposition("aten.expand_as.default")
def _expand_as(node: torch.fx.Node, keep: frozenset[str]) -> Rewrite | None:
    """expand_as(x, y) as expand(x, y's sizes)."""
    other = _val(node.args[1]) if len(node.args) > 1 else None
    if not isinstance(other, torch.Tensor) or node.kwargs:
        return None
    if not {"aten.expand.default", "aten.sym_size.int"} <= keep:
        return None

    def apply(graph: torch.fx.Graph, old: torch.fx.Node) -> None:
        x, y = old.args
        sizes = [_size_node(graph, old, y, i, s) for i, s in enumerate(_val(y).shape)]
        with graph.inserting_before(old):
            new = _call(graph, aten.expand.default, (x, sizes))
        _take_over(old, new)

    return Rewrite(node, apply)

