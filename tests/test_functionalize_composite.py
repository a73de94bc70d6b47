"""The composite ops of training IR that exporter.capturing.functionalize rewrites (or the registry
translates whole: hardswish, hardsigmoid) spare the capture torch's decomposition, and give the
program torch's decomposition gives."""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn.functional as F

import exporter
from exporter.capturing import functionalize, trace
from exporter.capturing.decompositions import LOCAL_DECOMPOSITIONS, local_decomposition
from exporter.translate.registry import Dispatcher

KEEP = frozenset(Dispatcher(exporter.DEFAULT_OPSET).known_targets())


class _Fn(torch.nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


# (name, function of x (4 x 6 float32, batch dynamic), the composite op training IR holds)
ROWS = [
    ("hardswish_inplace", lambda x: F.hardswish(x * 2, inplace=True), "aten.hardswish_.default"),
    ("hardsigmoid", lambda x: F.hardsigmoid(x), "aten.hardsigmoid.default"),
    ("silu", lambda x: F.silu(x), "aten.silu.default"),
    ("silu_inplace", lambda x: F.silu(x * 2, inplace=True), "aten.silu_.default"),
    ("dropout_inplace", lambda x: F.dropout(x * 2, 0.3, training=False, inplace=True), "aten.dropout_.default"),
    ("zeros_like", lambda x: torch.zeros_like(x) + x, "aten.zeros_like.default"),
    ("ones_like_int64", lambda x: torch.ones_like(x, dtype=torch.int64) * 3, "aten.ones_like.default"),
    ("new_zeros_dynamic", lambda x: x.new_zeros(x.shape[0] * 2), "aten.new_zeros.default"),
    ("new_ones_dtype", lambda x: x.new_ones((x.shape[0], 2), dtype=torch.float64), "aten.new_ones.default"),
    ("new_full", lambda x: x.new_full((3,), 2.5) + x[:, :3], "aten.new_full.default"),
    ("new_empty", lambda x: torch.cat([x[0], x.new_empty((0,))]), "aten.new_empty.default"),
    ("arange_end_dynamic", lambda x: x * torch.arange(x.shape[1]), "aten.arange.default"),
    ("arange_start", lambda x: x[:, :3] + torch.arange(1, 4), "aten.arange.start"),
    ("arange_float_end", lambda x: x[:, :3] + torch.arange(2.5), "aten.arange.default"),
    ("to_dtype", lambda x: x.to(torch.float64) * 2, "aten.to.dtype"),
    ("to_same_dtype", lambda x: x.to(torch.float32) * 2, "aten.to.dtype"),
    ("to_same_device", lambda x: x.to(x.device) + 1, "aten.to.dtype_layout"),
    ("to_device_dtype", lambda x: x.to(x.device, torch.float64) + 1, "aten.to.device"),
    ("contiguous_transposed", lambda x: x.t().contiguous() * 2, "aten.contiguous.default"),
    ("reshape_view", lambda x: x.reshape(-1, 2), "aten.reshape.default"),
    ("reshape_copy", lambda x: x.t().reshape(-1), "aten.reshape.default"),
    ("dropout_inplace_on_a_view", lambda x: F.dropout(x.flatten(0), 0.3, training=False, inplace=True), "aten.dropout_.default"),
    ("and", lambda x: (x > 0) & (x < 1), "aten.__and__.Tensor"),
    ("or", lambda x: (x > 0) | (x < -1), "aten.__or__.Tensor"),
    ("zeros_dynamic", lambda x: torch.zeros(x.shape[0], 2) + 1, "aten.zeros.default"),
    ("ones_int", lambda x: torch.ones(3, dtype=torch.int32) + 1, "aten.ones.default"),
    ("diff", lambda x: torch.diff(x), "aten.diff.default"),
    ("diff_dim0", lambda x: torch.diff(x.expand(3, -1, -1), dim=0), "aten.diff.default"),
    ("diff_prepend", lambda x: torch.diff(x, prepend=x[:, :1] * 2), "aten.diff.default"),
    ("where_scalar_other", lambda x: torch.where(x > 0, x, -1.5), "aten.where.ScalarOther"),
    ("where_scalar_self", lambda x: torch.where(x > 0, 2.0, x), "aten.where.ScalarSelf"),
    ("masked_fill_inplace", lambda x: (x * 2).masked_fill_(x > 0, -1.0), "aten.masked_fill_.Scalar"),
    ("masked_fill", lambda x: x.masked_fill(x > 0, 3), "aten.masked_fill.Scalar"),
    ("chunk", lambda x: x.chunk(4, dim=1)[1] * 2, "aten.chunk.default"),
    ("pad_constant", lambda x: F.pad(x, (1, 2), value=0.5), "aten.pad.default"),
    ("pad_constant_default", lambda x: F.pad(x, (0, 0, 1, 0)), "aten.pad.default"),
    ("unflatten", lambda x: x.unflatten(1, (2, 3)) * 2, "aten.unflatten.int"),
    ("baddbmm", lambda x: torch.baddbmm(x[:, :1].unsqueeze(2), x.unsqueeze(1), x.unsqueeze(2)),
     "aten.baddbmm.default"),
    ("rms_norm", lambda x: F.rms_norm(x, (6,)), "aten.rms_norm.default"),
    ("rms_norm_weight_eps", lambda x: F.rms_norm(x.unflatten(1, (2, 3)), (2, 3), x[0].abs().view(2, 3) + 0.5,
                                                 eps=1e-3), "aten.rms_norm.default"),
    ("stack", lambda x: torch.stack([x, x * 2], dim=1), "aten.stack.default"),
    ("stack_after_last_dim", lambda x: torch.stack([x, x * 2], dim=-1), "aten.stack.default"),
    ("unbind", lambda x: x.unbind(1)[2] * 2, "aten.unbind.int"),
    ("meshgrid_ij", lambda x: sum(torch.meshgrid(torch.arange(x.shape[0], dtype=x.dtype), x[0], indexing="ij")),
     "aten.meshgrid.indexing"),
    ("meshgrid_xy", lambda x: sum(torch.meshgrid(torch.arange(x.shape[0], dtype=x.dtype), x[0], indexing="xy")),
     "aten.meshgrid.indexing"),
    ("where_condition", lambda x: torch.where(x > 0)[1] * 2, "aten.where.default"),
    ("expand_as", lambda x: x[:, :1].expand_as(x) * 2, "aten.expand_as.default"),
    ("detach", lambda x: x.detach() * 2, "aten.detach.default"),
    ("tensor_literal", lambda x: x * torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), "aten.lift_fresh_copy.default"),
]


