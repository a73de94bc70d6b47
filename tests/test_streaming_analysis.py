"""Per-op analysis in bounded chunks: the instrumented run in graph segments, torch's values
streamed and released after their last reader. A tiny model, run with budgets small enough to
force several chunks, must give the same rows (isolated errors, fp64 truth, verdicts) as the
whole-model analysis, while no backend run returns more than a chunk of exposed values and
torch's streamed values never all live at once."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

import harness
import harness.testing
import harness.verification as verification_module
from harness.analysis import fx_rows, torch_values
from harness.onnxgraph.segments import plan_segments, segment_model, tensor_types


class _Stack(torch.nn.Module):
    """Eight conv blocks with a skip connection across the middle (a value read far ahead)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
            for _ in range(8))

    def forward(self, x):
        skip = x = self.blocks[0](x)
        for block in self.blocks[1:]:
            x = block(x)
        return torch.sigmoid(x + skip).mean(dim=(2, 3))


def _inputs() -> tuple[torch.Tensor]:
    return (torch.randn(2, 8, 48, 48, generator=torch.Generator().manual_seed(1)),)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return _Stack().eval()


def _row(op) -> tuple:
    verdict = op.verdict.to_dict() if op.verdict is not None else None
    return (op.passed, op.isolated.max_abs if op.isolated else None, op.truth.max_abs if op.truth else None,
            op.torch_truth.max_abs if op.torch_truth else None, op.attribution, verdict)


VALUE_BYTES = 2 * 8 * 48 * 48 * 4  # one block's activation (above torch_values.SMALL_BYTES)


def _counting_runner(monkeypatch, count=lambda model, values: sum(v.nbytes for v in values.values())) -> list[int]:
    """Record `count(model, values)` of every backend run of the analysis: by default the bytes
    of exposed values it returns."""
    returned: list[int] = []
    original = verification_module.runtime.model_runner

    def model_runner(*args, **kwargs):
        run = original(*args, **kwargs)

        def counted(model, feeds):
            values = run(model, feeds)
            returned.append(count(model, values))
            return values

        return counted

    monkeypatch.setattr(verification_module.runtime, "model_runner", model_runner)
    return returned


def test_chunked_analysis_gives_the_rows_of_the_whole(monkeypatch):
    whole = harness.verify(_model(), _inputs(), optimize=False)
    assert "instrumented_segments" not in whole.environment and "torch_values" not in whole.environment

    returned = _counting_runner(monkeypatch)
    monkeypatch.setattr(fx_rows, "CHUNK_BYTES", 3 * VALUE_BYTES)
    monkeypatch.setattr(verification_module, "VALUES_BUDGET", 3 * VALUE_BYTES)
    chunked = harness.verify(_model(), _inputs(), optimize=False)

    assert chunked.passed == whole.passed
    assert chunked.environment["instrumented_segments"] >= 4
    assert chunked.environment["torch_values"]["streamed"]
    assert [op.fx_node for op in chunked.ops] == [op.fx_node for op in whole.ops]
    for streamed, reference in zip(chunked.ops, whole.ops):
        assert _row(streamed) == _row(reference), streamed.fx_node
        assert (streamed.accumulated is None) == (reference.accumulated is None), streamed.fx_node
    # every run (segments, isolation batches) returns about a chunk: never every value at once
    total = sum(v.numel() * v.element_size() for v in _all_values(_model(), _inputs()))
    assert max(returned) <= 3 * VALUE_BYTES + 2 * VALUE_BYTES < total / 3
    # reproducer tensors are kept for the worst ops only, and a reproducer still builds
    assert 0 < sum(op.artifacts is not None for op in chunked.ops) <= fx_rows.KEPT_ARTIFACTS
    assert harness.testing.reproducer_op(chunked) is not None


