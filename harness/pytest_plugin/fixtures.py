"""The fixtures users' tests ask for, and the `roundtrip` marker.

    def test_my_model(roundtrip):
        roundtrip.verify(MyModel().eval(), (torch.randn(2, 8),))

    @pytest.mark.roundtrip(atol=1e-3, opset=18)
    def test_onnx_file(roundtrip):
        roundtrip.verify_onnx("model.onnx", [x], expected=[y])

A verification runs on the session's device, exporter, opset, tolerance table and dtype,
overridden per test by `@pytest.mark.roundtrip(atol=, rtol=, exporter=, opset=, device=,
tolerances=, dtype=, backend=)` and per call by the same keywords (`backend="openvino:precision=f32"`
or a list of specs: the first decides, every one is judged against the same fp64 truth) (`dtype="float16"` verifies a cast copy
of the module; an ONNX file keeps its own dtype). Each one is recorded in the run's report; a
failing one raises harness.testing.RoundtripAssertionError with the per-op table and a
reproducer's folder.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from exporter.contract.fileio import safe_filename
from harness.pytest_plugin.device import device_for, session_device
from harness.pytest_plugin.options import DTYPES, backend_specs
from harness.pytest_plugin.records import record
from harness.pytest_plugin.state import RunState, run_state

SETTINGS = ("atol", "rtol", "exporter", "opset", "device", "tolerances", "dtype", "backend")
"""What the marker and each call may override."""
REPORT_FIELDS = ("name", "family", "origin", "sizes")
"""Call keywords that describe the report's case rather than the verification."""


def marker_settings(item: pytest.Item) -> dict[str, Any]:
    """The closest `@pytest.mark.roundtrip(...)`'s settings (keywords only; each one checked)."""
    marker = item.get_closest_marker("roundtrip")
    if marker is None:
        return {}
    if marker.args:
        raise TypeError(f"@pytest.mark.roundtrip takes keywords only ({', '.join(SETTINGS)}), got {marker.args!r}")
    unknown = sorted(set(marker.kwargs) - set(SETTINGS))
    if unknown:
        raise TypeError(f"@pytest.mark.roundtrip got unknown keyword(s) {unknown}; it takes {', '.join(SETTINGS)}")
    return dict(marker.kwargs)