# Proved on a whole model by tests/test_performance_capture.py::test_rewrites_give_what_the_decomposition_gives
MODEL_ROWS = ("aten.batch_norm.default", "aten.dropout.default", "aten.flatten.using_ints")
# torch.export (torch 2.14) records `x.to(other)` as to.dtype or to.device: no row can hold it
NOT_IN_TRAINING_IR = ("aten.to.other",)


def test_every_local_decomposition_has_a_row():
    """The catalogue registers itself: each entry (or its in-place form) is proved by a row."""
    covered = {_functional_name(composite) for _, _, composite in ROWS}
    assert sorted(set(LOCAL_DECOMPOSITIONS) - covered - set(MODEL_ROWS) - set(NOT_IN_TRAINING_IR)) == []


def _functional_name(target: str) -> str:
    """`aten.silu.default` for `aten.silu_.default`."""
    namespace, packet, overload = target.split(".")
    if packet.endswith("_") and not packet.startswith("_"):
        packet = packet[:-1]
    return f"{namespace}.{packet}.{overload}"


def test_a_second_decomposition_for_one_overload_is_refused():
    with pytest.raises(ValueError, match="two local decompositions for aten.silu.default"):
        local_decomposition("aten.silu.default")(lambda node, keep: None)


def _training_ir(module: torch.nn.Module, args) -> torch.export.ExportedProgram:
    batch = torch.export.Dim("batch")
    with trace.eval_mode(module):
        return torch.export.export(module, args, dynamic_shapes=({0: batch},), strict=False)


def _targets(program) -> collections.Counter:
    return collections.Counter(str(n.target) for n in program.graph.nodes if n.op == "call_function")


def _tensor_ops(program) -> collections.Counter:
    """The ATen ops on tensors (not the size arithmetic: a rewritten reshape keeps its -1 where
    the decomposition spells the size out with sym_size and mul)."""
    return collections.Counter({t: c for t, c in _targets(program).items()
                                if t.startswith("aten.") and t != "aten.sym_size.int"})


