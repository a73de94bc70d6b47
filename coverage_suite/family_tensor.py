"""Tensor families: reductions, shape/view ops, indexing/gather/scatter/masking, creation ops,
sorting/top-k/arg-reductions."""

from __future__ import annotations

import torch
import torch.nn.functional as nnf

from .case import B, F, I, P, Spec, Table

reduce = Table("reduce")
REDUCTIONS = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin}
DIMS = {"d0": 0, "dlast": -1, "d02": (0, 2)}
for _name, _fn in REDUCTIONS.items():
    reduce.fn(f"{_name}_all", f"torch.{_name} over every element", _fn, F(3, 4, 5))
    for _d, _dim in DIMS.items():
        for _keep in (False, True):
            reduce.fn(f"{_name}_{_d}_keep{int(_keep)}", f"torch.{_name}(dim={_dim}, keepdim={_keep})",
                      lambda x, f=_fn, d=_dim, k=_keep: f(x, dim=d, keepdim=k), F(3, 4, 5))
for _name, _fn in {"prod": torch.prod, "max": lambda x, dim, keepdim: torch.max(x, dim, keepdim),
                   "min": lambda x, dim, keepdim: torch.min(x, dim, keepdim),
                   "median": lambda x, dim, keepdim: torch.median(x, dim, keepdim)}.items():
    for _dim in (0, -1):
        for _keep in (False, True):
            reduce.fn(f"{_name}_dim{_dim}_keep{int(_keep)}", f"torch.{_name}(dim={_dim}, keepdim={_keep})",
                      lambda x, f=_fn, d=_dim, k=_keep: f(x, dim=d, keepdim=k), P(3, 4, 5))
reduce.fn("prod_all", "torch.prod over every element", torch.prod, P(2, 3))
reduce.fn("max_all", "torch.max over every element", torch.max, F(3, 4, 5))
reduce.fn("min_all", "torch.min over every element", torch.min, F(3, 4, 5))
reduce.fn("sum_int", "torch.sum of an int64 tensor (int64 result)", lambda x: x.sum(1), I(3, 4, 5))
reduce.fn("sum_bool", "torch.sum of a bool tensor (counts)", lambda x: x.sum(-1), B(3, 4, 5))
reduce.fn("sum_dtype", "torch.sum with dtype=float64", lambda x: x.sum(0, dtype=torch.float64), F(3, 4, 5))
reduce.fn("mean_dtype_int", "mean of an int tensor cast to float", lambda x: x.float().mean(-1), I(3, 4, 5))
for _name, _fn in {"all": torch.all, "any": torch.any}.items():
    reduce.fn(f"{_name}_all", f"torch.{_name} of a bool tensor", _fn, B(3, 4))
    reduce.fn(f"{_name}_dim", f"torch.{_name}(dim=1) of a bool tensor", lambda x, f=_fn: f(x, dim=1), B(3, 4))
    reduce.fn(f"{_name}_float", f"torch.{_name}(dim=0) of a float tensor", lambda x, f=_fn: f(torch.relu(x), dim=0), F(3, 4))
reduce.fn("count_nonzero", "torch.count_nonzero(dim=1)", lambda x: torch.count_nonzero(torch.relu(x), dim=1), F(3, 4, 5))
reduce.fn("aminmax", "torch.aminmax(dim=-1)", lambda x: torch.aminmax(x, dim=-1), F(3, 4, 5))
reduce.fn("nansum", "torch.nansum over a tensor with NaN", lambda x: torch.nansum(torch.log(x), dim=1), F(3, 4, 5))
reduce.fn("mean_neg_dims", "mean over dims (-1, -2) keepdim", lambda x: x.mean((-1, -2), keepdim=True), F(2, 3, 4, 5))

