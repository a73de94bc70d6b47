"""Dynamic-shape forms beyond the op table's values (op_table/cases_dynamic_forms.py holds those):
integer arange against torch over many sizes, sizes the capture had to fix (a warning naming the
expression and the line, and the model's metadata), forms refused with their reason, None among
the outputs, and the user's module left as it was after a capture.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import exporter
from exporter.errors import ExportWarning
from harness.backend import prepare


class _Fn(torch.nn.Module):
    def __init__(self, fn: Callable[..., object]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x, *rest):
        return self.fn(x, *rest)


def _export(fn: Callable[..., object], args: tuple, dynamic_axes=None, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = exporter.export(_Fn(fn), args, dynamic_axes=dynamic_axes, **options)
    return model, [str(w.message) for w in caught if issubclass(w.category, ExportWarning)]


# -- integer arange: every size from empty to past the end ------------------------------------------

INTEGER_ARANGES = [
    # name, function of x (first axis dynamic), sizes at which torch defines it
    ("symbolic_start", lambda x: torch.arange(x.size(0), 8.5, 1.5, dtype=torch.int64), range(0, 9)),
    ("symbolic_end", lambda x: torch.arange(-0.5, x.size(0) * 1.25, 0.75, dtype=torch.int32), range(1, 12)),
    ("symbolic_step", lambda x: torch.arange(-2.5, 9, x.size(0) * 0.5, dtype=torch.int64), range(1, 12)),
    ("symbolic_start_and_step", lambda x: torch.arange(x.size(0) / 4, 30, x.size(0) * 0.7, dtype=torch.int16),
     range(1, 12)),
]


@pytest.mark.parametrize(("name", "fn", "sizes"), INTEGER_ARANGES, ids=[row[0] for row in INTEGER_ARANGES])
def test_integer_arange_matches_torch_at_every_size(name, fn, sizes) -> None:
    model, _ = _export(fn, (torch.zeros(4, 2),), {"x": {0: "n"}})
    backend = prepare(model, "CPU")
    wrong = {}
    for size in sizes:
        x = torch.zeros(size, 2)
        (actual,) = backend.run([x.numpy()])
        expected = fn(x).numpy()
        if actual.dtype != expected.dtype or actual.tolist() != expected.tolist():
            wrong[size] = (actual.tolist(), expected.tolist())
    assert not wrong, f"{name}: onnx vs torch at sizes {wrong}"


# -- sizes the capture fixed: a warning with the expression and the line, and the metadata ----------


def _int_of_scaled_size(x: torch.Tensor) -> torch.Tensor:
    return x.new_zeros(int(x.size(0) * 0.75), 2)  # int() of a SymFloat: torch.export fixes it


def _interpolate_to_int_size(x: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, size=(int(x.size(2) * 1.5), 4), mode="nearest")


@dataclass(frozen=True)
class FixedSizeRow:
    name: str
    fn: Callable[[torch.Tensor], torch.Tensor]
    example: tuple[int, ...]
    axis: int
    expression: str  # what the warning and the metadata must name
    size: int


FIXED_SIZES = [
    FixedSizeRow("int_of_scaled_size", _int_of_scaled_size, (8, 2), 0, "math.trunc(0.75*torch.sym_float(x.shape[0]))", 6),
    FixedSizeRow("interpolate_to_int_size", _interpolate_to_int_size, (1, 2, 6, 3), 2,
                 "math.trunc(1.5*torch.sym_float(x.shape[2]))", 9),
]


@pytest.mark.parametrize("row", FIXED_SIZES, ids=lambda row: row.name)
def test_a_fixed_size_is_warned_with_its_line_and_recorded(row: FixedSizeRow) -> None:
    model, messages = _export(row.fn, (torch.randn(*row.example),), {"x": {row.axis: "n"}})
    fixed = [m for m in messages if row.expression in m]
    assert fixed, f"no warning names {row.expression!r}: {messages}"
    assert f"constant {row.size}" in fixed[0] and "test_dynamic_forms.py:" in fixed[0], fixed[0]
    recorded = json.loads({p.key: p.value for p in model.metadata_props}["roundtrip.static_sizes"])
    assert [(r["expression"], r["size"]) for r in recorded] == [(row.expression, row.size)]
    assert any("test_dynamic_forms.py:" in line for line in recorded[0]["source"])


def test_strict_dynamic_refuses_a_fixed_size() -> None:
    with pytest.raises(exporter.ExportError, match=r"math\.trunc\(0\.75\*torch\.sym_float\(x\.shape\[0\]\)\)"):
        exporter.export(_Fn(_int_of_scaled_size), (torch.randn(8, 2),), dynamic_axes={"x": {0: "n"}},
                        strict_dynamic=True)


def test_a_size_computed_in_the_graph_is_not_reported_fixed() -> None:
    model, messages = _export(lambda x: x[: math.floor(x.size(0) * 0.5)] + 1, (torch.randn(8, 2),), {"x": {0: "n"}})
    assert "roundtrip.static_sizes" not in {p.key for p in model.metadata_props}
    assert not [m for m in messages if "exported as the constant" in m]


# -- forms refused, each with its reason ------------------------------------------------------------

REFUSED = [
    # name, function, inputs, what the ExportError says
    ("adaptive_pool_to_a_run_time_size", lambda a: F.adaptive_avg_pool2d(a, (a.size(2) // 2, 3)),
     (torch.randn(1, 2, 8, 6),), "adaptive_avg_pool2d"),
    ("as_strided_of_a_transposed_view", lambda a: a.t().as_strided((2, 2), (1, 2)), (torch.randn(3, 3),),
     "as_strided"),
]


@pytest.mark.parametrize(("name", "fn", "args", "says"), REFUSED, ids=[row[0] for row in REFUSED])
def test_refused_forms_say_why(name, fn, args, says) -> None:
    with pytest.raises(exporter.ExportError) as refused:
        exporter.export(_Fn(fn), args, dynamic_axes={"x": {2: "h"}} if "adaptive" in name else None)
    assert says in str(refused.value).lower()


# -- None among the outputs -------------------------------------------------------------------------


def test_none_outputs_are_left_out() -> None:
    model, _ = _export(lambda x: (x + 1, None, x * 2), (torch.randn(3),), output_names=["plus", "times"])
    assert [o.name for o in model.graph.output] == ["plus", "times"]
    x = torch.randn(3)
    plus, times = prepare(model, "CPU").run([x.numpy()])
    np.testing.assert_allclose(plus, (x + 1).numpy())
    np.testing.assert_allclose(times, (x * 2).numpy())


# -- the user's module as it was ----------------------------------------------------------------------


class _CachingHead(torch.nn.Module):
    """Caches in forward as detection heads do: grids for the last input size, created lazily
    (no attribute before the first call), a list of per-level strides appended to, a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)
        self.shape = None
        self.strides: list[torch.Tensor] = []
        self.table: dict[str, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.shape != x.shape:
            self.anchors = torch.arange(x.shape[-1], dtype=x.dtype)
            self.strides.append(torch.ones(x.shape[-1]))
            self.table["grid"] = torch.zeros(x.shape[-2], 1)
            self.shape = x.shape
        return self.conv(x) * self.anchors + self.table["grid"] + self.strides[-1]


class _Detector(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = _CachingHead()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)


STATE_ROWS = [
    # name, example batch (1 takes the size-oblivious capture), dynamic axes
    ("static", 2, None),
    ("dynamic_batch", 2, {"x": {0: "batch"}}),
    ("dynamic_batch_traced_one", 1, {"x": {0: "batch"}}),
]


@pytest.mark.parametrize(("name", "batch", "dynamic_axes"), STATE_ROWS, ids=[row[0] for row in STATE_ROWS])
def test_a_module_that_caches_in_forward_runs_eagerly_after_export(name, batch, dynamic_axes) -> None:
    model = _Detector()
    x = torch.randn(batch, 3, 4, 5)
    before = dict(model.head.__dict__)
    exporter.export(model, (x,), dynamic_axes=dynamic_axes)
    head = model.head
    assert not hasattr(head, "anchors"), "an attribute created during the capture was left on the module"
    assert head.shape is None and head.strides == [] and head.table == {}
    assert head.strides is before["strides"] and head.table is before["table"]  # restored in place
    out = model(x)  # eager, after the export: real tensors throughout
    assert type(head.anchors) is torch.Tensor and head.anchors.numpy().shape == (5,)
    assert out.shape == (batch, 4, 4, 5)
