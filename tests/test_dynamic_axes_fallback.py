"""Declared dynamic axes that the model fixes to one size: exported static with a warning
naming the axis, the reason and the user's line, recorded in the model's metadata, and reported
by the harness as "declared dynamic, exported static" at the other size; strict_dynamic=True
keeps the refusal."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import exporter
from exporter.errors import ExportWarning
from exporter.contract.static_axes import static_axes_hit, static_axes_of
from harness.backend import prepare
from harness.cli.sources import Built
from harness.cli.worker import _verify


class Linspace(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ramp = torch.linspace(0, 1, x.shape[0])  # fixes the batch
        return x * ramp[:, None]


class Branch(torch.nn.Module):
    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == 3:  # fixes axis 1 only
            return x + z.sum()
        return x


class FixedView(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(6, -1)


def _export(model, args, axes, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onnx_model = exporter.export(model, args, dynamic_axes=axes, **options)
    return onnx_model, [str(w.message) for w in caught if issubclass(w.category, ExportWarning)]


def _dims(onnx_model) -> list[list]:
    return [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in onnx_model.graph.input]


CASES = [
    # model, args, dynamic_axes, the fixed (input, axis, size), the user's line it names
    (Linspace, (torch.randn(6, 3),), {"x": {0: "b"}}, ("x", 0, 6), "torch.linspace(0, 1, x.shape[0])"),
    (Branch, (torch.randn(6, 3), torch.randn(5)), {"x": {0: "b", 1: "c"}, "z": {0: "n"}}, ("x", 1, 3),
     "if x.shape[1] == 3"),
    (FixedView, (torch.randn(6, 3),), {"x": {0: "b"}}, ("x", 0, 6), "x.view(6, -1)"),
]


@pytest.mark.parametrize(("module", "args", "axes", "fixed", "line"), CASES, ids=[c[0].__name__ for c in CASES])
def test_a_fixed_axis_is_exported_static_with_a_warning(module, args, axes, fixed, line) -> None:
    model = module()
    onnx_model, messages = _export(model, args, axes)
    name, axis, size = fixed
    assert len(messages) == 1, messages
    assert f"{name!r} axis {axis}" in messages[0] and f"size {size}" in messages[0]
    assert "test_dynamic_axes_fallback.py" in messages[0] and line in messages[0]
    recorded = static_axes_of(onnx_model)
    assert [(e["input"], e["axis"], e["size"]) for e in recorded] == [fixed]
    index = [i.name for i in onnx_model.graph.input].index(name)
    assert _dims(onnx_model)[index][axis] == size
    actual = prepare(onnx_model, "CPU").run([a.numpy() for a in args])[0]
    np.testing.assert_allclose(actual, model(*args).numpy(), rtol=1e-6, atol=1e-6)


def test_the_export_result_lists_the_fixed_axes() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)
        result = exporter.export_program(FixedView(), (torch.randn(6, 3),), dynamic_axes={"x": {0: "b"}})
    assert [(a.input, a.axis, a.size) for a in result.static_axes] == [("x", 0, 6)]
    assert "x.view(6, -1)" in result.static_axes[0].source[-1]


def test_the_axes_the_model_does_not_fix_stay_dynamic() -> None:
    onnx_model, _ = _export(Branch(), (torch.randn(6, 3), torch.randn(5)), {"x": {0: "b", 1: "c"}, "z": {0: "n"}})
    assert _dims(onnx_model) == [["b", 3], ["n"]]


class Flatten18(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(18)  # holds only for a batch of 1


def test_an_example_of_size_one_keeps_its_axis_dynamic_unless_the_model_fixes_it() -> None:
    onnx_model, messages = _export(FixedView(), (torch.randn(1, 18),), {"x": {0: "b"}})
    assert not messages and _dims(onnx_model)[0] == ["b", 18]  # view(6, -1) holds for every b
    x = torch.randn(4, 18)
    np.testing.assert_allclose(prepare(onnx_model, "CPU").run([x.numpy()])[0], FixedView()(x).numpy())
    onnx_model, messages = _export(Flatten18(), (torch.randn(1, 18),), {"x": {0: "b"}})
    assert len(messages) == 1 and "the model's code requires size 1" in messages[0], messages
    assert static_axes_of(onnx_model)[0]["size"] == 1


@pytest.mark.parametrize(("module", "args", "axes"), [(c[0], c[1], c[2]) for c in CASES], ids=[c[0].__name__ for c in CASES])
def test_strict_dynamic_refuses(module, args, axes) -> None:
    with pytest.raises(exporter.ExportError, match="could not capture"):
        exporter.export(module(), args, dynamic_axes=axes, strict_dynamic=True)


def test_a_model_without_fixed_axes_records_none() -> None:
    onnx_model, messages = _export(torch.nn.Linear(3, 2), (torch.randn(4, 3),), {"input": {0: "b"}})
    assert not messages and static_axes_of(onnx_model) == [] and _dims(onnx_model) == [["b", 3]]
    assert static_axes_hit(onnx_model, [np.zeros((7, 3))]) == []


def test_the_other_size_reports_declared_dynamic_exported_static() -> None:
    """The worker's second size: a resized fixed axis is a note, not a failure."""
    model, args, axes = Linspace(), (torch.randn(6, 3),), {"x": {0: "b"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)
        exported = exporter.export(model, args, dynamic_axes=axes)
    from harness.exporters import ExportedForVerification

    built = Built(module=model, args=args, other_args=(torch.randn(9, 3),), options={"dynamic_axes": axes})
    given = ExportedForVerification(model=exported, program=None, exporter="roundtrip")
    verification, other = _verify(built, given, {"device": "cpu", "per_op": False}, "Linspace")
    assert other is None and verification.passed
    assert any(note.startswith("declared dynamic, exported static: 'x' axis 0") for note in verification.notes)
