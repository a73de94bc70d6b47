"""Index outputs judged through the values they select, so that ties are not divergences.

TopK, sort, argmax/argmin, max/min along a dimension and NMS return indices. Where several
inputs hold the same value (within the dtype's rounding), any of their indices is right, and
runtimes break such ties differently (onnxruntime's TopK and torch's topk pick different members
of a run of equal scores). So an index output is compared by what it selects: the values of the
source tensor at the backend's indices against the values at torch's, both read from the same
source (torch's value of the op's input). Indices that differ but select values tied within
`TIE_ULPS` units of the dtype's rounding are a tie, named in the comparison's note; an index
that selects a value not tied with torch's choice fails, however close the values are in
absolute terms. Values computed from a tied selection (the boxes a TopK picked) are compared
where the selections agree (`matched_comparison`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from harness.metrics.comparison import Comparison, compare, dtype_name

TIE_ULPS = 2.0
"""How far apart two selected values may be, in unit roundoffs of the dtype times the value's
magnitude (2: one unit in the last place), and still be a tie: equal values up to the last
rounding of the op that computed them (an accumulated run's indices were picked on the backend's
own values). Far below any op tolerance, so a wrong index is not called a tie."""

_UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
_TINY = {"float64": 2.0 ** -1022, "float32": 2.0 ** -126, "float16": 2.0 ** -14, "bfloat16": 2.0 ** -126}


@dataclass(frozen=True)
class IndexOutput:
    """Where an ATen overload's indices come from: which output holds them, which argument is
    the tensor they index (`source`), the argument giving the dimension (None: fixed by
    `default_dim`, None there meaning the flattened tensor), whether the index keeps that
    dimension, and `selection` for an unordered set of picks (NMS: compared as sorted values)."""

    output: int
    source: int
    dim_arg: int | None = None
    default_dim: int | None = -1
    keepdim_arg: int | None = None
    keeps_dim: bool = True
    selection: bool = False


INDEX_OUTPUTS: dict[str, IndexOutput] = {
    "aten.topk.default": IndexOutput(output=1, source=0, dim_arg=2),
    "aten.sort.default": IndexOutput(output=1, source=0, dim_arg=1),
    "aten.sort.stable": IndexOutput(output=1, source=0, dim_arg=2),
    "aten.argsort.default": IndexOutput(output=0, source=0, dim_arg=1),
    "aten.argsort.stable": IndexOutput(output=0, source=0, dim_arg=2),
    "aten.max.dim": IndexOutput(output=1, source=0, dim_arg=1, keepdim_arg=2, keeps_dim=False),
    "aten.min.dim": IndexOutput(output=1, source=0, dim_arg=1, keepdim_arg=2, keeps_dim=False),
    "aten.argmax.default": IndexOutput(output=0, source=0, dim_arg=1, default_dim=None, keepdim_arg=2,
                                       keeps_dim=False),
    "aten.argmin.default": IndexOutput(output=0, source=0, dim_arg=1, default_dim=None, keepdim_arg=2,
                                       keeps_dim=False),
    "torchvision.nms.default": IndexOutput(output=0, source=1, selection=True),  # kept boxes, by their scores
}
"""The index outputs the harness judges through their selected values, by ATen overload."""


def index_output(aten: str) -> IndexOutput | None:
    """How `aten`'s indices are judged, or None for an op without index outputs."""
    return INDEX_OUTPUTS.get(aten)


def _selected(indices: np.ndarray, source: np.ndarray, axis: int | None, keeps_dim: bool) -> np.ndarray:
    if axis is None:
        return source.reshape(-1)[indices.reshape(-1)].reshape(indices.shape)
    axis = axis % source.ndim if source.ndim else 0
    expanded = indices if keeps_dim else np.expand_dims(indices, axis)
    return np.take_along_axis(source, expanded, axis)


