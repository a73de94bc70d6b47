"""What keeps the peak memory of a verification near the weights: the fp64 truth of a large
layer replayed in slices, comparisons of large tensors in chunks, freed memory handed back.
Each must give exactly (or, for fp64 sums in another order, to fp64 precision) what the
unsliced computation gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import harness.analysis.truth as truth
import harness.metrics.comparison as comparison
from harness.analysis.torch_values import record_values
from harness.metrics.arrays import as_array, largest_finite
from harness.runtime.memory import release_freed_memory


class _Layers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(6, 5, 3, padding=1)
        self.conv_no_bias = torch.nn.Conv2d(5, 4, 3, stride=2, bias=False)
        self.linear = torch.nn.Linear(4 * 3 * 3, 7)

    def forward(self, x):
        y = self.conv_no_bias(self.conv(x))
        return self.linear(torch.flatten(y, 1))


def _replay_all(program, values, sliced_bytes: int, monkeypatch) -> dict[str, torch.Tensor]:
    monkeypatch.setattr(truth, "SLICED_BYTES", sliced_bytes)
    nodes = [n for n in program.graph.nodes if n.op == "call_function"]
    replay = truth.Replayer(nodes, values, device="cpu", dtype=torch.float64)
    return {n.name: replay(n)[0] for n in nodes}


def test_sliced_fp64_replay_matches_the_whole_layer(monkeypatch):
    import exporter

    torch.manual_seed(0)
    module = _Layers().eval()
    args = (torch.randn(3, 6, 7, 7),)
    program = exporter.capture(module, args)
    values = record_values(program, args)
    whole = _replay_all(program, values, 1 << 40, monkeypatch)
    sliced = _replay_all(program, values, 64, monkeypatch)  # every weight and im2col above 64 bytes: sliced
    layers = [n for n in whole if n.startswith(("conv", "linear"))]
    assert len(layers) == 3
    for name in whole:
        torch.testing.assert_close(sliced[name], whole[name], rtol=1e-13, atol=1e-13)
        assert sliced[name].dtype == torch.float64


@pytest.mark.parametrize("conv, shape", [
    (torch.nn.Conv2d(6, 5, 3, padding=1), (2, 6, 9, 11)),
    (torch.nn.Conv2d(6, 4, (3, 5), stride=2, dilation=(1, 2), padding=(2, 1), bias=False), (1, 6, 13, 17)),
    (torch.nn.Conv1d(6, 3, 5, stride=2), (3, 6, 40)),
    (torch.nn.Conv3d(4, 2, 3, padding=1), (1, 4, 5, 6, 7)),
], ids=["conv2d", "conv2d-strided-dilated-no-bias", "conv1d", "conv3d"])
def test_the_module_run_in_float64_convolves_in_slices_to_the_same_result(conv, shape, monkeypatch):
    """model_truth's eager float64 run slices every convolution whose unfolded input passes
    SLICED_BYTES (here: all of them) over its input channels, and gets the whole layer's result."""
    torch.manual_seed(0)
    monkeypatch.setattr(truth, "SLICED_BYTES", 64)
    conv = conv.double().eval()
    x = torch.randn(shape, dtype=torch.float64)
    rank = x.dim() - 2
    assert truth._convolution_slices(rank, x, conv.weight, None, conv.stride, conv.padding, conv.dilation, 1) > 1
    calls: list[int] = []
    real = truth._convolution_in_slices

    def counted(func, slices, *args, **kwargs):
        calls.append(slices)
        return real(func, slices, *args, **kwargs)

    monkeypatch.setattr(truth, "_convolution_in_slices", counted)
    with torch.no_grad():
        whole = conv(x)
    assert not calls  # outside model_truth nothing is sliced
    sliced = truth.model_truth(conv, (x,))
    assert len(calls) == 1 and calls[0] > 1
    torch.testing.assert_close(sliced, whole, rtol=1e-13, atol=1e-13)
    assert sliced.dtype == torch.float64


def _sliced_linear(monkeypatch) -> tuple[torch.fx.Node, dict]:
    """A Linear(8, 16)'s node and torch's values, with SLICED_BYTES so low that it is replayed in slices."""
    import exporter

    module = torch.nn.Linear(8, 16).eval()
    args = (torch.randn(2, 8),)
    program = exporter.capture(module, args)
    monkeypatch.setattr(truth, "SLICED_BYTES", 64)
    return next(n for n in program.graph.nodes if n.op == "call_function"), record_values(program, args)


