"""The shape sweep (harness.shapes): which sizes it picks, the axes and guards it reads from the
captured program, and a planted size-baking bug it catches, naming the first failing op."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import harness
from harness.exporters import export_for_verification
from harness.shapes.axes import read_axes
from harness.shapes.resize import resized
from harness.shapes.selection import Axis, Guard, explicit_sizes, moved_size, select_sizes

BATCH = Axis("batch", traced=2, lower=1, upper=8)
HEIGHT = Axis("height", traced=224, lower=32, upper=512, guards=(Guard("Ne(((height - 1)//32) + 1, 1)", 32),))
WIDTH = Axis("width", traced=224, lower=32, upper=512, guards=(Guard("Ne(((width - 1)//32) + 1, 1)", 32),))

# (axes, count, the points chosen in order, as labels)
SELECTION_TABLE = [
    pytest.param([BATCH], 1, ["batch 2"], id="one-is-the-traced-size"),
    pytest.param([BATCH], 3, ["batch 2", "batch 3", "batch 1"], id="batch-prime-then-1"),
    pytest.param([BATCH], 8, ["batch 2", "batch 3", "batch 1", "batch 8", "batch 5", "batch 7", "batch 6", "batch 4"],
                 id="batch-runs-out-of-primes-then-fills-with-any-size"),
    pytest.param([BATCH], 12, [f"batch {n}" for n in (2, 3, 1, 8, 5, 7, 6, 4)], id="batch-holds-only-8-points"),
    pytest.param([Axis("batch", 2, 2)], 4, ["batch 2", "batch 3", "batch 10", "batch 5"],
                 id="unbounded-from-torch's-2"),
    pytest.param([BATCH, HEIGHT, WIDTH], 3,
                 ["batch 2, height 224, width 224", "batch 3, height 227, width 229", "batch 1, height 32, width 32"],
                 id="n3-non-square-primes-then-bounds"),
    pytest.param([BATCH, HEIGHT, WIDTH], 8,
                 ["batch 2, height 224, width 224", "batch 3, height 227, width 229", "batch 1, height 32, width 32",
                  "batch 8, height 512, width 512", "batch 2, height 32, width 32", "batch 2, height 33, width 33",
                  "batch 3, height 224, width 224", "batch 2, height 227, width 224"],
                 id="n8-adds-upper-bounds-guard-sides-one-at-a-time"),
    pytest.param([Axis("length", 509, 2, 509)], 2, ["length 509", "length 503"], id="moved-below-at-the-top"),
    pytest.param([Axis("side", 4, 4, 4)], 5, ["side 4"], id="a-single-size-range"),
]


@pytest.mark.parametrize(("axes", "count", "expected"), SELECTION_TABLE)
def test_selection_order(axes, count, expected):
    assert [point.label() for point in select_sizes(axes, count)] == expected


def test_selection_says_why_each_point_was_chosen():
    traced, moved, bounds = select_sizes([BATCH, HEIGHT, WIDTH], 3)
    assert traced.reasons == ["traced"]
    assert "breaks height = width (equal when traced)" in moved.reasons and "prime sizes" in moved.reasons
    assert bounds.reasons == ["lower bounds (size 1)"]
    guard_side = select_sizes([BATCH, HEIGHT, WIDTH], 6)[5]
    assert any("changes between 32 and 33" in reason for reason in guard_side.reasons)


def test_moved_sizes_differ_between_axes_equal_at_the_trace():
    assert moved_size(HEIGHT, set()) == 227 and moved_size(WIDTH, {227}) == 229


def test_explicit_sizes_keep_the_traced_point_first_and_refuse_unknown_axes():
    points = explicit_sizes([BATCH, HEIGHT], [{"height": 100}, {"batch": 2}])
    assert [p.label() for p in points] == ["batch 2, height 224", "batch 2, height 100"]
    with pytest.raises(ValueError, match=r"'depth'.*batch in \[1, 8\]"):
        explicit_sizes([BATCH], [{"depth": 3}])
    with pytest.raises(ValueError, match="at least 1"):
        select_sizes([BATCH], 0)


def test_resized_tiles_or_cuts_each_changed_dim():
    tokens = torch.arange(6).reshape(2, 3)
    assert resized(tokens, (3, 2)).tolist() == [[0, 1], [3, 4], [0, 1]]
    assert resized(tokens, (1, 5)).tolist() == [[0, 1, 2, 0, 1]]
    with pytest.raises(ValueError, match="ranks differ"):
        resized(tokens, (6,))


class PoolNet(nn.Module):
    """Strided conv and max pool, then a global average: torch.export records guards on the sides."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(F.max_pool2d(self.conv(x), 3, 2, 1), 1).flatten(1)