shape = Table("shape")
SHAPES = {
    "reshape": lambda x: x.reshape(6, 10), "reshape_neg1": lambda x: x.reshape(-1, 5), "view": lambda x: x.view(3, 20),
    "view_as": lambda x: x.view_as(torch.empty(12, 5)), "flatten_all": torch.flatten,
    "flatten_1": lambda x: torch.flatten(x, 1), "flatten_0_1": lambda x: torch.flatten(x, 0, 1),
    "unflatten": lambda x: x.unflatten(2, (5, 1)), "permute_021": lambda x: x.permute(0, 2, 1),
    "permute_210": lambda x: x.permute(2, 1, 0), "transpose_01": lambda x: x.transpose(0, 1),
    "transpose_neg": lambda x: x.transpose(-1, -2), "movedim": lambda x: torch.movedim(x, 0, -1),
    "swapaxes": lambda x: torch.swapaxes(x, 0, 2), "mT": lambda x: x.mT, "unsqueeze_0": lambda x: x.unsqueeze(0),
    "unsqueeze_neg": lambda x: x.unsqueeze(-1), "squeeze_all": lambda x: x.unsqueeze(1).unsqueeze(3).squeeze(),
    "squeeze_dim": lambda x: x.unsqueeze(1).squeeze(1), "expand": lambda x: x[:, :1].expand(3, 4, 5),
    "expand_new_dim": lambda x: x.expand(2, 3, 4, 5), "expand_as": lambda x: x[:1].expand_as(x),
    "broadcast_to": lambda x: torch.broadcast_to(x[:, :1, :], (3, 4, 5)), "repeat": lambda x: x.repeat(2, 1, 2),
    "repeat_new_dim": lambda x: x.repeat(2, 1, 1, 1), "tile": lambda x: torch.tile(x, (2,)),
    "flip_0": lambda x: torch.flip(x, (0,)), "flip_12": lambda x: torch.flip(x, (1, 2)),
    "roll_1": lambda x: torch.roll(x, 1, 1), "roll_multi": lambda x: torch.roll(x, (2, -1), (0, 2)),
    "roll_flat": lambda x: torch.roll(x, 3), "narrow": lambda x: torch.narrow(x, 2, 1, 3),
    "contiguous_t": lambda x: x.transpose(0, 2).contiguous() * 2, "t_2d": lambda x: x[0].t(),
    "chunk_3": lambda x: torch.chunk(x, 3, 0), "chunk_uneven": lambda x: torch.chunk(x, 2, 2),
    "split_size": lambda x: torch.split(x, 2, 2), "split_sizes": lambda x: torch.split(x, [1, 3], 1),
    "tensor_split": lambda x: torch.tensor_split(x, 3, dim=2), "unbind_0": lambda x: torch.unbind(x, 0),
    "unbind_last": lambda x: torch.unbind(x, -1), "rot90": lambda x: torch.rot90(x, 1, (1, 2)),
    "diag_embed": lambda x: torch.diag_embed(x[0]), "atleast_3d": lambda x: torch.atleast_3d(x[0, 0]),
}
for _name, _fn in SHAPES.items():
    shape.fn(_name, f"{_name.replace('_', ' ')} of a (3, 4, 5) tensor", _fn, F(3, 4, 5))
for _dim in (0, 1, -1):
    shape.fn(f"cat_dim{_dim}", f"torch.cat of three tensors on dim {_dim}", lambda x, y, d=_dim: torch.cat([x, y, x], d),
             F(2, 3, 4), F(2, 3, 4))
    shape.fn(f"stack_dim{_dim}", f"torch.stack of two tensors on dim {_dim}", lambda x, y, d=_dim: torch.stack([x, y], d),
             F(2, 3, 4), F(2, 3, 4))