class Roundtrip:
    """The `roundtrip` fixture: verify models (or ONNX files) the way the run is set up."""

    def __init__(self, item: pytest.Item, state: RunState, scratch: Callable[[], Path]) -> None:
        self._item = item
        self._state = state
        self._scratch = scratch
        try:
            self._marker = marker_settings(item)
        except TypeError as error:
            pytest.fail(str(error), pytrace=False)
        self._count = 0

    def settings(self, **overrides: Any) -> dict[str, Any]:
        """The settings a verification with `overrides` would use: the session's, then the
        marker's, then the call's. `device` is resolved ("cpu" or "cuda:k")."""
        session = self._state.settings
        merged: dict[str, Any] = {"atol": None, "rtol": None, "exporter": session.exporter,
                                  "opset": session.opset, "device": None, "tolerances": session.tolerances,
                                  "dtype": session.dtype, "ort_config": session.ort_config,
                                  "backend": session.backend}
        merged.update(self._marker)
        merged.update({k: v for k, v in overrides.items() if k in SETTINGS})
        if merged["backend"] is not None and merged["backend"] is not session.backend:
            try:
                merged["backend"] = backend_specs(merged["backend"], "roundtrip backend=")
            except pytest.UsageError as error:
                pytest.fail(str(error), pytrace=False)
        merged["device"] = device_for(self._state, merged["device"])
        if merged["dtype"] is not None and str(merged["dtype"]).removeprefix("torch.") not in DTYPES:
            pytest.fail(f"roundtrip dtype={merged['dtype']!r}: choose one of {', '.join(DTYPES)}", pytrace=False)
        return merged

    @property
    def device(self) -> str:
        """The device this test verifies on ("cpu" or "cuda:k")."""
        return self.settings()["device"]

    def verify(self, model: Any, args: Any, **options: Any) -> Any:
        """`harness.verify(model, args, ...)` with this run's settings; records the Verification
        and returns it, or raises RoundtripAssertionError (an AssertionError) with the per-op table.

        Keywords: atol/rtol (the outputs' tolerance), exporter, opset, device, tolerances (per-op
        table), dtype (float16 | bfloat16 | float32: verify a cast copy), name/family/origin/sizes
        (the report's case); the rest go to harness.verify
        (dynamic_axes, input_names, onnx_model, allowed_mismatch, per_op, tf32, model_name)."""
        __tracebackhide__ = True
        from harness.verification import verify

        settings, fields, rest = self._split(options)
        call = _verify_keywords(settings)
        call.update(exporter=settings["exporter"], opset_version=settings["opset"], dtype=settings["dtype"])
        if settings["backend"]:
            call["backends"] = settings["backend"]
        return self._check(lambda: verify(model, args, **call, **rest), fields)

    def verify_onnx(self, model_or_path: Any, inputs: Any, expected: Any = None, **options: Any) -> Any:
        """`harness.verify_onnx(model_or_path, inputs, expected, ...)` with this run's device,
        tolerances and the marker's; recorded and checked as `verify` is."""
        __tracebackhide__ = True
        from harness.onnx_verification import verify_onnx

        settings, fields, rest = self._split(options)
        call = _verify_keywords(settings)
        if settings["backend"]:
            call["backend"] = settings["backend"][0]
        return self._check(lambda: verify_onnx(model_or_path, inputs, expected, **call, **rest), fields)

    def record(self, verification: Any, *, seconds: float | None = None, reproducer: str | None = None,
               other: Any = None, **fields: Any) -> Any:
        """Record a Verification made elsewhere (harness.verify) in the run's report, unchecked.
        `other`: the same model verified at another input size."""
        from harness.report.document import case_from_verification
        from harness.report.failure import headline

        name = self._name(fields.pop("name", None))
        case = case_from_verification(verification, name=name, test=self._item.nodeid, seconds=seconds,
                                      reproducer=reproducer, other=other, **fields)
        record(self._item, case, headline(verification))
        return verification

    def _split(self, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        settings = self.settings(**options)
        fields = {k: options[k] for k in REPORT_FIELDS if options.get(k) is not None}
        rest = {k: v for k, v in options.items() if k not in SETTINGS and k not in REPORT_FIELDS}
        return settings, fields, rest

    def _name(self, given: str | None) -> str:
        self._count += 1
        if given:
            return given
        return self._item.nodeid if self._count == 1 else f"{self._item.nodeid} #{self._count}"

    def _check(self, run: Callable[[], Any], fields: dict[str, Any]) -> Any:
        __tracebackhide__ = True
        from harness.report.document import error_case
        from harness.testing import RoundtripAssertionError, assert_verified

        started = time.perf_counter()
        try:
            verification = run()
        except Exception as error:
            name = self._name(fields.get("name"))
            message = f"{type(error).__name__}: {error}".strip().splitlines()[0]
            record(self._item, error_case(name, error=message, test=self._item.nodeid,
                                          seconds=time.perf_counter() - started))
            raise
        seconds = time.perf_counter() - started
        try:
            assert_verified(verification, reproducer_dir=self._reproducer_dir())
        except RoundtripAssertionError as failure:
            self.record(verification, seconds=seconds, reproducer=failure.reproducer, **fields)
            raise
        return self.record(verification, seconds=seconds, **fields)

    def _reproducer_dir(self) -> Path:
        report_dir = self._state.settings.report_dir
        base = Path(report_dir, "reproducers") if report_dir else self._scratch()
        return base / safe_filename(self._item.nodeid, "test") / str(self._count + 1)


def _verify_keywords(settings: dict[str, Any]) -> dict[str, Any]:
    """harness.verify / verify_onnx keywords for the settings that were given."""
    call: dict[str, Any] = {"device": settings["device"], "tolerances": settings["tolerances"]}
    if settings["atol"] is not None:
        call["output_atol"] = settings["atol"]
    if settings["rtol"] is not None:
        call["output_rtol"] = settings["rtol"]
    if settings.get("ort_config"):
        call["session_options"] = settings["ort_config"]
    return call


@pytest.fixture
def roundtrip(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Roundtrip:
    """Verify models on this run's device, exporter, opset and tolerances (see Roundtrip)."""
    return Roundtrip(request.node, run_state(request.config),
                     lambda: tmp_path_factory.getbasetemp() / "roundtrip-reproducers")


@pytest.fixture(scope="session")
def roundtrip_device(request: pytest.FixtureRequest) -> str:
    """The device this run verifies on: "cpu" or "cuda:k" (this process's GPU)."""
    return session_device(run_state(request.config))
