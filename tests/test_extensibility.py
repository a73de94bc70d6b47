"""Users extend and override the exporter: `register_symbolic`, `custom_symbolics=`, custom ops
in their own ONNX domain, and one report naming every operator that cannot be exported.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator

import numpy as np
import onnx
import pytest
import torch

import exporter
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import BUILTINS, USER
from harness.backend import prepare

DOMAIN = "roundtrip_test"


@torch.library.custom_op(f"{DOMAIN}::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    """A user's op: torch runs it, the exporter knows it only through a user symbolic."""
    return x * factor


@scale.register_fake
def _scale_fake(x: torch.Tensor, factor: float) -> torch.Tensor:
    return torch.empty_like(x)


SCALE_TARGET = f"{DOMAIN}.scale.default"


def scale_symbolic(g: Graph, x: Value, factor: float) -> Value:
    return g.op(f"{DOMAIN}::Scale", x, factor_f=factor)


@pytest.fixture(autouse=True)
def _cumsum_without_a_builtin(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests need an ATen op with no built-in symbolic; cumsum has one now, so it is
    hidden from the built-in registry for the duration of each test."""
    entries = dict(BUILTINS._entries)
    entries.pop("aten.cumsum.default", None)
    monkeypatch.setattr(BUILTINS, "_entries", entries)


class Relu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


class Encoder(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.roundtrip_test.scale(x, 2.0)
        return torch.cumsum(y, 0)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x) + 1


@pytest.fixture
def register() -> Iterator[Callable[..., None]]:
    """`exporter.register_symbolic`, undone after the test so no registration leaks."""
    targets: list[object] = []

    def register_symbolic(target: object, fn: Callable[..., object], **options: object) -> None:
        exporter.register_symbolic(target, fn, **options)
        targets.append(target)

    yield register_symbolic
    for target in targets:
        exporter.unregister_symbolic(target)
    assert not USER.targets()


def _op_types(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def _run(model: onnx.ModelProto, x: torch.Tensor) -> np.ndarray:
    return prepare(model, "CPU").run([x])[0]


X = torch.linspace(-2, 2, 9)


def leaky_relu_half(g: Graph, x: Value) -> Value:
    return g.op("LeakyRelu", x, alpha_f=0.5)


def absolute(g: Graph, x: Value) -> Value:
    return g.op("Abs", x)


# -- overriding built-ins ------------------------------------------------------------------------


def test_register_symbolic_overrides_a_builtin(register) -> None:
    register("aten::relu", leaky_relu_half)
    model = exporter.export(Relu(), (X,))
    assert "LeakyRelu" in _op_types(model) and "Relu" not in _op_types(model)
    np.testing.assert_allclose(_run(model, X), torch.nn.functional.leaky_relu(X, 0.5).numpy())


@pytest.mark.parametrize("spelling", ["aten::relu", "aten.relu.default", torch.ops.aten.relu.default, torch.ops.aten.relu])
def test_every_spelling_of_a_target_overrides(register, spelling) -> None:
    register(spelling, leaky_relu_half)
    assert "LeakyRelu" in _op_types(exporter.export(Relu(), (X,)))


def test_custom_symbolics_win_over_user_registrations(register) -> None:
    register("aten::relu", leaky_relu_half)
    model = exporter.export(Relu(), (X,), custom_symbolics={"aten::relu": absolute})
    assert _op_types(model) == ["Abs"]
    np.testing.assert_allclose(_run(model, X), X.abs().numpy())


def test_custom_symbolics_last_for_one_call() -> None:
    exporter.export(Relu(), (X,), custom_symbolics={"aten::relu": absolute})
    assert _op_types(exporter.export(Relu(), (X,))) == ["Relu"]


def test_unregister_restores_the_builtin(register) -> None:
    register("aten::relu", leaky_relu_half)
    exporter.unregister_symbolic("aten::relu")
    assert _op_types(exporter.export(Relu(), (X,))) == ["Relu"]
    assert "aten.relu.default" in BUILTINS


def test_user_symbolic_for_a_newer_opset_is_used_from_that_opset_on(register) -> None:
    register("aten::relu", leaky_relu_half, opset=20)
    assert "Relu" in _op_types(exporter.export(Relu(), (X,), opset_version=19))
    assert "LeakyRelu" in _op_types(exporter.export(Relu(), (X,), opset_version=20))


# -- adding operators --------------------------------------------------------------------------


def cumsum_symbolic(g: Graph, x: Value, dim: int, *, dtype=None) -> Value:
    return g.op("CumSum", x, g.constant(dim, torch.int64))


class CumSum(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, 0)


def test_register_symbolic_adds_an_aten_operator(register) -> None:
    assert "aten.cumsum.default" not in BUILTINS
    register("aten::cumsum", cumsum_symbolic)
    model = exporter.export(CumSum(), (X,))
    np.testing.assert_allclose(_run(model, X), torch.cumsum(X, 0).numpy(), rtol=1e-6)


def test_custom_op_exports_into_its_own_domain(register) -> None:
    register(torch.ops.roundtrip_test.scale.default, scale_symbolic)
    register("aten::cumsum", cumsum_symbolic)
    model = exporter.export(Model(), (X,))
    custom = [n for n in model.graph.node if n.domain == DOMAIN]
    assert [(n.op_type, n.attribute[0].name, n.attribute[0].f) for n in custom] == [("Scale", "factor", 2.0)]
    assert {o.domain: o.version for o in model.opset_import} == {"": exporter.DEFAULT_OPSET, DOMAIN: 1}
    provenance = {p.key: p.value for p in custom[0].metadata_props}
    assert provenance["roundtrip.aten"] == SCALE_TARGET
    onnx.checker.check_model(model, full_check=True)  # ops of unknown domains are not checked
    with pytest.raises(RuntimeError, match=f"{DOMAIN}::Scale .*cannot run: onnxruntime has no kernel"):
        prepare(model, "CPU")  # ... and onnxruntime has no kernel for them


def test_custom_domain_version_comes_from_the_graph() -> None:
    def versioned(g: Graph, x: Value, factor: float) -> Value:
        g.custom_domains[DOMAIN] = 3
        return scale_symbolic(g, x, factor)

    class Scale(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.roundtrip_test.scale(x, 0.5)

    model = exporter.export(Scale(), (X,), custom_symbolics={SCALE_TARGET: versioned})
    assert {o.domain: o.version for o in model.opset_import}[DOMAIN] == 3


# -- what cannot be exported is reported together ------------------------------------------------


def _line_of(function: Callable[..., object], text: str) -> int:
    lines, start = inspect.getsourcelines(function)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_unsupported_operators_are_reported_together() -> None:
    with pytest.raises(exporter.UnsupportedOperatorError) as raised:
        exporter.export(Model(), (X,))
    error = raised.value
    found = {op.target: op for op in error.operators}
    assert set(found) == {SCALE_TARGET, "aten.cumsum.default"}
    lines = {SCALE_TARGET: _line_of(Encoder.forward, "scale("), "aten.cumsum.default": _line_of(Encoder.forward, "cumsum(")}
    for target, op in found.items():
        assert op.scope == "Model/Encoder[encoder]"
        assert op.source.endswith(f"test_extensibility.py:{lines[target]}"), op.source
        assert f"exporter.register_symbolic({target!r}, fn)" in str(error)
        assert f"{op.scope}, {op.source}" in str(error)
    assert str(error).startswith("2 node(s) use 2 operator(s)")


def test_unsupported_at_this_opset_names_the_opset_needed(register) -> None:
    register("aten::cumsum", cumsum_symbolic, opset=20)
    with pytest.raises(exporter.UnsupportedOperatorError, match="needs opset >= 20"):
        exporter.export(CumSum(), (X,), opset_version=18)