shape.fn("cat_uneven", "torch.cat of (2, 3) and (4, 3) on dim 0", lambda x, y: torch.cat([x, y]), F(2, 3), F(4, 3))
shape.fn("cat_int", "torch.cat of int64 tensors", lambda x, y: torch.cat([x, y], 1), I(2, 3), I(2, 3))
shape.fn("hstack", "torch.hstack", lambda x, y: torch.hstack([x, y]), F(2, 3), F(2, 3))
shape.fn("vstack", "torch.vstack", lambda x, y: torch.vstack([x, y]), F(2, 3), F(2, 3))
shape.fn("dstack", "torch.dstack", lambda x, y: torch.dstack([x, y]), F(2, 3), F(2, 3))
shape.fn("meshgrid_ij", "torch.meshgrid(indexing='ij')", lambda x, y: torch.meshgrid(x, y, indexing="ij"), F(3), F(4))
shape.fn("meshgrid_xy", "torch.meshgrid(indexing='xy')", lambda x, y: torch.meshgrid(x, y, indexing="xy"), F(3), F(4))
shape.fn("cartesian_prod", "torch.cartesian_prod", torch.cartesian_prod, F(3), F(4))
shape.fn("view_dtype_cast", "a view after a dtype cast", lambda x: x.to(torch.float64).view(12, 5), F(3, 4, 5))
shape.fn("reshape_bool", "reshape of a bool tensor", lambda x: x.reshape(4, 15), B(3, 4, 5))

index = Table("index")
INDEXING = {
    "slice_basic": lambda x: x[1:3], "slice_step": lambda x: x[:, ::2], "slice_neg": lambda x: x[..., -3:-1],
    "slice_multi": lambda x: x[1:, 1:3, ::2], "select_int": lambda x: x[1], "select_neg": lambda x: x[:, -1],
    "ellipsis_none": lambda x: x[..., None, 1], "index_list": lambda x: x[[0, 2]],
    "index_list_dim1": lambda x: x[:, [3, 0, 1]], "index_two_lists": lambda x: x[[0, 2], [1, 3]],
    "diagonal": lambda x: torch.diagonal(x, 0, 1, 2), "diagonal_offset": lambda x: torch.diagonal(x, 1, 1, 2),
    "tril": torch.tril, "triu_1": lambda x: torch.triu(x, 1), "tril_neg": lambda x: torch.tril(x, -1),
    "masked_fill_scalar": lambda x: x.masked_fill(x > 0.5, 0.0), "masked_fill_neg_inf": lambda x: x.masked_fill(x < 0, -1e4),
    "slice_scatter_like": lambda x: torch.cat([x[:, :2] * 2, x[:, 2:]], 1),
}
for _name, _fn in INDEXING.items():
    index.fn(_name, f"{_name.replace('_', ' ')} of a (3, 4, 5) tensor", _fn, F(3, 4, 5))
for _dim in (0, 1, 2):
    index.fn(f"index_select_d{_dim}", f"torch.index_select on dim {_dim}",
             lambda x, i, d=_dim: torch.index_select(x, d, i), F(3, 4, 5), I(2, high=3))
    index.fn(f"gather_d{_dim}", f"torch.gather on dim {_dim}", lambda x, i, d=_dim: torch.gather(x, d, i), F(3, 4, 5), I(3, 3, 3, high=3))
    index.fn(f"take_along_dim_d{_dim}", f"torch.take_along_dim on dim {_dim}",
             lambda x, i, d=_dim: torch.take_along_dim(x, i, d), F(3, 4, 5),
             I(*[2 if axis == _dim else size for axis, size in enumerate((3, 4, 5))], high=3))
for _dim in (0, 1):
    index.fn(f"scatter_src_d{_dim}", f"Tensor.scatter(dim={_dim}, src)",
             lambda x, i, y, d=_dim: x.scatter(d, i, y), F(4, 5), I(2, 3, high=4), F(2, 3))
    index.fn(f"scatter_value_d{_dim}", f"Tensor.scatter(dim={_dim}, value=2.5)",
             lambda x, i, d=_dim: x.scatter(d, i, 2.5), F(4, 5), I(2, 3, high=4))
    index.fn(f"scatter_add_d{_dim}", f"Tensor.scatter_add(dim={_dim})",
             lambda x, i, y, d=_dim: x.scatter_add(d, i, y), F(4, 5), I(2, 3, high=4), F(2, 3))
    index.fn(f"index_add_d{_dim}", f"Tensor.index_add(dim={_dim})",
             lambda x, y, d=_dim: x.index_add(d, torch.tensor([0, 2]), y.narrow(d, 0, 2)), F(4, 5), F(4, 5))
    index.fn(f"index_copy_d{_dim}", f"Tensor.index_copy(dim={_dim})",
             lambda x, y, d=_dim: x.index_copy(d, torch.tensor([3, 1]), y.narrow(d, 0, 2)), F(4, 5), F(4, 5))