def compare_selection(actual: np.ndarray, expected: np.ndarray, source: np.ndarray, *, axis: int | None,
                      keeps_dim: bool = True, selection: bool = False, name: str = "") -> Comparison:
    """The backend's indices (`actual`) against torch's (`expected`), both into `source` along
    `axis` (None: the flattened source), judged by the values they select: passes when every
    index agrees or selects a value tied with torch's (see the module). The comparison's errors
    are those of the selected values; its note says how many indices differ and whether as ties."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    dtype = dtype_name(source.dtype)
    unit = _UNIT_ROUNDOFF.get(dtype, 0.0)
    if actual.shape != expected.shape:
        return dataclasses.replace(compare(actual, expected, atol=0.0, rtol=0.0, name=name),
                                   note="the backend selects another number of elements than torch")
    values = source.astype(np.float64)
    try:
        chosen = _selected(actual.astype(np.int64), values, axis, keeps_dim)
        wanted = _selected(expected.astype(np.int64), values, axis, keeps_dim)
    except (IndexError, ValueError):  # indices out of range, or not shaped like the source
        return dataclasses.replace(compare(actual, expected, atol=0.0, rtol=0.0, name=name),
                                   note="the backend's indices fall outside the tensor they index")
    if selection:  # an unordered set of picks: the same values, in any order
        chosen, wanted = np.sort(chosen.reshape(-1))[::-1], np.sort(wanted.reshape(-1))[::-1]
    judged = compare(chosen, wanted, atol=_TINY.get(dtype, 0.0), rtol=TIE_ULPS * unit, name=name, check_dtype=False)
    judged = dataclasses.replace(judged, dtype_actual=dtype_name(actual.dtype), dtype_expected=dtype_name(expected.dtype),
                                 dtype_match=actual.dtype == expected.dtype or actual.dtype.kind == expected.dtype.kind)
    differing = int(np.count_nonzero(np.sort(actual.reshape(-1)) != np.sort(expected.reshape(-1)))) if selection \
        else int(np.count_nonzero(actual != expected))
    if differing == 0:
        return dataclasses.replace(judged, note="")
    if judged.passed:
        return dataclasses.replace(judged, note=f"tie: {differing} of {actual.size} indices differ from torch's, each "
                                                f"selecting a value tied with torch's choice within {dtype} rounding")
    apart = int(np.count_nonzero(np.abs(chosen - wanted) > _TINY.get(dtype, 0.0) + TIE_ULPS * unit * np.abs(wanted)))
    return dataclasses.replace(judged, note=f"{apart} of {actual.size} indices select values not tied with torch's "
                                            f"choice ({differing} differ in all): a wrong index, not a tie")


def dim_of(spec: IndexOutput, args: list, ndim: int) -> int | None:
    """The dimension the op selects along, from its FX arguments (None: the flattened tensor)."""
    dim = args[spec.dim_arg] if spec.dim_arg is not None and len(args) > spec.dim_arg else spec.default_dim
    return None if dim is None else int(dim) % max(ndim, 1)


def keeps_dim(spec: IndexOutput, args: list) -> bool:
    """Whether the index output keeps the dimension it selects along."""
    if spec.keepdim_arg is not None and len(args) > spec.keepdim_arg:
        return bool(args[spec.keepdim_arg])
    return spec.keeps_dim


def matched_comparison(actual: np.ndarray, expected: np.ndarray, actual_indices: np.ndarray,
                       expected_indices: np.ndarray, *, atol: float, rtol: float, name: str = "",
                       selected_by: str = "", axis: int = -1) -> Comparison | None:
    """A value computed from a selection (the rows a TopK picked, gathered), compared where the
    selections agree: each of torch's picks paired with the backend's pick of the same index in
    the same row (the indices' `axis`, the one the op selected along: TopK along dim 0 picks
    down each column), wherever the backend placed it; picks only one side made (another member
    of a tie) are left out and counted in the note. None when the value is not laid out by the
    selection (its leading dimensions are not the indices' shape)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    picked, wanted = np.asarray(actual_indices), np.asarray(expected_indices)
    if (picked.shape != wanted.shape or picked.ndim == 0 or actual.shape != expected.shape
            or actual.shape[:picked.ndim] != picked.shape or not -picked.ndim <= axis < picked.ndim):
        return None
    axis %= picked.ndim  # each row's picks moved last, in the indices and in the value's leading dimensions
    picked, wanted = np.moveaxis(picked, axis, -1), np.moveaxis(wanted, axis, -1)
    actual, expected = np.moveaxis(actual, axis, picked.ndim - 1), np.moveaxis(expected, axis, picked.ndim - 1)
    width = picked.shape[-1]
    rows = picked.reshape(-1, width)
    targets = wanted.reshape(-1, width)
    out_a = actual.reshape(rows.shape[0], width, -1)
    out_e = expected.reshape(rows.shape[0], width, -1)
    kept_a, kept_e = [], []
    for row in range(rows.shape[0]):
        where = {int(index): position for position, index in enumerate(rows[row])}
        for position, index in enumerate(targets[row]):
            found = where.get(int(index))
            if found is not None:
                kept_a.append(out_a[row, found])
                kept_e.append(out_e[row, position])
    if not kept_e:
        return None
    judged = compare(np.stack(kept_a), np.stack(kept_e), atol=atol, rtol=rtol, name=name)
    judged = dataclasses.replace(judged, shape_actual=list(actual.shape), shape_expected=list(expected.shape))
    left = rows.size - len(kept_e)
    return dataclasses.replace(judged, note=(
        f"matched through the tied selection of {selected_by or 'an index op'}: {len(kept_e)} of {rows.size} picks "
        f"paired by the index they came from" + (f", {left} tied pick(s) only one side made left out" if left else "")))