def test_a_passing_row_drops_its_isolated_values_once_judged(monkeypatch):
    """In a chunk, each row is judged as soon as its truth is filled, and a passing row's
    isolated values go then: when a row's truth is compared, the only other rows holding
    isolated values are those of its chunk still waiting for their truth."""
    made: list = []
    filled: set[int] = set()
    real_record, real_fill = fx_rows._record, fx_rows._fill_truth

    def record(group, analysis):
        made.append(real_record(group, analysis))
        return made[-1]

    held: list[tuple[int, int]] = []  # (bytes held by other rows, of which by rows waiting for their truth)

    def fill(row, *args, **kwargs):
        others = [other for other in made if other is not row and other.artifacts is not None]
        held.append(tuple(sum(value.nbytes for other in chosen for value in other.artifacts.isolated_outputs.values())
                          for chosen in (others, [other for other in others if id(other) not in filled])))
        filled.add(id(row))
        return real_fill(row, *args, **kwargs)

    monkeypatch.setattr(fx_rows, "_record", record)
    monkeypatch.setattr(fx_rows, "_fill_truth", fill)
    monkeypatch.setattr(fx_rows, "CHUNK_BYTES", 3 * VALUE_BYTES)
    monkeypatch.setattr(verification_module, "VALUES_BUDGET", 3 * VALUE_BYTES)
    verification = harness.verify(_model(), _inputs(), optimize=False)
    assert verification.passed and verification.environment["instrumented_segments"] >= 4
    assert len(held) >= 24 and any(waiting for _, waiting in held)
    assert all(total == waiting for total, waiting in held)


def _all_values(module, args) -> list[torch.Tensor]:
    import exporter

    program = exporter.capture(module, args)
    values = torch_values.record_values(program, args)
    return [v for v in values.values() if isinstance(v, torch.Tensor) and v.is_floating_point()
            and v.dim() == 4]


def test_streamed_torch_values_are_released_after_their_readers():
    import exporter

    module, args = _model(), _inputs()
    program = exporter.capture(module, args)
    whole = torch_values.record_values(program, args)
    streamed = torch_values.record_values(program, args, budget=2 * VALUE_BYTES)
    assert isinstance(streamed, torch_values.TorchValues) and streamed.streaming
    kept_large = [n for n, v in streamed.kept.items() if isinstance(v, torch.Tensor)
                  and v.numel() * v.element_size() > torch_values.SMALL_BYTES and n not in dict(module.named_parameters())
                  and not n.startswith(("p_", "b_", "x"))]
    assert kept_large == [], kept_large  # only placeholders, outputs and small values stay from the first run

    ops = [n for n in program.graph.nodes if n.op == "call_function"]
    most_live = 0
    for node in ops:  # measure op after op, as the analysis does
        torch.testing.assert_close(streamed[node.name], whole[node.name], rtol=0, atol=0)
        for source in node.all_input_nodes:
            assert streamed.get(source.name) is not None
        streamed.release([node.name])
        most_live = max(most_live, len(streamed._computed))
    assert streamed.passes == 2  # one more run of the graph, never started over
    assert most_live <= 3  # the skip connection and the value being measured, not the whole graph
    meta = streamed.describe(ops[0].name)
    assert meta.device.type == "meta" and meta.shape == whole[ops[0].name].shape


def test_a_run_started_over_holds_only_what_is_still_needed():
    """A value asked for after its release starts the graph over; that run passes every op
    already measured and must drop their values as it goes, not hold the whole graph."""
    import exporter

    module, args = _model(), _inputs()
    program = exporter.capture(module, args)
    whole = torch_values.record_values(program, args)
    streamed = torch_values.record_values(program, args, budget=2 * VALUE_BYTES)
    ops = [n for n in program.graph.nodes if n.op == "call_function"]
    for node in ops[:-1]:
        assert streamed[node.name] is not None
        streamed.release([node.name])
    first, last = ops[0].name, [n.name for n in ops if n.name not in streamed.kept][-1]
    torch.testing.assert_close(streamed[first], whole[first], rtol=0, atol=0)  # released: the graph runs again
    assert streamed.passes == 3
    torch.testing.assert_close(streamed[last], whole[last], rtol=0, atol=0)
    assert ops.index(program.graph.find_nodes(op="call_function", target=ops[0].target)[0]) == 0
    assert [n.name for n in ops].index(last) > 20
    assert len(streamed._computed) <= 3, sorted(streamed._computed)  # the value asked for, what reads it