@pytest.mark.parametrize(("name", "fn", "composite"), ROWS, ids=[r[0] for r in ROWS])
def test_composite_op_skips_the_decomposition(name, fn, composite):
    module, args = _Fn(fn), (torch.randn(4, 6),)
    raw = _training_ir(module, args)
    assert composite in _targets(raw), f"training IR no longer holds {composite}: {sorted(_targets(raw))}"
    table = {op: f for op, f in torch.export.default_decompositions().items() if str(op) not in KEEP}
    decomposed = _training_ir(module, args).run_decompositions(table)
    assert functionalize.rewrite(raw, KEEP), f"{name}: the rewrite refused; see exporter.capturing.functionalize's debug log"
    rewritten = _tensor_ops(raw)
    assert all(t in KEEP for t in rewritten)
    expected = _tensor_ops(decomposed)
    expected.pop("aten.alias.default", None)  # what the decomposition makes of a `to` that changes nothing
    assert rewritten == expected
    x = torch.randn(5, 6)  # another batch size: symbolic sizes are read, not fixed
    with torch.no_grad():  # bit for bit what the decomposed program computes (silu too: mul of sigmoid)
        torch.testing.assert_close(raw.module()(x), decomposed.module()(x), rtol=0, atol=0)
        torch.testing.assert_close(raw.module()(x), module(x))


def test_a_reshape_to_its_own_shape_is_its_input():
    """torch's decomposition may keep a view to the same shape; the rewrite drops it (the
    optimised graph is a node shorter, the values the same)."""
    module, args = _Fn(lambda x: x.reshape(x.shape[0], 6) * 2), (torch.randn(4, 6),)
    raw = _training_ir(module, args)
    assert "aten.reshape.default" in _targets(raw)
    assert functionalize.rewrite(raw, KEEP)
    assert _tensor_ops(raw) == collections.Counter({"aten.mul.Tensor": 1})
    x = torch.randn(5, 6)
    with torch.no_grad():
        torch.testing.assert_close(raw.module()(x), module(x), rtol=0, atol=0)


class _MovesToMeta(torch.nn.Module):
    def forward(self, x):
        return x.to("meta")


def test_a_device_change_is_left_to_torch():
    raw = _training_ir(_MovesToMeta(), (torch.randn(4, 6),))
    assert not functionalize.rewrite(raw, KEEP)
    assert "aten.to.dtype_layout" in _targets(raw) or "aten.to.device" in _targets(raw)


class _WhereIntFloat(torch.nn.Module):
    def forward(self, x):
        return torch.where(x > 0, (x * 3).int(), 0.5)


def test_where_promoting_its_tensor_is_left_to_torch():
    assert not functionalize.rewrite(_training_ir(_WhereIntFloat(), (torch.randn(4, 6),)), KEEP)


class _InPlaceSiluOnInput(torch.nn.Module):
    def forward(self, x):
        return F.silu(x, inplace=True) + 1


def test_in_place_silu_on_an_input_is_left_to_torch():
    assert not functionalize.rewrite(_training_ir(_InPlaceSiluOnInput(), (torch.randn(4, 6),)), KEEP)


def test_hardswish_exports_as_hardswish():
    module, args = _Fn(lambda x: F.hardswish(x, inplace=True) + F.hardsigmoid(x)), (torch.randn(4, 6),)
    model = exporter.export(module, args, optimize=False)
    assert {"HardSwish", "HardSigmoid"} <= {n.op_type for n in model.graph.node}


class _ConvHardSwish(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return F.hardswish(self.conv(x)) * 2


def test_a_wrong_hardswish_is_localised_to_its_fx_node():
    import onnx

    import harness

    torch.manual_seed(0)
    module, args = _ConvHardSwish().eval(), (torch.randn(2, 3, 6, 6),)
    model = exporter.export(module, args)
    node = next(n for n in model.graph.node if n.op_type == "HardSwish")
    node.op_type = "Relu"
    altered = onnx.ModelProto()
    altered.CopyFrom(model)
    worst = harness.verify(module, args, onnx_model=altered).worst_op
    assert worst is not None and worst.fx_node == "hardswish" and worst.passed is False
    assert not worst.region  # one FX node, one ONNX node: no region
