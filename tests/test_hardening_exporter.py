"""Every bad input to the exporter gets a clear error, and what torch.export hands over (effect
tokens, control flow, bfloat16/float8, outputs that alias, mutated state, recurrent layers in
several threads) is exported correctly or refused all at once, naming the user's line."""

from __future__ import annotations

import inspect
import threading
import warnings

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx.reference import ReferenceEvaluator

import exporter
from exporter.capturing.hooks import CAPTURE_HOOKS


def _line_of(function, text: str) -> str:
    """`test_hardening_exporter.py:<line>` of the line of `function` holding `text`."""
    lines, first = inspect.getsourcelines(function)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"test_hardening_exporter.py:{first + offset}"


def _run(model: onnx.ModelProto, *inputs: torch.Tensor) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {name: t.numpy() for name, t in zip(names, inputs)})


# --- capture-level constructs: one UnsupportedOperatorError, scope and source per node --------


class Inverse(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.inv(x) + 1


class Branch(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t - 1, (x,))


class Outer(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


CONSTRUCTS = [
    pytest.param(Inverse, {"aten.linalg_inv_ex.default": "no symbolic function",
                           "torch.ops.higher_order.with_effects": "effect token"}, "torch.linalg.inv", id="effect token"),
    pytest.param(Branch, {"torch.ops.higher_order.cond": "higher-order operator cond"}, "torch.cond", id="torch.cond"),
]


@pytest.mark.parametrize("inner, reasons, code", CONSTRUCTS)
def test_capture_constructs_are_reported_together_with_scope_and_source(inner, reasons, code):
    with pytest.raises(exporter.UnsupportedOperatorError) as raised:
        exporter.export(Outer(inner()), (torch.randn(3, 3) + 3 * torch.eye(3),))
    error = raised.value
    assert {op.target: op.reason for op in error.operators}.keys() == reasons.keys()
    where = _line_of(inner.forward, code)
    for op in error.operators:
        assert reasons[op.target] in op.reason, op
        assert op.scope == f"Outer/{inner.__name__}[inner]", op
        assert op.source.endswith(where), op
        assert op.target in str(error) and where in str(error)


def test_effect_token_alone_is_still_refused_with_what_to_do():
    """With a symbolic for the op itself, the effect token is the one thing left to report."""
    def inverse(g, x, *, check_errors=False):
        return g.op("Identity", x), g.op("Constant", value_t=torch.zeros((), dtype=torch.int32))

    with pytest.raises(exporter.UnsupportedOperatorError) as raised:
        exporter.export(Inverse(), (torch.eye(3),), custom_symbolics={"aten.linalg_inv_ex.default": inverse})
    (op,) = raised.value.operators
    assert op.target == "torch.ops.higher_order.with_effects"
    assert "aten._linalg_check_errors.default" in op.reason and "inv_ex" in str(raised.value)


# --- bfloat16 and float8 -------------------------------------------------------------------------


def test_bfloat16_model_exports_with_its_weights_bit_exact():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(torch.bfloat16).eval()
    x = torch.randn(2, 4).to(torch.bfloat16)
    onnx_model = exporter.export(model, (x,))
    onnx.checker.check_model(onnx_model, full_check=True)
    weights = {t.name: t for t in onnx_model.graph.initializer}
    assert {t.data_type for t in weights.values()} == {onnx.TensorProto.BFLOAT16}
    stored = onnx.numpy_helper.to_array(weights["weight"]).view(np.int16)
    assert np.array_equal(stored, model.weight.detach().view(torch.int16).numpy())
    # onnxruntime's CPU provider has no bfloat16 Gemm; onnx's reference evaluator runs it
    (actual,) = ReferenceEvaluator(onnx_model).run(None, {"input": x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)})
    with torch.no_grad():
        expected = model(x).float().numpy()
    np.testing.assert_allclose(actual.astype(np.float32), expected, atol=2e-2, rtol=2e-2)


class ToFloat8(torch.nn.Module):
    def forward(self, x):
        return x.to(torch.float8_e4m3fn).to(torch.float32)


def test_float8_exports_from_opset_19_and_is_refused_before_with_the_opset_needed():
    x = torch.randn(2, 4) * 3
    with pytest.raises(exporter.ExportError, match=r"float8_e4m3fn .*opset 19 on \(exporting at 18\); pass opset_version=19"):
        exporter.export(ToFloat8(), (x,), opset_version=18)
    model = exporter.export(ToFloat8(), (x,), opset_version=19)
    onnx.checker.check_model(model, full_check=True)
    (actual,) = _run(model, x)
    np.testing.assert_array_equal(actual, ToFloat8()(x).numpy())


def test_packed_float4_is_refused_with_the_reason():
    class Packed(torch.nn.Module):
        def forward(self, x):
            return x.view(torch.float4_e2m1fn_x2)

    with pytest.raises(exporter.ExportError, match="packs two float4 values per byte"):
        exporter.export(Packed(), (torch.zeros(4, dtype=torch.uint8),))


# --- outputs that alias inputs, weights or each other --------------------------------------------


class WithState(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.full((3,), 2.0))
        self.weight = torch.nn.Parameter(torch.ones(3))


def _twice(y):
    return y, y


def _named(y):
    return {"a": y, "b": y}


OUTPUT_FORMS = [
    ("an input unchanged", lambda self, x: x),
    ("the same value twice", lambda self, x: _twice(x + 1)),
    ("one value under two names", lambda self, x: _named(x * 2)),
    ("an input twice around a result", lambda self, x: (x, x - 1, x)),
    ("a buffer and a parameter", lambda self, x: (self.scale, self.weight, x * self.scale)),
]


@pytest.mark.parametrize("forward", [f for _, f in OUTPUT_FORMS], ids=[name for name, _ in OUTPUT_FORMS])
def test_outputs_that_alias_get_identity_nodes_and_a_valid_model(forward):
    module = WithState().eval()
    module.forward = forward.__get__(module)
    x = torch.randn(3)
    model = exporter.export(module, (x,))
    onnx.checker.check_model(model, full_check=True)  # SSA: every output a distinct node output
    names = [o.name for o in model.graph.output]
    produced = {out for node in model.graph.node for out in node.output}
    assert len(set(names)) == len(names) and set(names) <= produced
    with torch.no_grad():
        expected = [t.detach() for t in torch.utils._pytree.tree_leaves(module(x))]
    actual = _run(model, x)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        np.testing.assert_array_equal(got, want.numpy())


def test_output_names_for_aliased_outputs_are_used():
    module = WithState().eval()
    module.forward = (lambda self, x: _twice(x + 1)).__get__(module)
    model = exporter.export(module, (torch.randn(3),), output_names=["first", "second"])
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == ["first", "second"]


# --- names and dynamic axes: checked before capture ------------------------------------------------


class TwoInputs(torch.nn.Module):
    def forward(self, x, y):
        return x + y, x * y


BAD_NAMES = [
    ("duplicate input names", dict(input_names=["a", "a"]), r"input_names repeats \['a'\]"),
    ("duplicate output names", dict(output_names=["p", "p"]), r"output_names repeats \['p'\]"),
    ("an input named like an output", dict(input_names=["a", "b"], output_names=["b", "c"]),
     r"output_names \['b'\] are also the names of inputs \(\['a', 'b'\]\)"),
    ("an output named like a default input", dict(output_names=["x", "z"]), r"output_names \['x'\] are also the names of inputs"),
    ("more input names than inputs", dict(input_names=["a", "b", "c"]), "input_names has 3 names but the model takes 2"),
    ("a name that is not a string", dict(input_names=["a", 3]), "must hold non-empty strings"),
    ("names given as one string", dict(output_names="out"), "must be a list of names"),
    ("an axis beyond the rank", dict(dynamic_axes={"x": {2: "batch"}}),
     r"dynamic_axes\['x'\] marks axis 2, but 'x' has 2 dimension\(s\) \(shape \(4, 3\)\); its axes are 0..1"),
    ("a negative axis beyond the rank", dict(dynamic_axes={"y": [-3]}), r"marks axis -3, but 'y' has 2 dimension"),
    ("one axis marked twice", dict(dynamic_axes={"x": {0: "a", -2: "b"}}), "marks axis 0 twice"),
    ("an unknown name", dict(dynamic_axes={"z": {0: "batch"}}), r"dynamic_axes names \['z'\]"),
]


@pytest.mark.parametrize("options, message", [b[1:] for b in BAD_NAMES], ids=[b[0] for b in BAD_NAMES])
def test_bad_names_are_refused_before_capture(options, message, monkeypatch):
    def no_capture(*args, **kwargs):
        raise AssertionError("torch.export ran: the names should have been refused first")

    monkeypatch.setattr(torch.export, "export", no_capture)
    with pytest.raises(exporter.ExportError, match=message):
        exporter.export(TwoInputs(), (torch.randn(4, 3), torch.randn(4, 3)), **options)


def test_too_many_output_names_are_refused_after_capture_before_conversion():
    with pytest.raises(exporter.ExportError, match=r"output_names has 3 names but the model returns 2 output"):
        exporter.capture(TwoInputs(), (torch.randn(4, 3), torch.randn(4, 3)), output_names=["p", "q", "r"])


def test_dynamic_axes_on_a_non_tensor_input_is_refused():
    class Scaled(torch.nn.Module):
        def forward(self, x, factor):
            return x * factor

    with pytest.raises(exporter.ExportError, match="marks axes of input 'factor', which is a int, not a tensor"):
        exporter.export(Scaled(), (torch.randn(2), 3), dynamic_axes={"factor": [0]})


class UnprovableGuard(torch.nn.Module):
    """(3b - 1) // b is 2 for every batch b >= 1, but torch cannot prove it symbolically (RAFT
    computes such a size)."""

    def forward(self, x):
        batch = x.shape[0]
        return x.reshape(batch, (3 * batch - 1) // batch, -1).sum(1)


class FixedBatch(torch.nn.Module):
    def forward(self, x):
        return x.reshape(2, -1)  # the batch really is fixed at 2


def test_a_guard_torch_cannot_prove_keeps_the_axis_dynamic(capfd):
    model = exporter.export(UnprovableGuard(), (torch.randn(2, 4, 3),), input_names=["x"],
                            dynamic_axes={"x": {0: "batch"}})
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 2, 5):
        x = torch.randn(batch, 4, 3)
        (got,) = session.run(None, {"x": x.numpy()})
        np.testing.assert_allclose(got, UnprovableGuard()(x).numpy(), rtol=1e-6, atol=1e-6)
    assert "Constraints violated" not in capfd.readouterr().err  # the first attempt's noise is not shown


def test_an_axis_the_model_fixes_is_still_refused_with_strict_dynamic():
    """Without strict_dynamic the axis is exported static with a warning (test_dynamic_axes_fallback.py)."""
    with pytest.raises(exporter.ExportError, match="torch.export could not capture FixedBatch"):
        exporter.export(FixedBatch(), (torch.randn(2, 4),), input_names=["x"], dynamic_axes={"x": {0: "batch"}},
                        strict_dynamic=True)


def test_fewer_output_names_name_the_first_outputs():
    model = exporter.export(TwoInputs(), (torch.randn(4, 3), torch.randn(4, 3)), output_names=["total"])
    assert [o.name for o in model.graph.output] == ["total", "mul"]


# --- a failed capture keeps the user's line and stderr clean --------------------------------------


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_capture_error_names_the_user_line_and_keeps_stderr_clean(capfd):
    with pytest.raises(exporter.ExportError) as raised:
        exporter.export(DataDependent(), (torch.randn(3),))
    message = str(raised.value)
    assert _line_of(DataDependent.forward, "if x.sum() > 0") in message and "if x.sum() > 0:" in message
    assert message.startswith("torch.export could not capture DataDependent: GuardOnDataDependentSymNode")
    assert "What to do:" in message
    err = capfd.readouterr().err
    assert "def forward" not in err and "Unable to find user code" not in err, err


# --- buffer and input mutation --------------------------------------------------------------------


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(1)
        return x * 2


class InPlace(torch.nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


@pytest.mark.parametrize("module, named", [(Counter, "buffer 'count'"), (InPlace, "input 'x'")])
def test_mutation_warns_once_and_the_model_keeps_the_user_outputs(module, named):
    from exporter.errors import ExportWarning

    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = exporter.capture(module(), (x.clone(),))
        models = [exporter.convert(program, opset_version=opset) for opset in (17, 18)]
    mutation_warnings = [w for w in caught if issubclass(w.category, ExportWarning)]
    assert len(mutation_warnings) == 1 and named in str(mutation_warnings[0].message)
    for model in models:
        assert len(model.graph.output) == 1
        np.testing.assert_allclose(_run(model, x)[0], module()(x.clone()).numpy(), rtol=1e-6)


# --- the RNN capture hook -------------------------------------------------------------------------


RNN_OPS = [torch.ops.aten.lstm.input, torch.ops.aten.gru.input, torch.ops.aten.rnn_tanh.input, torch.ops.aten.rnn_relu.input]


def _torch_rnn_state():
    import torch._decomp as decomp

    return [(dict(op.py_kernels), op in decomp.decomposition_table, decomp.decomposition_table.get(op)) for op in RNN_OPS]


@pytest.fixture
def spy_hook():
    """A capture hook entered after the RNN hook: records torch's RNN state during each capture."""
    seen = []

    def spy(model, keep):
        from contextlib import nullcontext

        seen.append(_torch_rnn_state())
        return nullcontext()

    CAPTURE_HOOKS.append(spy)
    try:
        yield seen
    finally:
        CAPTURE_HOOKS.remove(spy)


def test_rnn_hook_leaves_torch_alone_for_a_model_without_a_recurrent_layer(spy_hook):
    before = _torch_rnn_state()
    exporter.export(torch.nn.Linear(3, 2).eval(), (torch.randn(2, 3),))
    assert spy_hook == [before]  # untouched during the capture itself
    exporter.export(torch.nn.LSTM(3, 4).eval(), (torch.randn(5, 2, 3),))
    assert spy_hook[1] != before  # patched while an RNN model is captured
    assert _torch_rnn_state() == before


class FailsAfterRnn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.GRU(3, 4)

    def forward(self, x):
        y, _ = self.rnn(x)
        if y.sum() > 0:  # data-dependent: the capture fails after the patched kernels ran
            return y
        return -y


def test_rnn_hook_restores_torch_when_the_capture_fails():
    before = _torch_rnn_state()
    with pytest.raises(exporter.ExportError):
        exporter.export(FailsAfterRnn().eval(), (torch.randn(5, 2, 3),))
    assert _torch_rnn_state() == before


def test_exports_from_two_threads_are_correct_and_leave_torch_intact():
    before = _torch_rnn_state()
    torch.manual_seed(0)
    models = {"lstm": torch.nn.LSTM(3, 4, num_layers=2).eval(), "gru": torch.nn.GRU(3, 4).eval(),
              "linear": torch.nn.Linear(3, 4).eval()}
    inputs = {"lstm": torch.randn(5, 2, 3), "gru": torch.randn(6, 3, 3), "linear": torch.randn(2, 3)}
    axes = {"lstm": {"input": {0: "seq", 1: "batch"}}, "gru": {"input": {0: "seq"}}, "linear": None}
    results, errors = {}, []
    start = threading.Barrier(len(models))

    def work(name):
        try:
            start.wait()
            for _ in range(2):
                results[name] = exporter.export(models[name], (inputs[name],), dynamic_axes=axes[name])
        except Exception as error:  # reported below, with the thread's name
            errors.append((name, error))

    threads = [threading.Thread(target=work, args=(name,)) for name in models]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert _torch_rnn_state() == before
    for name, model in results.items():
        onnx.checker.check_model(model, full_check=True)
        with torch.no_grad():
            expected = torch.utils._pytree.tree_leaves(models[name](inputs[name]))
        for got, want in zip(_run(model, inputs[name]), expected):
            np.testing.assert_allclose(got, want.numpy(), atol=1e-5)
    # the dynamic sequence length survived: the LSTM runs at another length
    longer = torch.randn(9, 2, 3)
    with torch.no_grad():
        np.testing.assert_allclose(_run(results["lstm"], longer)[0], models["lstm"](longer)[0].numpy(), atol=1e-5)


# --- keyword arguments ----------------------------------------------------------------------------


class Keywords(torch.nn.Module):
    def forward(self, x, y=None, *, z):
        return x * y + z


def test_export_takes_keyword_arguments_and_their_dynamic_axes():
    x, y, z = torch.randn(4, 3), torch.randn(4, 3), torch.randn(3)
    model = exporter.export(Keywords(), (x,), kwargs={"z": z, "y": y},
                            dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    shapes = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    assert shapes == {"x": ["batch", 3], "z": [3], "y": ["batch", 3]}
    bigger = (torch.randn(7, 3), torch.randn(3), torch.randn(7, 3))
    np.testing.assert_allclose(_run(model, *bigger)[0], Keywords()(bigger[0], bigger[2], z=bigger[1]).numpy(), rtol=1e-6)


def test_atomic_writes_give_new_files_the_usual_permissions_and_keep_existing_ones(tmp_path):
    import os
    import stat

    from exporter.contract.fileio import write_text_atomic

    fresh = tmp_path / "fresh.json"
    write_text_atomic(fresh, "{}")
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask
    kept = tmp_path / "kept.json"
    kept.write_text("old")
    kept.chmod(0o640)
    write_text_atomic(kept, "new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text() == "new"