for _reduce in ("sum", "prod", "amax", "amin", "mean"):
    index.fn(f"scatter_reduce_{_reduce}", f"Tensor.scatter_reduce(reduce={_reduce!r})",
             lambda x, i, y, r=_reduce: x.scatter_reduce(0, i, y, r), F(4, 5), I(6, 5, high=4), F(6, 5))
index.fn("scatter_reduce_no_self", "scatter_reduce(amax, include_self=False)",
         lambda x, i, y: x.scatter_reduce(0, i, y, "amax", include_self=False), F(4, 5), I(6, 5, high=4), F(6, 5))
index.fn("index_tensor", "x[idx] with an int64 index tensor", lambda x, i: x[i], F(5, 4), I(3, high=5))
index.fn("index_tensor_2d", "x[idx] with a (2, 3) index tensor", lambda x, i: x[i], F(5, 4), I(2, 3, high=5))
index.fn("index_tensor_dim1", "x[:, idx]", lambda x, i: x[:, i], F(3, 5), I(4, high=5))
index.fn("index_put_int", "x[idx] = y with int64 indices", lambda x, i, y: x.index_put((i,), y[: i.shape[0]]), F(5, 4), I(3, high=5), F(5, 4))
index.fn("index_put_accumulate", "index_put(accumulate=True)", lambda x, i, y: x.index_put((i,), y[:3], accumulate=True),
         F(5, 4), I(3, high=5), F(5, 4))
index.fn("setitem_slice", "x[:, 1:3] = 0 on a clone", lambda x: _setitem_slice(x), F(3, 4))
index.fn("masked_fill_tensor_mask", "masked_fill with a bool input mask", lambda x, m: x.masked_fill(m, -2.0), F(3, 4), B(3, 4))
index.fn("masked_fill_broadcast_mask", "masked_fill with a (1, 4) mask", lambda x, m: x.masked_fill(m, 0.0), F(3, 4), B(1, 4))
index.fn("where_mask", "torch.where with a bool mask input", lambda x, m: torch.where(m, x, -x), F(3, 4), B(3, 4))
index.fn("embedding_fn", "F.embedding of an index tensor", lambda i, w: nnf.embedding(i, w), I(2, 3, high=6), F(6, 4))
index.fn("one_hot", "F.one_hot with a fixed class count", lambda i: nnf.one_hot(i, 6), I(2, 3, high=6))