def test_a_value_read_only_by_ops_without_rows_is_released_with_the_rows_reading_it():
    """Ops the analysis has no row for (here: every other op) never get measured: what they read
    must still go once the rows around them are measured, not stay to the end of the graph."""
    import exporter

    module, args = _model(), _inputs()
    program = exporter.capture(module, args)
    streamed = torch_values.record_values(program, args, budget=2 * VALUE_BYTES)
    ops = [n for n in program.graph.nodes if n.op == "call_function"]
    rows = [node.name for node in ops[::2]]
    streamed.measured_by({name: name for name in rows})
    most_live = 0
    for name in rows:
        assert streamed[name] is not None
        streamed.release([name])
        most_live = max(most_live, len(streamed._computed))
    assert streamed.passes == 2
    assert most_live <= 4, most_live
    assert len(streamed._computed) <= 2  # at the end: nothing waits for a row any more


def test_segments_compute_what_the_whole_model_computes():
    import exporter

    module, args = _model(), _inputs()
    model = exporter.export(module, args, optimize=False)
    names = [n.output[0] for n in model.graph.node if n.op_type in ("Conv", "Relu", "BatchNormalization")]
    segments = plan_segments(model, names, lambda name: VALUE_BYTES, 2 * VALUE_BYTES)
    assert len(segments) >= 4
    assert segments[0].start == 0 and segments[-1].stop == len(model.graph.node)
    assert all(a.stop == b.start for a, b in zip(segments, segments[1:]))
    types = tensor_types(model)
    import onnxruntime

    live = {model.graph.input[0].name: args[0].numpy()}
    exposed: dict[str, object] = {}
    for segment in segments:
        piece = segment_model(model, segment, live, types)
        assert len(piece.graph.node) == segment.stop - segment.start
        assert {t.name for t in piece.graph.initializer} <= {t.name for t in model.graph.initializer}
        session = onnxruntime.InferenceSession(piece.SerializeToString(), providers=["CPUExecutionProvider"])
        outputs = dict(zip(segment.outputs, session.run(segment.outputs, {n: live[n] for n in segment.inputs})))
        for name in segment.released:
            live.pop(name)
        live.update((name, outputs[name]) for name in segment.carried)
        exposed.update((name, outputs[name]) for name in segment.exposed)
    whole = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    final = whole.run(None, {model.graph.input[0].name: args[0].numpy()})
    assert set(exposed) == set(names)
    torch.testing.assert_close(torch.from_numpy(live[model.graph.output[0].name]), torch.from_numpy(final[0]),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("budget", [0, 1 << 40])
def test_one_segment_or_one_per_exposed_value(budget):
    import exporter

    model = exporter.export(_model(), _inputs(), optimize=False)
    names = [n.output[0] for n in model.graph.node]
    segments = plan_segments(model, names, lambda name: VALUE_BYTES, budget)
    assert len(segments) == (1 if budget else len(model.graph.node))


class _SeparateRuns:
    """A JointRun that runs the isolation batch and the instrumented model each alone."""

    def __init__(self, run, instrumented, feeds) -> None:
        self.isolation = self.instrumented = run
        self.joint_runs = 0


def test_a_model_that_fits_is_one_backend_run_with_the_rows_of_separate_runs(monkeypatch):
    """One chunk: the isolation batch and the instrumented model are loaded and run as one model,
    and every row (accumulated, isolated, truth, verdict) is what separate runs give."""
    returned = _counting_runner(monkeypatch)
    joint = harness.verify(_model(), _inputs(), optimize=False)
    joint_runs = len(returned)
    monkeypatch.setattr(fx_rows, "JointRun", _SeparateRuns)
    separate = harness.verify(_model(), _inputs(), optimize=False)

    assert joint.environment["joint_instrumented_isolation_runs"] == 1
    assert (joint_runs, len(returned) - joint_runs) == (1, 2)
    assert joint.passed == separate.passed
    assert [_row(op) for op in joint.ops] == [_row(op) for op in separate.ops]
    assert [op.accumulated.max_abs if op.accumulated else None for op in joint.ops] == [
        op.accumulated.max_abs if op.accumulated else None for op in separate.ops]
    assert any(op.accumulated is not None for op in joint.ops)


class _WideHead(torch.nn.Module):
    """A small convolution before a Linear whose weight (1 MiB) outweighs every value the model
    makes (a few KiB): vgg16's shape in miniature."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.head = torch.nn.Linear(4 * 8 * 8, 1024)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).flatten(1))


def test_a_model_whose_largest_weight_outweighs_its_values_loads_the_two_apart(monkeypatch):
    """One chunk, but its weights outweigh its values: the instrumented model and
    the isolation batch load apart (a joint load packs that weight twice), with the rows a joint
    run gives."""
    torch.manual_seed(0)
    module, args = _WideHead().eval(), (torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(2)),)
    monkeypatch.setattr(fx_rows, "JOIN_WEIGHTS_BYTES", 0)  # the 1 MiB weight stands for vgg16's 528 MB
    returned = _counting_runner(monkeypatch)
    apart = harness.verify(module, args, optimize=False)
    apart_runs = list(returned)
    monkeypatch.setattr(fx_rows, "_joinable", lambda analysis, exposed_bytes: True)
    joint = harness.verify(module, args, optimize=False)

    assert apart.environment["joint_instrumented_isolation_runs"] == 0
    assert joint.environment["joint_instrumented_isolation_runs"] == 1
    assert (len(apart_runs), len(returned) - len(apart_runs)) == (2, 1)  # instrumented, isolation; joint
    assert apart.passed and joint.passed
    assert [_row(op) for op in apart.ops] == [_row(op) for op in joint.ops]


@pytest.mark.parametrize("dims, data_type, stub, expected", [
    ((1024, 256), 1, True, 1024 * 256 * 4 + 8),  # float32, held in memory by the export (a stub)
    ((3, 5), 11, False, 3 * 5 * 8 + 8),  # float64, inline
    ((7,), 16, False, 7 * 2 + 8),  # bfloat16
    ((), 7, False, 8 + 8),  # an int64 scalar
])
def test_initializer_bytes_reads_types_and_shapes(dims, data_type, stub, expected):
    import numpy as np
    import onnx

    from exporter.contract.skeleton import stub as make_stub

    tensor = onnx.TensorProto(name="w", data_type=data_type, dims=dims)
    if stub:
        make_stub(tensor)
    else:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(data_type)
        tensor.raw_data = np.zeros(dims, dtype).tobytes()
    small = onnx.TensorProto(name="b", data_type=1, dims=(2,), raw_data=bytes(8))
    model = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], [], initializer=[small, tensor]))
    assert fx_rows.initializer_bytes(model) == expected  # with the small float32 pair's 8 bytes


def test_a_model_past_the_budget_streams_in_chunks_of_the_smallest_budget(monkeypatch):
    """A large budget decides only whether a model is held whole: once it streams, its chunks are
    the smallest budget's, so the peak of a model past the budget does not grow with it."""
    returned = _counting_runner(monkeypatch)
    monkeypatch.setattr(fx_rows, "FLOOR_BYTES", 2 * VALUE_BYTES)
    monkeypatch.setattr(fx_rows, "CHUNK_BYTES", 8 * VALUE_BYTES)  # under the whole model's values
    monkeypatch.setattr(verification_module, "VALUES_BUDGET", 8 * VALUE_BYTES)
    streamed = harness.verify(_model(), _inputs(), optimize=False)

    assert streamed.environment["instrumented_segments"] >= 6
    assert max(returned) <= 2 * VALUE_BYTES + 2 * VALUE_BYTES < 8 * VALUE_BYTES


_MIB = 1 << 20


@pytest.mark.parametrize("weights, values, chunk, nodes, joined", [
    (47 * _MIB, 31 * _MIB, 1024 * _MIB, 49, True),  # resnet18: weights under the allowance
    (100 * _MIB, 150 * _MIB, 1024 * _MIB, 122, True),  # values outweigh the weights
    (528 * _MIB, 115 * _MIB, 1024 * _MIB, 38, False),  # vgg16: a second packed copy of 528 MB
    (1526 * _MIB, 300 * _MIB, 1024 * _MIB, 200, False),  # llama
    (10 * _MIB, 2048 * _MIB, 1024 * _MIB, 50, False),  # values past one chunk stream apart
    (80 * _MIB, 180 * _MIB, 1024 * _MIB, 360, True),  # resnet152: one joint load costs less than two
    (80 * _MIB, 180 * _MIB, 1024 * _MIB, 608, False),  # densenet201: two loads cost less than one joint
])
def test_the_joint_load_is_chosen_by_the_weights_the_values_and_the_nodes(monkeypatch, weights, values, chunk,
                                                                          nodes, joined):
    monkeypatch.setattr(fx_rows, "initializer_bytes", lambda model: weights)
    model = types.SimpleNamespace(graph=types.SimpleNamespace(node=[None] * nodes))
    analysis = types.SimpleNamespace(onnx_model=model, chunk_bytes=chunk)
    assert fx_rows._joinable(analysis, values) is joined


def _group(fx: str, nodes: list, outputs: dict[int, str]):
    from harness.analysis.fx_mapping import NodeGroup

    return NodeGroup(fx, "aten.linear.default", nodes=nodes, outputs=outputs)


def _weights_model(*names_and_dims):
    import onnx

    from exporter.contract.skeleton import stub as make_stub

    tensors = [make_stub(onnx.TensorProto(name=name, data_type=1, dims=dims)) for name, dims in names_and_dims]
    return onnx.helper.make_model(onnx.helper.make_graph([], "g", [], [], initializer=tensors))


@pytest.mark.parametrize("groups, expected", [
    # each row's weights on its first output
    ({"a": (["x", "w1", "b1"], {0: "ya"}), "b": (["ya", "w2"], {0: "yb"})},
     {"ya": (64 * 32 + 64) * 4, "yb": 16 * 64 * 4}),
    # a weight two rows read (tied embeddings) counts once, at its first reader
    ({"a": (["x", "w1"], {0: "ya"}), "b": (["ya", "w1", "b1"], {0: "yb"})}, {"ya": 64 * 32 * 4, "yb": 64 * 4}),
    # the lowest output index carries them; a row without outputs or weights carries none
    ({"a": (["x", "w2"], {1: "ya1", 0: "ya0"}), "b": (["ya0"], {0: "yb"}), "c": (["w1"], {})},
     {"ya0": 16 * 64 * 4}),
])
def test_the_weights_a_segment_loads_are_counted_on_their_rows_first_output(groups, expected):
    import onnx

    model = _weights_model(("w1", (64, 32)), ("b1", (64,)), ("w2", (16, 64)))
    nodes = {fx: [onnx.helper.make_node("Gemm", inputs, [f"{fx}_out"])] for fx, (inputs, _) in groups.items()}
    mapped = {fx: _group(fx, nodes[fx], outputs) for fx, (_, outputs) in groups.items()}
    assert fx_rows.weights_by_value(model, mapped) == expected


class _Tower(torch.nn.Module):
    """Four Linear layers of 256 KiB each on one row: its weights (1 MiB) outweigh its values
    (a few KiB), a Llama's shape in miniature."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(256, 256) for _ in range(4))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def test_a_model_whose_weights_pass_the_budget_streams_with_its_weights_in_segments(monkeypatch):
    """Values that fit the budget but weights that do not: the model streams, its segments and
    isolation batches cut by their weights with their values (each backend run loads about a
    layer's weights, not all of them), with the rows of the whole."""
    torch.manual_seed(0)
    module, args = _Tower().eval(), (torch.randn(1, 256, generator=torch.Generator().manual_seed(3)),)
    whole = harness.verify(module, args, optimize=False)
    layer_bytes = (256 * 256 + 256) * 4
    loaded = _counting_runner(monkeypatch, lambda model, values: fx_rows.initializer_bytes(model))
    monkeypatch.setattr(fx_rows, "CHUNK_BYTES", 2 * layer_bytes)  # all of the values, half of the weights
    monkeypatch.setattr(fx_rows, "FLOOR_BYTES", layer_bytes)
    streamed = harness.verify(module, args, optimize=False)

    assert "instrumented_segments" not in whole.environment
    assert streamed.environment["instrumented_segments"] >= 4
    assert max(loaded) <= 2 * layer_bytes < 4 * layer_bytes
    assert streamed.passed and whole.passed
    assert [_row(op) for op in streamed.ops] == [_row(op) for op in whole.ops]


@pytest.mark.parametrize("sizes, budget, fused, quantized, expected", [
    ({"a": 4, "b": 4, "c": 4, "d": 4}, 8, False, False, [["a", "b"], ["c", "d"]]),
    ({"a": 4, "b": 20, "c": 4, "d": 4}, 8, False, False, [["a"], ["b"], ["c", "d"]]),  # a large row alone
    ({"a": 4, "b": 4, "c": 4, "d": 4}, None, False, False, [["a", "b", "c", "d"]]),  # values held whole
    ({"a": 4, "b": 4, "c": 4, "d": 4}, 8, True, False, [["a", "b", "c", "d"]]),  # fused layers judged as regions
    ({"a": 4, "b": 4, "c": 4, "d": 4}, 8, False, True, [["a", "b", "c", "d"]]),  # quantized rows
])
def test_a_streamed_chunk_is_isolated_and_judged_in_batches_of_its_outputs(sizes, budget, fused, quantized,
                                                                            expected):
    groups = {fx: _group(fx, [], {0: f"{fx}_value"}) for fx in sizes}
    analysis = types.SimpleNamespace(groups=groups, runtime_fusions=["layer"] if fused else [])
    aten = "quantized_decomposed.quantize_per_tensor.default" if quantized else "aten.relu.default"
    records = {fx: types.SimpleNamespace(aten=aten if fx == "c" else "aten.relu.default") for fx in sizes}
    value_sizes = {f"{fx}_value": size for fx, size in sizes.items()}
    assert fx_rows._batches(list(sizes), records, analysis, value_sizes, budget) == expected


@pytest.mark.parametrize("view", [
    lambda a: a,  # contiguous
    lambda a: a.T,  # transposed
    lambda a: np.broadcast_to(a[:1], a.shape),  # expanded (stride 0), as a detector's gather indices are
    lambda a: a[:, ::2],  # strided
])
def test_a_spilled_view_reads_back_as_its_values_in_c_order(view):
    from harness.analysis.spilled import SpillFolder

    array = view(np.arange(512 * 1024, dtype=np.int64).reshape(1024, 512))
    spilled = SpillFolder().write(array)
    assert isinstance(spilled, np.memmap) and spilled.flags.c_contiguous
    np.testing.assert_array_equal(spilled, array)


@pytest.mark.parametrize("size, budget, counted", [
    (10, 100, 10),  # a small value counts its bytes
    (49, 100, 49),
    (50, 100, 100),  # half a segment or more ends its segment
    (300, 100, 100),
])
def test_a_value_of_half_a_segment_ends_its_segment(size, budget, counted):
    assert fx_rows._segment_share(size, budget) == counted


def test_rows_sharing_one_value_in_two_chunks_both_get_it():
    """Two rows whose values are one ONNX value (a view the export folded) each get the
    backend's value, though a row between them waits for a later segment and so splits them."""
    groups = {"a": _group("a", [], {0: "v"}), "c": _group("c", [], {0: "w"}), "b": _group("b", [], {0: "v"})}

    class _Segments:
        segment_of = {"v": 0, "w": 1}

        def values(self):
            yield 0, {"v": "value of v"}
            yield 1, {"w": "value of w"}

    chunks = list(fx_rows._segment_chunks(_Segments(), groups, {"v": 4, "w": 4}, budget=100))
    assert chunks == [(["a"], {"v": "value of v"}), (["c", "b"], {"w": "value of w", "v": "value of v"})]