class Clipped(nn.Module):
    """A Python branch on a size: the program only holds for lengths above 16."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > 16:
            return x[:, :16] * 2
        return x + 1


def _axes(module, example, axes, ranges=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = export_for_verification("roundtrip", module.eval(), (example,), dynamic_axes=axes,
                                           input_names=["x"])
    return read_axes(exported.program, exported.model, [example], input_names=["x"], declared=axes, ranges=ranges)


def test_guards_and_ranges_come_from_the_program():
    torch.manual_seed(0)
    read = _axes(PoolNet(), torch.randn(2, 3, 40, 40), {"x": {2: "height", 3: "width"}})
    height = read.axes[0]
    assert (height.name, height.traced, height.lower, height.upper) == ("height", 40, 2, None)
    assert [(g.expression, g.size) for g in height.guards] == [
        ("Ne((((height - 1)//2)) + 1, 1)", 2), ("Ne((((height - 1)//4)) + 1, 1)", 4)]
    clipped = _axes(Clipped(), torch.randn(2, 24), {"x": {1: "length"}}, ranges={"length": (1, 64)})
    assert (clipped.axes[0].lower, clipped.axes[0].upper) == (17, 64)  # the branch's guard narrows the range
    assert any("declared [1, 64], the program guards [17, unbounded]" in note for note in clipped.notes)


def test_a_declared_minimum_below_torchs_assumed_2_is_swept():
    read = _axes(PoolNet(), torch.randn(2, 3, 40, 40), {"x": {0: "batch"}}, ranges={"batch": (1, 4)})
    assert (read.axes[0].lower, read.axes[0].upper) == (1, 4) and not read.notes


class Flatten(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(5, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.linear(x))
        return y.reshape(y.shape[0], -1) * 2.0


AXES = {"x": {0: "batch"}}


def _flatten():
    torch.manual_seed(0)
    return Flatten().eval(), torch.randn(2, 4, 5)


def test_a_correct_model_passes_every_size_and_records_each():
    module, example = _flatten()
    verification = harness.verify(module, (example,), dynamic_axes=AXES, input_names=["x"], shapes=4,
                                  axis_ranges={"batch": (1, 8)}, per_op=False)
    sweep = verification.shape_sweep
    assert verification.passed and sweep.passed
    assert [(s.point.label(), s.status) for s in sweep.sizes] == [
        ("batch 2", "pass"), ("batch 3", "pass"), ("batch 1", "pass"), ("batch 8", "pass")]
    record = verification.to_dict()["shape_sweep"]
    assert [s["sizes"] for s in record["sizes"]] == [{"batch": 2}, {"batch": 3}, {"batch": 1}, {"batch": 8}]
    assert record["first_failing"] is None and record["axes"][0]["lower"] == 1


def _baked(model: onnx.ModelProto, batch: int) -> onnx.ModelProto:
    """`model` with its Reshape's target shape replaced by a constant that holds the traced batch:
    the bug of an exporter that folds x.shape[0] into the graph."""
    edited = onnx.ModelProto()
    edited.CopyFrom(model)
    reshape = next(node for node in edited.graph.node if node.op_type == "Reshape")
    edited.graph.initializer.append(onnx.numpy_helper.from_array(np.array([batch, -1], dtype=np.int64),
                                                                 "baked_shape"))
    reshape.input[1] = "baked_shape"
    return edited


def test_a_planted_size_baking_bug_is_caught_naming_the_first_failing_op():
    module, example = _flatten()
    exported = harness.verify(module, (example,), dynamic_axes=AXES, input_names=["x"], per_op=False).onnx_model
    baked = _baked(exported, batch=2)
    verification = harness.verify(module, (example,), dynamic_axes=AXES, input_names=["x"], onnx_model=baked,
                                  shapes=3, axis_ranges={"batch": (1, 8)})
    sweep = verification.shape_sweep
    assert not verification.passed and not sweep.passed
    assert [(s.point.label(), s.status) for s in sweep.sizes] == [
        ("batch 2", "pass"), ("batch 3", "fail"), ("batch 1", "fail")]  # the traced size hides the bug
    assert sweep.sizes[1].error == "shape [2, 30] != expected [3, 20]"
    assert sweep.first_failing.point.sizes == {"batch": 3}
    assert sweep.first_failing_op["fx_node"] == "view" and sweep.first_failing_op["onnx_ops"] == ["Reshape"]
    assert sweep.first_failing_op["failure"] == "shape"
    assert "first failing op at batch 3: view" in " ".join(verification.notes)
    record = verification.to_dict()["shape_sweep"]["first_failing"]
    assert record["label"] == "batch 3" and record["op"]["fx_node"] == "view"


def test_explicit_shapes_and_a_bad_count_are_checked():
    module, example = _flatten()
    verification = harness.verify(module, (example,), dynamic_axes=AXES, input_names=["x"], per_op=False,
                                  shapes=[{"batch": 5}])
    assert [s.point.label() for s in verification.shape_sweep.sizes] == ["batch 2", "batch 5"]
    with pytest.raises(ValueError, match="at least 1"):
        harness.verify(module, (example,), dynamic_axes=AXES, input_names=["x"], per_op=False, shapes=0)


FACTORY = '''
import torch
from torch import nn


class Flatten(nn.Module):
    def forward(self, x):
        return torch.relu(x).reshape(x.shape[0], -1)


def make():
    return {"module": Flatten().eval(), "args": (torch.randn(2, 4, 5),), "dynamic_axes": {"x": {0: "batch"}},
            "input_names": ["x"], "axis_ranges": {"batch": (1, 6)}}
'''


def test_roundtrip_verify_shapes_records_every_size_in_the_report(tmp_path, monkeypatch):
    import json

    from harness.cli.main import main

    (tmp_path / "sweepfactory.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "sweepfactory:make", "--shapes", "0", "--out", "r"]) == 2
    assert main(["verify", "sweepfactory:make", "--shapes", "3", "--no-per-op", "--out", "r", "-j", "1"]) == 0
    case = json.loads((tmp_path / "r" / "parity.json").read_text())["cases"][0]
    sweep = case["shape_sweep"]
    assert case["status"] == "pass" and case["other"] is None and sweep["passed"]
    assert [(s["label"], s["status"]) for s in sweep["sizes"]] == [("batch 2", "pass"), ("batch 3", "pass"),
                                                                  ("batch 1", "pass")]
    assert sweep["axes"] == [{"name": "batch", "traced": 2, "lower": 1, "upper": 6, "guards": []}]


class Shrink(nn.Module):
    """Keeps the first three quarters of the batch: `int()` of a size times a float, which
    torch.export must fix to its traced value (the export records it in roundtrip.static_sizes)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[: int(x.shape[0] * 0.75)] * 2