def _setitem_slice(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[:, 1:3] = 0.0
    return y


create = Table("create")
CREATION = {
    "zeros_like": torch.zeros_like, "ones_like": torch.ones_like, "full_like": lambda x: torch.full_like(x, 3.5),
    "empty_like_filled": lambda x: torch.empty_like(x).fill_(1.0) + x, "zeros_shape": lambda x: x + torch.zeros(x.shape),
    "ones_int": lambda x: x + torch.ones(3, 4, dtype=torch.int64), "full": lambda x: x * torch.full((3, 4), 2.0),
    "arange": lambda x: x + torch.arange(4), "arange_start_step": lambda x: x + torch.arange(1, 9, 2),
    "arange_float": lambda x: x + torch.arange(0.0, 1.0, 0.25), "arange_size": lambda x: x * torch.arange(x.shape[1]),
    "linspace": lambda x: x + torch.linspace(-1, 1, 4), "eye": lambda x: x[:, :3] @ torch.eye(3),
    "eye_rect": lambda x: x + torch.eye(3, 4), "tensor_const": lambda x: x * torch.tensor([1.0, -1.0, 2.0, 0.5]),
    "scalar_tensor": lambda x: x + torch.scalar_tensor(1.5), "new_zeros": lambda x: x.new_zeros(2, 4) + 1,
    "new_ones": lambda x: torch.cat([x, x.new_ones(1, 4)]), "new_full": lambda x: torch.cat([x, x.new_full((1, 4), 7.0)]),
    "zeros_like_int": lambda x: torch.zeros_like(x, dtype=torch.int64), "tril_indices": lambda x: x[torch.tril_indices(3, 3)[0]],
    "logspace": lambda x: x * torch.logspace(0, 1, 4), "full_bool": lambda x: x.masked_fill(torch.full((3, 4), True), 0.0),
    "dropout_eval": lambda x: nnf.dropout(x, 0.5, training=False),
}
for _name, _fn in CREATION.items():
    create.fn(_name, f"{_name.replace('_', ' ')} (a (3, 4) input)", _fn, F(3, 4))
RANDOM = {
    "rand_like": torch.rand_like, "randn_like": torch.randn_like, "rand": lambda x: torch.rand(64, 32) + x.sum() * 0,
    "randn": lambda x: torch.randn(64, 32) + x.sum() * 0, "randint_like": lambda x: torch.randint_like(x, 0, 10),
    "bernoulli": torch.bernoulli, "normal_tensor": lambda x: torch.normal(x, 0.5),
    "multinomial": lambda x: torch.multinomial(x, 3, replacement=True),
}
for _name, _fn in RANDOM.items():
    create.fn(_name, f"{_name.replace('_', ' ')}: random draws (verified by distribution)", _fn,
              Spec((64, 32), "prob"), random=True)

sort = Table("sort")
for _dim in (0, -1):
    for _desc in (False, True):
        sort.fn(f"sort_d{_dim}_desc{int(_desc)}", f"torch.sort(dim={_dim}, descending={_desc})",
                lambda x, d=_dim, s=_desc: torch.sort(x, d, s), F(4, 6))
        sort.fn(f"argsort_d{_dim}_desc{int(_desc)}", f"torch.argsort(dim={_dim}, descending={_desc})",
                lambda x, d=_dim, s=_desc: torch.argsort(x, d, s), F(4, 6))
    for _keep in (False, True):
        sort.fn(f"argmax_d{_dim}_keep{int(_keep)}", f"torch.argmax(dim={_dim}, keepdim={_keep})",
                lambda x, d=_dim, k=_keep: torch.argmax(x, d, k), F(4, 6))
        sort.fn(f"argmin_d{_dim}_keep{int(_keep)}", f"torch.argmin(dim={_dim}, keepdim={_keep})",
                lambda x, d=_dim, k=_keep: torch.argmin(x, d, k), F(4, 6))
for _k, _largest, _dim in ((1, True, -1), (3, True, -1), (3, False, -1), (2, True, 0), (4, False, 0)):
    sort.fn(f"topk_k{_k}_{'max' if _largest else 'min'}_d{_dim}", f"torch.topk(k={_k}, largest={_largest}, dim={_dim})",
            lambda x, k=_k, l=_largest, d=_dim: torch.topk(x, k, d, l), F(5, 6))
sort.fn("argmax_all", "torch.argmax over the flattened tensor", torch.argmax, F(4, 6))
sort.fn("argmin_all", "torch.argmin over the flattened tensor", torch.argmin, F(4, 6))
sort.fn("sort_int", "torch.sort of an int64 tensor (distinct values)", lambda x: torch.sort(x), Spec((4, 6), "int", 0, 1000))
sort.fn("msort", "torch.msort", torch.msort, F(5, 4))
sort.fn("kthvalue", "torch.kthvalue(k=2, dim=-1)", lambda x: torch.kthvalue(x, 2, -1), F(4, 6))
sort.fn("sort_stable", "torch.sort(stable=True) of distinct values", lambda x: torch.sort(x, stable=True), F(4, 6))
sort.fn("topk_values_only", "the values of torch.topk(k=2)", lambda x: torch.topk(x, 2).values, F(4, 6))
sort.fn("argmax_3d", "torch.argmax(dim=1) of a 3-d tensor", lambda x: torch.argmax(x, 1), F(3, 4, 5))

TABLES = (reduce, shape, index, create, sort)