def test_sliced_replay_returns_the_arguments_with_the_weight_as_recorded(monkeypatch):
    node, values = _sliced_linear(monkeypatch)
    output, replay_args = truth.Replayer([node], values)(node)
    assert output.shape == (2, 16) and replay_args[1].shape == (16, 8)
    assert truth.reduction_length(node, replay_args, output) == 8


class _SlicingBug(Exception):
    """An error of the replay's own slicing code (not torch's kernel)."""


class _Refusing:
    """Torch's linear, named as it is (the replay slices by name), refusing a weight of fewer than
    its 16 output features (a slice), or every call (`whole_too`)."""

    def __init__(self, target, whole_too: bool) -> None:
        self.target, self.whole_too = target, whole_too

    def __str__(self) -> str:
        return str(self.target)

    def __call__(self, *args, **kwargs):
        if self.whole_too:
            raise RuntimeError("no float64 kernel")
        if args[1].shape[0] != 16:
            raise RuntimeError("shape mismatch")
        return self.target(*args, **kwargs)


@pytest.mark.parametrize("fault, raised", [
    ("kernel", truth.OpCallFailed),  # torch's kernel refused, sliced and whole: a finding about torch
    ("slices_only", truth.SliceDefect),  # the kernel runs the whole call but not the slices made: our defect
    ("slicing", _SlicingBug),  # the harness's slicing broke: propagates as it is, never a finding
])
def test_a_sliced_replay_blames_torch_only_for_its_kernels_errors(fault, raised, monkeypatch):
    node, values = _sliced_linear(monkeypatch)
    replay = truth.Replayer([node], values, device="cpu", dtype=torch.float64)
    assert replay._sliced_layout(node) is not None  # the case replays in slices
    if fault in ("kernel", "slices_only"):
        node.target = _Refusing(node.target, whole_too=fault == "kernel")
        assert replay._sliced_layout(node) is not None  # still the sliced path
    else:
        real = truth._convert

        def broken(value, *rest):  # fails on a weight slice (one output feature), inside the slicing loop
            if isinstance(value, torch.Tensor) and tuple(value.shape) == (1, 8):
                raise _SlicingBug("slice bounds")
            return real(value, *rest)
        monkeypatch.setattr(truth, "_convert", broken)
    with pytest.raises(raised) as caught:
        replay(node)
    assert type(caught.value) is raised


@pytest.mark.parametrize("expected_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_nonfinite", [False, True])
def test_blockwise_comparison_equals_the_whole(expected_dtype, with_nonfinite, monkeypatch):
    rng = np.random.default_rng(1)
    block = comparison.BLOCK_ELEMENTS
    actual = rng.standard_normal(3 * block + 17).astype(np.float32)
    expected = (actual + rng.standard_normal(actual.size).astype(np.float32) * 1e-4).astype(expected_dtype)
    expected[::1000] = 0
    actual[2 * block: 2 * block + 50] = expected[2 * block: 2 * block + 50]  # a block's start without error
    actual[3 * block:] = expected[3 * block:]  # a block without error
    if with_nonfinite:
        actual[5], expected[5] = np.nan, np.nan  # agree
        actual[block + 3] = np.inf  # disagrees
        expected[-1] = np.nan  # disagrees
    blockwise = comparison.compare(actual, expected, atol=1e-5, rtol=1e-4, check_dtype=False)
    monkeypatch.setattr(comparison, "BLOCK_ELEMENTS", actual.size)
    whole = comparison.compare(actual, expected, atol=1e-5, rtol=1e-4, check_dtype=False)
    assert blockwise.to_dict() == whole.to_dict()
    assert list(blockwise.histogram) == list(whole.histogram)  # the same decades, in order
    assert sum(whole.histogram.values()) == actual.size - 3 * with_nonfinite  # the finite elements