def test_a_size_the_export_froze_is_reported_static_with_its_expression_not_failed():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verification = harness.verify(Shrink().eval(), (torch.randn(8, 3),), dynamic_axes=AXES, input_names=["x"],
                                      shapes=3, axis_ranges={"batch": (1, 12)}, per_op=False)
    sweep = verification.shape_sweep
    assert [(s.point.label(), s.status) for s in sweep.sizes] == [
        ("batch 8", "pass"), ("batch 11", "static"), ("batch 6", "static")]  # the slice guards batch >= 6
    assert verification.passed and sweep.passed and sweep.first_failing is None
    moved = sweep.sizes[1].error
    assert moved.startswith("exported static: the size math.trunc(0.75*torch.sym_float(x.shape[0])) was fixed to 6")
    assert "test_shape_sweep.py:" in moved and moved.endswith("here it is 8")
    assert any(note.startswith("shape sweep at batch 11 on onnxruntime: exported static") for note in verification.notes)
    assert verification.to_dict()["shape_sweep"]["sizes"][1]["status"] == "static"


def test_recorded_size_expressions_are_read_without_eval():
    from harness.shapes.frozen import UnknownExpression, evaluate_size

    shapes = {"x": np.zeros((8, 3)), "pair": [np.zeros((2, 5)), np.zeros((7,))]}
    assert evaluate_size("math.trunc(0.75*torch.sym_float(x.shape[0]))", shapes) == 6
    assert evaluate_size("(pair[1].shape[0] + 31)//32*32 + max(x.shape[1], 2)", shapes) == 35
    for refused in ("__import__('os').getcwd()", "x.dtype", "open('f')", "y.shape[0]", "x.shape[0] if 1 else 2"):
        with pytest.raises(UnknownExpression):
            evaluate_size(refused, shapes)


def test_the_sweep_runs_on_every_backend_asked_for():
    module, example = _flatten()
    verification = harness.verify(module, (example,), dynamic_axes=AXES, input_names=["x"], shapes=3,
                                  axis_ranges={"batch": (1, 8)}, per_op=False,
                                  backends=("onnxruntime", "onnx.reference"))
    sweep = verification.shape_sweep
    assert [(s.point.label(), s.backend, s.status) for s in sweep.sizes] == [
        ("batch 2", "onnxruntime", "pass"), ("batch 3", "onnxruntime", "pass"), ("batch 1", "onnxruntime", "pass")]
    assert [(s.point.label(), s.status) for s in sweep.other_backends["onnx.reference"]] == [
        ("batch 2", "pass"), ("batch 3", "pass"), ("batch 1", "pass")]
    baked = _baked(verification.onnx_model, batch=2)
    failing = harness.verify(module, (example,), dynamic_axes=AXES, input_names=["x"], onnx_model=baked, shapes=2,
                             axis_ranges={"batch": (1, 8)}, per_op=False, backends=("onnxruntime", "onnx.reference"))
    statuses = {name: [s.status for s in sizes] for name, sizes in failing.shape_sweep.other_backends.items()}
    assert statuses == {"onnx.reference": ["pass", "fail"]} and not failing.passed
    record = failing.to_dict()["shape_sweep"]
    assert [s["status"] for s in record["other_backends"]["onnx.reference"]] == ["pass", "fail"]
