"""Runtime checks the ONNX model cannot carry are never dropped silently: each one is an
ExportWarning at conversion, an entry of the model's `roundtrip.dropped_checks` metadata and a
note of the verification (which the reports show), with the expression and the user's line."""

from __future__ import annotations

import warnings

import pytest
import torch

import exporter
from exporter.contract.keys import DROPPED_CHECKS_KEY
from exporter.contract.metadata import dropped_checks


class EvenBatch(torch.nn.Module):
    """Pairs up the batch: torch.export cannot prove `batch % 2 == 0` for every batch, so the
    capture retries with Dim.DYNAMIC, which lets that guard go."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.shape[0]
        torch._check(batch % 2 == 0)
        return x.reshape(batch // 2, 2, -1).sum(1)


class MaskedRows(torch.nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x[mask]


def _converted(model: torch.nn.Module, args: tuple, **options) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onnx_model = exporter.export(model, args, **options)
    return onnx_model, [str(w.message) for w in caught if issubclass(w.category, exporter.ExportWarning)]


def test_guards_let_go_by_the_dynamic_retry_are_listed_and_warned() -> None:
    model, warned = _converted(EvenBatch(), (torch.randn(4, 3),), dynamic_axes={"x": {0: "batch"}})
    checks = dropped_checks(model)
    assert "(x.shape[0] % 2) == 0" in [c["expression"] for c in checks], checks
    assert all("EvenBatch.forward at" in c["source"] and "test_dropped_checks.py" in c["source"] for c in checks)
    assert any(DROPPED_CHECKS_KEY in w and "(x.shape[0] % 2) == 0" in w for w in warned), warned


def test_assert_scalar_of_a_data_dependent_size_is_listed() -> None:
    args = (torch.randn(2, 3), torch.tensor([[True, False, True], [False, True, True]]))
    model, warned = _converted(MaskedRows(), args)
    checks = dropped_checks(model)
    assert checks and all(c["fx_node"].startswith("_assert_scalar") for c in checks), checks
    assert all(c["source"] for c in checks), checks
    assert warned and str(len(checks)) in warned[0]


def test_a_model_without_unproven_checks_has_none() -> None:
    model, warned = _converted(EvenBatch(), (torch.randn(4, 3),))  # static: every guard holds
    assert dropped_checks(model) == [] and not warned
    assert DROPPED_CHECKS_KEY not in {p.key for p in model.metadata_props}


@pytest.mark.slow
def test_the_verification_notes_each_dropped_check() -> None:
    import harness

    result = harness.verify(EvenBatch(), (torch.randn(4, 3),), dynamic_axes={"x": {0: "batch"}})
    notes = [n for n in result.notes if n.startswith("runtime check not in the ONNX model")]
    assert any("(x.shape[0] % 2) == 0" in n and "EvenBatch.forward at" in n for n in notes), result.notes