def test_freed_memory_is_handed_back_on_glibc():
    import platform

    released = release_freed_memory()
    assert released == (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")


def _conversions(monkeypatch) -> list[tuple[int, ...]]:
    """The shapes of the float tensors the replay converts to float64, as it converts them."""
    made: list[tuple[int, ...]] = []
    original = truth._convert

    def counted(value, device, dtype):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and dtype == torch.float64:
            made.append(tuple(value.shape))
        return original(value, device, dtype)

    monkeypatch.setattr(truth, "_convert", counted)
    return made


@pytest.mark.parametrize("budget, weights_converted_again", [(1 << 30, 0), (0, 5)])
def test_the_fp64_passes_share_the_parameters_copies_within_a_budget(budget, weights_converted_again, monkeypatch):
    """The outputs' truth keeps each parameter's float64 copy that fits `budget`; the per-op
    pass then takes it instead of converting again, and computes the same values. Without room,
    each pass converts the parameters as before."""
    import exporter

    torch.manual_seed(0)
    module = _Layers().eval()
    args = (torch.randn(3, 6, 7, 7),)
    program = exporter.capture(module, args)
    values = record_values(program, args)
    parameters = {tuple(p.shape) for p in module.parameters()}
    alone = _replay_all(program, values, 1 << 40, monkeypatch)
    made = _conversions(monkeypatch)
    weights = truth.Float64Weights(budget)
    outputs = truth.program_truth(program, values, weights)
    first_pass = len(made)
    nodes = [n for n in program.graph.nodes if n.op == "call_function"]
    replay = truth.Replayer(nodes, values, weights=weights)
    shared = {node.name: replay(node)[0] for node in nodes}
    again = [shape for shape in made[first_pass:] if shape in parameters]

    assert len(again) == weights_converted_again
    assert weights.held <= budget and (weights.held > 0) == (budget > 0)
    for name, value in alone.items():
        torch.testing.assert_close(shared[name], value, rtol=0, atol=0)
    torch.testing.assert_close(outputs[0], truth.program_truth(program, values)[0], rtol=0, atol=0)
    kept = [n.name for n in program.graph.nodes if n.op == "placeholder" and weights.get(n.name) is not None]
    assert len(kept) == (6 if budget else 0)  # the five parameters and the input, or none
    weights.clear()
    assert weights.held == 0 and all(weights.get(name) is None for name in kept)


@pytest.mark.parametrize("values_budget, streamed, shared", [
    (1 << 30, False, True),  # the parameters' fp64 copies fit half the budget: shared by both passes
    (2 * 5_000, False, False),  # they do not (12.8 kB of float64 placeholders): each pass converts
    (1 << 30, True, False),  # torch's values streamed (a large model): never held longer than a pass needs
])
def test_the_fp64_copies_are_shared_only_where_they_fit_and_values_are_held(values_budget, streamed, shared,
                                                                            monkeypatch):
    import harness
    import harness.verification as verification_module
    from harness.analysis import fx_rows

    made: list[truth.Float64Weights] = []

    class Recorded(truth.Float64Weights):
        def __init__(self, budget: int) -> None:
            super().__init__(budget)
            self.kept: list[str] = []
            made.append(self)

        def keep(self, name: str, copy: torch.Tensor) -> None:
            super().keep(name, copy)
            self.kept.append(name)

    monkeypatch.setattr(verification_module, "Float64Weights", Recorded)
    monkeypatch.setattr(verification_module, "values_budget", lambda: values_budget)
    if streamed:
        monkeypatch.setattr(verification_module, "VALUES_BUDGET", 1)
        monkeypatch.setattr(fx_rows, "CHUNK_BYTES", 1)
    torch.manual_seed(0)
    verification = harness.verify(_Layers().eval(), (torch.randn(3, 6, 7, 7),))
    assert verification.passed
    assert len(made) == (1 if shared else 0)
    if shared:  # filled by the outputs' truth, emptied once the per-op pass is done
        assert made[0].held == 0 and made[0].budget == values_budget // 2
        assert len(made[0].kept) == len(set(made[0].kept)) == 6  # each placeholder converted once


class _FakeMalloc:
    """glibc's mallopt and malloc_trim, recorded (harness.runtime.memory._libc's stand-in)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, symbol: str):
        return lambda *args: self.calls.append((symbol, *args)) or 1


@pytest.mark.parametrize("nested, trims_inside", [(False, 0), (True, 0)])
def test_a_reusing_scope_trims_once_at_its_end_and_restores_glibcs_thresholds(nested, trims_inside, monkeypatch):
    import contextlib

    from harness.runtime import memory

    fake = _FakeMalloc()
    monkeypatch.setattr(memory, "_libc", fake)
    with memory.reusing_freed_memory(1 << 20) as tuned:
        with memory.reusing_freed_memory() if nested else contextlib.nullcontext():
            assert memory.release_freed_memory()  # a trim asked for inside: deferred
        inside = [call for call in fake.calls if call[0] == "malloc_trim"]
    assert tuned
    assert len(inside) == trims_inside
    assert fake.calls == [("mallopt", memory.M_MMAP_THRESHOLD, 1 << 20), ("mallopt", memory.M_TRIM_THRESHOLD, 1 << 30),
                          ("mallopt", memory.M_MMAP_THRESHOLD, memory.GLIBC_MMAP_THRESHOLD),
                          ("mallopt", memory.M_TRIM_THRESHOLD, 2 * memory.GLIBC_MMAP_THRESHOLD), ("malloc_trim", 0)]
    assert memory.release_freed_memory() and fake.calls[-1] == ("malloc_trim", 0)  # outside: trims again


@pytest.mark.parametrize("outer, expected", [
    (False, [("mallopt", -4, 0), ("mallopt", -1, 1 << 30),  # mapping off, no trims
             ("mallopt", -4, 65536), ("mallopt", -1, 64 << 20), ("malloc_trim", 0)]),  # glibc's again, trimmed
    (True, [("mallopt", -4, 0), ("mallopt", -1, 1 << 30),
            ("mallopt", -4, 65536), ("malloc_trim", 0)]),  # the outer scope's trim threshold kept, trimmed all the same
])
def test_any_size_from_heap_maps_nothing_and_trims_at_its_end_even_inside_a_reusing_scope(outer, expected, monkeypatch):
    import contextlib

    from harness.runtime import memory

    assert (memory.M_MMAP_MAX, memory.M_TRIM_THRESHOLD, memory.GLIBC_MMAP_MAX) == (-4, -1, 65536)  # glibc's values
    fake = _FakeMalloc()
    monkeypatch.setattr(memory, "_libc", fake)
    with memory.reusing_freed_memory() if outer else contextlib.nullcontext():
        before = len(fake.calls)
        with memory.any_size_from_heap() as tuned:
            assert memory.release_freed_memory()  # deferred to the scope's end
            assert not any(call[0] == "malloc_trim" for call in fake.calls)
        assert tuned and fake.calls[before:] == expected
    assert memory._reusing == 0


@pytest.mark.parametrize("sliced_bytes", [truth.SLICED_BYTES, 4_000])  # the zoo's slicing, and every layer sliced
def test_reusing_freed_memory_in_the_fp64_passes_leaves_every_row_as_it_was(sliced_bytes, monkeypatch):
    """The fp64 passes run in a reusing scope (harness.runtime.memory.reusing_freed_memory):
    where blocks come from changes nothing a row says."""
    import contextlib

    import harness

    def rows(verification) -> list[tuple]:
        return [(op.fx_node, op.passed, op.isolated, op.accumulated, op.truth, op.torch_truth, op.attribution,
                 op.verdict.to_dict() if op.verdict is not None else None) for op in verification.ops]

    monkeypatch.setattr(truth, "SLICED_BYTES", sliced_bytes)
    torch.manual_seed(0)
    module, args = _Layers().eval(), (torch.randn(3, 6, 7, 7),)
    scopes: list[bool] = []
    original = truth.reusing_freed_memory

    def recorded():
        scopes.append(True)
        return original()

    monkeypatch.setattr(truth, "reusing_freed_memory", recorded)
    reusing = harness.verify(module, args)
    monkeypatch.setattr(truth, "reusing_freed_memory", lambda: contextlib.nullcontext(False))
    trimming = harness.verify(module, args)
    assert len(scopes) == 2  # the outputs' truth, the per-op pass
    assert reusing.passed and trimming.passed
    assert rows(reusing) == rows(trimming) and len(rows(reusing)) == 4  # two convolutions, flatten, linear
    assert [o.max_abs for o in reusing.outputs] == [o.max_abs for o in trimming.outputs]


class _Pointwise(torch.nn.Module):
    """The element-wise ops a detector pastes its masks with, on full tensors, broadcast rows,
    scalars, booleans and integers, with NaN and infinities among the values."""

    def forward(self, x, y, row, mask, index):
        a = x * y + row  # mul, add with a row broadcast along the first dimension
        b = torch.where(mask, a, x / (y - 0.5))  # where on a sliced condition; div; sub with a scalar
        c = torch.maximum(torch.relu(b), -x).clamp(-1.0, 2.5)  # maximum, relu, neg, clamp
        d = torch.minimum(c, index * 0.25).abs()  # an int tensor promoted to float64
        return d - torch.clamp_min(x, 0.1) + torch.clamp_max(y, 0.3)


def test_element_wise_ops_replay_in_slices_bit_for_bit(monkeypatch):
    import exporter

    torch.manual_seed(0)
    x, y = torch.randn(9, 5, 7), torch.randn(9, 5, 7)
    x[0, 0, 0], x[3, 2, 1], y[8, 4, 6] = float("nan"), float("inf"), -float("inf")
    args = (x, y, torch.randn(1, 5, 7), torch.rand(9, 5, 7) > 0.5, torch.randint(-9, 9, (9, 5, 7)))
    program = exporter.capture(_Pointwise().eval(), args)
    values = record_values(program, args)
    ops = [n for n in program.graph.nodes if str(n.target) in truth.EXACT_POINTWISE]
    assert len(ops) >= 11
    monkeypatch.setattr(truth, "SLICED_BYTES", 3 * 5 * 7 * 8)  # a few rows per slice
    rows = {n.name: truth.Replayer([n], values)._pointwise_rows(n) for n in ops}
    assert all(0 < count < 9 for count in rows.values()), rows
    whole = _replay_all(program, values, 1 << 40, monkeypatch)
    sliced = _replay_all(program, values, 3 * 5 * 7 * 8, monkeypatch)
    for name in whole:
        torch.testing.assert_close(sliced[name], whole[name], rtol=0, atol=0, equal_nan=True)
        assert sliced[name].dtype == whole[name].dtype


def test_a_sliced_element_wise_replay_returns_torch_values_as_its_arguments(monkeypatch):
    import exporter

    args = (torch.randn(6, 4), torch.randn(1, 4))
    program = exporter.capture(_Add().eval(), args)
    values = record_values(program, args)
    monkeypatch.setattr(truth, "SLICED_BYTES", 16)
    node = next(n for n in program.graph.nodes if str(n.target) == "aten.add.Tensor")
    output, replay_args = truth.Replayer([node], values)(node)
    assert output.dtype == torch.float64 and torch.equal(output, (args[0].double() + args[1].double()))
    assert replay_args[0] is values[node.args[0].name] and truth.reduction_length(node, replay_args, output) == 1


class _Add(torch.nn.Module):
    def forward(self, x, row):
        return x + row


class _Stateful(torch.nn.Module):
    """A layer that keeps state in a plain attribute, in the dtype it last ran in (as
    torchvision's AnchorGenerator keeps its cell anchors)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.register_buffer("offset", torch.ones(3))
        self.cached = [torch.zeros(3)]

    def forward(self, x):
        self.cached = [c.to(x.dtype) for c in self.cached]
        return self.linear(x) + self.offset + self.cached[0]


def test_the_outputs_truth_runs_on_a_copy_sharing_the_weights():
    from harness.verification import _stateless_copy

    module = _Stateful().eval()
    copied = _stateless_copy(module)
    assert all(a is b for a, b in zip(module.parameters(), copied.parameters()))
    assert all(a is b for a, b in zip(module.buffers(), copied.buffers()))
    x = torch.randn(2, 4)
    output = truth.model_truth(copied, (x,))
    assert output.dtype == torch.float64 and torch.equal(output, truth.model_truth(module, (x,)))
    assert copied.cached[0].dtype == torch.float64 and module.cached[0].dtype == torch.float64
    fresh = _Stateful().eval()
    truth.model_truth(_stateless_copy(fresh), (x,))
    assert fresh.cached[0].dtype == torch.float32 and fresh.linear.weight.dtype == torch.float32


class _Paste(torch.nn.Module):
    """A mask paste's element-wise ops on values of many rows: a product of two, then a sum with
    a row broadcast along the first dimension."""

    def forward(self, x, y, row):
        return x * y + row


def _paste_rows(monkeypatch, nonfinite: bool):
    import exporter

    torch.manual_seed(3)
    x, y, row = torch.randn(9, 5, 7), torch.randn(9, 5, 7), torch.randn(1, 5, 7)
    if nonfinite:
        x[0, 0, 0], y[4, 1, 1], x[8, 4, 6] = float("nan"), float("inf"), -float("inf")
    program = exporter.capture(_Paste().eval(), (x, y, row))
    values = record_values(program, (x, y, row))
    monkeypatch.setattr(truth, "SLICED_BYTES", 2000)  # 2 rows per slice of the product (the last one short), 3 of the sum
    return [n for n in program.graph.nodes if str(n.target) in truth.EXACT_POINTWISE], values


@pytest.mark.parametrize("nonfinite", [False, True])
def test_a_truth_in_slices_compares_as_the_whole_truth(monkeypatch, nonfinite):
    """Replayed with `in_slices`, a large element-wise op's truth is made a slice at a time, once per
    reading for every side compared, and each comparison (and the truth's largest finite
    magnitude) is the whole truth's, field by field."""
    ops, values = _paste_rows(monkeypatch, nonfinite)
    assert len(ops) == 2
    for node in ops:
        whole, _ = truth.Replayer([node], values)(node)
        sliced, args = truth.Replayer([node], values, in_slices=True)(node)
        assert isinstance(sliced, truth.TruthInSlices) and 1 < sliced.rows < 9 and sliced.numel() == whole.numel()
        assert truth.reduction_length(node, args, sliced) == truth.reduction_length(node, args, whole) == 1
        torch.testing.assert_close(sliced.whole(), whole, rtol=0, atol=0, equal_nan=True)
        made = []
        real = sliced._make
        sliced._make = lambda start, stop: made.append(start) or real(start, stop)
        torch_side = as_array(values[node.name])
        backend = torch_side.copy()
        backend[2, 3, 4] += 1e-3
        backend[8, 0, 0] = float("nan")
        got = truth.compare_with_truth([torch_side, backend], sliced, atol=1e-6, rtol=1e-5, name=node.name)
        want = truth.compare_with_truth([torch_side, backend], whole, atol=1e-6, rtol=1e-5, name=node.name)
        assert [c.to_dict() for c in got] == [c.to_dict() for c in want]
        assert made == list(range(0, 9, sliced.rows))  # each slice made once for both sides
        assert truth.truth_largest_finite(sliced) == largest_finite(as_array(whole))
        assert truth.compare_with_truth([], sliced, atol=0, rtol=0) == []


@pytest.mark.parametrize("whole_too, raised", [(True, truth.OpCallFailed), (False, truth.SliceDefect)])
def test_a_truth_in_slices_blames_torch_only_when_the_whole_call_fails(monkeypatch, whole_too, raised):
    ops, values = _paste_rows(monkeypatch, nonfinite=False)
    node = ops[0]
    real = node.target

    class Refusing:
        def __str__(self) -> str:
            return str(real)

        def __call__(self, *args):
            if whole_too or args[0].shape[0] != 9:
                raise RuntimeError("refused")
            return real(*args)

    node.target = Refusing()
    sliced, _ = truth.Replayer([node], values, in_slices=True)(node)
    with pytest.raises(raised):
        truth.compare_with_truth([as_array(values[node.name])], sliced, atol=0, rtol=0)


IMAGE_GROUPS = [
    # (id, layer, input shape): each image unfolds within SLICED_BYTES, the batch does not
    ("conv2d", torch.nn.Conv2d(6, 5, 3, padding=1), (7, 6, 9, 11)),
    ("conv2d grouped, strided, dilated, no bias",
     torch.nn.Conv2d(6, 4, (3, 5), stride=2, dilation=(1, 2), padding=(2, 1), groups=2, bias=False), (5, 6, 13, 17)),
    ("conv1d", torch.nn.Conv1d(6, 3, 5, stride=2), (9, 6, 40)),
    ("conv3d", torch.nn.Conv3d(4, 2, 3, padding=1), (3, 4, 5, 6, 7)),
]


def _per_image_bytes(layer, shape) -> int:
    with torch.no_grad():
        spatial = layer(torch.zeros(1, *shape[1:])).shape[2:].numel()
    return layer.weight[0].numel() * spatial * 8


@pytest.mark.parametrize("layer, shape", [c[1:] for c in IMAGE_GROUPS], ids=[c[0] for c in IMAGE_GROUPS])
def test_a_convolution_whose_batch_unfolds_past_the_slice_runs_on_image_groups_to_the_same_bits(layer, shape,
                                                                                               monkeypatch):
    """torch's float64 convolution unfolds its whole batch at once (a detector's mask head: 345 MiB
    for 100 regions); where each image fits SLICED_BYTES, the replay and the module's float64 run
    convolve groups of images, and get the whole call's output bit for bit."""
    import exporter

    torch.manual_seed(0)
    layer = layer.eval()
    x = torch.randn(shape)
    monkeypatch.setattr(truth, "SLICED_BYTES", 2 * _per_image_bytes(layer, shape) + 8)  # 2 images per call
    program = exporter.capture(layer, (x,))
    values = record_values(program, (x,))
    node = next(n for n in program.graph.nodes if n.op == "call_function")
    replay = truth.Replayer([node], values)
    assert replay._sliced_layout(node) is None and replay._images_per_call(node) == 2
    calls: list[int] = []
    real = node.target

    class Counted:  # named as torch's op (the replay slices by name), counting the images of each call
        def __str__(self) -> str:
            return str(real)

        def __call__(self, x, *rest):
            calls.append(x.shape[0])
            return real(x, *rest)

    node.target = Counted()
    output, args = replay(node)
    node.target = real
    whole = real(*[a.double() if isinstance(a, torch.Tensor) else a for a in
                   torch.fx.node.map_arg(node.args, lambda n: values[n.name])])
    assert calls == [2] * (shape[0] // 2) + [1] * (shape[0] % 2)
    assert torch.equal(output, whole) and args[0].shape == x.shape and args[0].dtype == torch.float64
    with torch.no_grad():
        eager = layer.double()(x.double())
    assert truth._convolution_images(x.dim() - 2, x.double(), layer.weight, None, layer.stride, layer.padding,
                                     layer.dilation, layer.groups) == 2
    grouped: list[int] = []
    real_groups = truth._convolution_in_images
    monkeypatch.setattr(truth, "_convolution_in_images",
                        lambda func, images, *rest, **kwargs: grouped.append(images) or real_groups(func, images, *rest, **kwargs))
    assert torch.equal(truth.model_truth(layer, (x,)), eager) and grouped == [2]


@pytest.mark.parametrize("layout, trims", [
    ("joint", 2),  # the production session's, then one when the verification's scope ends
    ("apart", 2),  # the same: its weights no heavier than its values
    ("apart, weights heavier", 3),  # and one when the sessions loaded apart are done (any_size_from_heap)
    ("streamed", None),  # torch's values streamed: trimmed as it goes, more than twice
])
def test_a_verification_held_whole_trims_once_after_production_and_its_rows_are_unchanged(layout, trims, monkeypatch):
    """A model whose values are held whole reuses freed blocks from torch's values to the end of
    its per-op rows, and trims once then (harness.verification); a
    streamed one trims after each session as before. Where blocks come from changes no row."""
    import contextlib

    import harness
    import harness.verification as verification_module
    from harness.analysis import fx_rows
    from harness.runtime import memory

    if layout.startswith("apart"):
        monkeypatch.setattr(fx_rows, "JOIN_NODES", 0)
    if layout == "streamed":
        monkeypatch.setattr(verification_module, "VALUES_BUDGET", 1)
        monkeypatch.setattr(fx_rows, "CHUNK_BYTES", 1)
    torch.manual_seed(0)
    module, args = _Layers().eval(), (torch.randn(3, 6, 7, 7),)
    if layout == "apart, weights heavier":
        module.linear = torch.nn.Linear(4 * 3 * 3, 4096)  # 0.6 MB of weights beside 0.1 MB of values
    fake = _FakeMalloc()
    monkeypatch.setattr(memory, "_libc", fake)
    reusing = harness.verify(module, args)
    trimmed = sum(1 for call in fake.calls if call[0] == "malloc_trim")
    tuned = [call[2] for call in fake.calls if call[:2] == ("mallopt", memory.M_MMAP_THRESHOLD)]
    unmapped = [call[2] for call in fake.calls if call[:2] == ("mallopt", memory.M_MMAP_MAX)]
    off = lambda *args, **kwargs: contextlib.nullcontext(False)  # noqa: E731
    monkeypatch.setattr(verification_module, "reusing_freed_memory", off)
    trimming = harness.verify(module, args)
    assert reusing.passed and trimming.passed
    assert [op.to_dict() for op in reusing.ops] == [op.to_dict() for op in trimming.ops] and len(reusing.ops) == 4
    assert [o.max_abs for o in reusing.outputs] == [o.max_abs for o in trimming.outputs]
    assert trimmed == trims if trims is not None else trimmed > 2
    assert set(tuned) == {memory.REUSED_BLOCK_BYTES, memory.GLIBC_MMAP_THRESHOLD}  # the scopes' blocks, then glibc's
    assert unmapped == ([0, memory.GLIBC_MMAP_MAX] if layout == "apart, weights heavier" else [])  # mapping off
