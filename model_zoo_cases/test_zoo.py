"""The model zoo as a test suite, shipped with the package:

    pytest --pyargs model_zoo_cases.test_zoo --roundtrip-device cuda --roundtrip-tier full -n auto

One test per case and input size, on the run's device, exporter and opset (`--roundtrip-device`,
`--roundtrip-exporter`, `--roundtrip-opset`): `<case>-batch<traced>` exports the case's module
at its traced batch and verifies it per op; `<case>-batch<other>` verifies that ONNX model at
the case's other batch, every other dynamic axis about halved. The cases are those of
`--roundtrip-tier` (smoke: one small case per family; full: all) or `--roundtrip-cases`; with
`--roundtrip-dtype float16|bfloat16` each case casts itself (ModelCase.module and inputs: calibrated
in float32, then cast). Each case is judged by its own output tolerance; a failure prints the per-op table, and the run's
report (`--roundtrip-report-dir`) holds every case.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import pytest

import model_zoo_cases
from harness.pytest_plugin.state import run_state

SEED = 0
OTHER_SEED = 1


def selected_cases(config: pytest.Config) -> list[model_zoo_cases.ModelCase]:
    """The cases this run verifies: `--roundtrip-cases` (any tier) or `--roundtrip-tier`; a bad
    value fails the collection with what to pass instead."""
    settings = run_state(config).settings
    if settings.tier not in model_zoo_cases.TIERS:
        pytest.fail(f"--roundtrip-tier {settings.tier!r}: choose one of {', '.join(model_zoo_cases.TIERS)}",
                    pytrace=False)
    try:
        return model_zoo_cases.select(tier=None if settings.cases else settings.tier, pattern=settings.cases)
    except KeyError as error:
        pytest.fail(f"--roundtrip-cases {settings.cases!r}: {error.args[0]}", pytrace=False)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "zoo_case" not in metafunc.fixturenames:
        return
    exporter = run_state(metafunc.config).settings.exporter
    params = []
    for case in selected_cases(metafunc.config):
        for size, batch in (("traced", case.traced_batch), ("other", case.other_batch)):
            params.append(pytest.param(case, size, id=f"{case.name}-batch{batch}"))
    metafunc.parametrize(("zoo_case", "zoo_size"), params)


@contextlib.contextmanager
def expected_failure(case: model_zoo_cases.ModelCase, exporter: str) -> Iterator[None]:
    """Around a case's test: where `exporter` is torch.onnx and the case names a torch.onnx issue,
    the block must fail with the message the case expects (`torch_onnx_fails_with`), and the test
    is then an xfail; a pass, or any other failure, fails it. Elsewhere the block runs as it is."""
    if exporter != "torch.onnx" or not case.torch_onnx_issue:
        yield
        return
    with pytest.raises(Exception, match=case.torch_onnx_fails_with):
        yield
    pytest.xfail(f"torch.onnx: {case.torch_onnx_issue}")


def verify_options(case: model_zoo_cases.ModelCase, batch: int, dtype: Any = None) -> dict[str, Any]:
    """The keywords of `roundtrip.verify` for `case` at `batch` in `dtype`: its names, dynamic
    axes, output tolerance (ModelCase.output_tolerance), and how the report names it."""
    atol, rtol = case.output_tolerance(dtype)
    return {
        "dynamic_axes": {name: axes for name, axes in case.dynamic_axes.items() if name in case.input_names},
        "input_names": list(case.input_names), "atol": atol, "rtol": rtol,
        "allowed_mismatch": case.allowed_mismatch_fraction, "model_name": case.name,
        "name": f"{case.name} batch {batch}", "family": case.family, "sizes": [f"batch {batch}"],
        "origin": {"zoo": case.name, "tier": case.tier, "seed": SEED},
    }


@functools.lru_cache(maxsize=2)
def traced_export(case_name: str, exporter: str, opset: int | None, dtype: Any = None) -> Any:
    """The case's ONNX model exported at its traced batch in `dtype` (kept for its other-size
    test when both run on one process)."""
    from harness.exporters import export_for_verification

    case = model_zoo_cases.get(case_name)
    options = verify_options(case, case.traced_batch)
    return export_for_verification(exporter, case.module(SEED, dtype), case.inputs(SEED, dtype=dtype),
                                   opset_version=opset, dynamic_axes=options["dynamic_axes"],
                                   input_names=options["input_names"]).model


def case_dtype(settings: dict[str, Any]) -> Any:
    """The torch dtype the run's settings ask for (None: float32, as the cases are built)."""
    if settings["dtype"] is None:
        return None
    from harness.runtime.dtypes import parse_dtype

    return parse_dtype(settings["dtype"])


def test_zoo_case(zoo_case: model_zoo_cases.ModelCase, zoo_size: str, roundtrip: Any) -> None:
    settings = roundtrip.settings()
    dtype = case_dtype(settings)
    module = zoo_case.module(SEED, dtype)  # the case casts itself: no second copy in verify
    with expected_failure(zoo_case, settings["exporter"]):
        if zoo_size == "traced":
            roundtrip.verify(module, zoo_case.inputs(SEED, dtype=dtype), dtype=None,
                             **verify_options(zoo_case, zoo_case.traced_batch, dtype))
            return
        onnx_model = traced_export(zoo_case.name, settings["exporter"], settings["opset"], dtype)
        roundtrip.verify(module, zoo_case.other_inputs(OTHER_SEED, dtype), onnx_model=onnx_model, dtype=None,
                         **verify_options(zoo_case, zoo_case.other_batch, dtype))
