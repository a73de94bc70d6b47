"""pytest plugin: `--device cpu|cuda|auto`, zoo tier selection, and merged verification records.

Tests ask for the `roundtrip_device` fixture ("cpu" or "cuda"). With `--device cuda` on a
machine where torch or onnxruntime cannot use CUDA, the run stops at start-up with a usage
error that says why. Tests marked `cuda` skip, with the reason, unless the device is CUDA.
Verification records given to the `roundtrip_records` fixture travel from xdist workers to the
controller (`config.workeroutput`), which alone writes `--roundtrip-report`.
"""

from __future__ import annotations

import json
import os
import platform
from typing import Any

import pytest

DEVICE_CHOICES = ("cpu", "cuda", "auto")
TIER_CHOICES = ("smoke", "full")
_RECORDS_KEY = "roundtrip_records"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("roundtrip", "roundtrip round-trip verification")
    group.addoption(
        "--device", action="store", dest="roundtrip_device", default="cpu", choices=DEVICE_CHOICES,
        help="device to verify on: cpu (default), cuda (fails at start-up if unusable), "
             "auto (cuda when torch and onnxruntime can use it, else cpu)",
    )
    group.addoption(
        "--zoo-tier", action="store", dest="roundtrip_tier",
        default=os.environ.get("ROUNDTRIP_TIER", "smoke"), choices=TIER_CHOICES,
        help="model zoo tier to run: smoke (one small case per family, default) or full (every case)",
    )
    group.addoption(
        "--zoo-cases", action="store", dest="roundtrip_cases", default=None, metavar="PATTERN",
        help="only zoo cases whose name matches this fnmatch pattern or comma-separated list",
    )
    group.addoption(
        "--roundtrip-report", action="store", dest="roundtrip_report", default=None, metavar="PATH",
        help="write the verification records the tests produced to PATH as JSON (controller only)",
    )


def resolve_device(requested: str) -> tuple[str, str | None]:
    """(device, reason CUDA is unusable or None) for a --device value."""
    from harness.runtime.devices import cuda_unavailable_reason

    if requested == "cpu":
        return "cpu", cuda_unavailable_reason() or "the run was asked for --device cpu"
    reason = cuda_unavailable_reason()
    if requested == "cuda" and reason:
        raise pytest.UsageError(f"--device cuda: CUDA cannot be used here: {reason}")
    return ("cpu", reason) if reason else ("cuda", None)


def pytest_configure(config: pytest.Config) -> None:
    device, cuda_reason = resolve_device(config.getoption("roundtrip_device"))
    config._roundtrip_device = device  # type: ignore[attr-defined]
    config._roundtrip_cuda_reason = cuda_reason  # type: ignore[attr-defined]
    config._roundtrip_records = []  # type: ignore[attr-defined]
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU usable by torch and onnxruntime")


def pytest_report_header(config: pytest.Config) -> list[str]:
    import onnx
    import onnxruntime
    import torch

    return [
        f"roundtrip: device={config._roundtrip_device} (asked {config.getoption('roundtrip_device')}), "
        f"zoo tier={config.getoption('roundtrip_tier')}, cases={config.getoption('roundtrip_cases') or 'all'}",
        f"roundtrip: torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__} "
        f"providers={onnxruntime.get_available_providers()}, python {platform.python_version()}",
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config._roundtrip_device == "cuda":
        return
    skip = pytest.mark.skip(reason=f"needs CUDA: {config._roundtrip_cuda_reason}")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def roundtrip_device(request: pytest.FixtureRequest) -> str:
    """The device this run verifies on: "cpu" or "cuda"."""
    return request.config._roundtrip_device


@pytest.fixture(scope="session")
def roundtrip_zoo_selection(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    return request.config.getoption("roundtrip_tier"), request.config.getoption("roundtrip_cases")


@pytest.fixture
def roundtrip_records(request: pytest.FixtureRequest):
    """Call with a Verification (or a dict) to include it in the run's merged report."""
    def add(record: Any) -> None:
        data = record.to_dict() if hasattr(record, "to_dict") else dict(record)
        data.setdefault("test", request.node.nodeid)
        request.config._roundtrip_records.append(data)

    return add


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: hand records to the controller
        config.workeroutput[_RECORDS_KEY] = json.dumps(config._roundtrip_records)
        return
    path = config.getoption("roundtrip_report")
    if path:
        from exporter.fileio import write_text_atomic

        records = sorted(config._roundtrip_records, key=lambda r: r.get("test", ""))
        write_text_atomic(path, json.dumps({"schema_version": 1, "records": records}, indent=1))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: merge the records a worker collected."""
    payload = getattr(node, "workeroutput", {}).get(_RECORDS_KEY)
    if payload:
        node.config._roundtrip_records.extend(json.loads(payload))
