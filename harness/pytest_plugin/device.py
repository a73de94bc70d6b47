"""The run's device: checked at start-up when CUDA is asked for, resolved lazily otherwise, and
the `cuda` marker's skip.

`--roundtrip-device cuda` on a machine where torch or onnxruntime cannot use CUDA stops the run
at start-up with a usage error that gives the reason (that check imports both: the user asked
for CUDA). `auto` and `cpu` import nothing until a roundtrip fixture, marker or zoo test runs.
"""

from __future__ import annotations

import pytest

from harness.pytest_plugin.placement import apply, plan
from harness.pytest_plugin.state import RunState, run_state

CPU_ASKED = "the run verifies on the CPU (--roundtrip-device cpu); pass --roundtrip-device cuda or auto"


def cuda_reason() -> str | None:
    """Why torch or onnxruntime cannot use CUDA here, or None (harness.runtime's one check)."""
    from harness.runtime.devices import cuda_unavailable_reason

    return cuda_unavailable_reason()


def check_cuda_at_start(state: RunState) -> None:
    """For `--roundtrip-device cuda`: a usage error with the reason when CUDA is unusable; on a
    process that runs tests, place it on its GPU now (before any test allocates)."""
    if state.settings.device != "cuda":
        return
    reason = cuda_reason()
    if reason:
        raise pytest.UsageError(
            f"--roundtrip-device cuda: CUDA cannot be used here: {reason}. "
            "Run with --roundtrip-device cpu, or auto to fall back to the CPU."
        )
    if state.role != "controller":
        state.device = _gpu(state)


def _gpu(state: RunState) -> str:
    """This process's GPU ("cuda:k"), placed (and its memory capped) on first use."""
    if state.placement is None:
        import torch

        state.placement = plan(state.worker_id, state.workers, torch.cuda.device_count())
        state.placement_applied = apply(state.placement)
    return f"cuda:{state.placement.gpu}"


def session_device(state: RunState) -> str:
    """The device this process verifies on: "cpu" or "cuda:k" (its GPU)."""
    if state.device is None:
        reason = CPU_ASKED if state.settings.device == "cpu" else cuda_reason()
        state.device, state.cuda_reason = ("cpu", reason) if reason else (_gpu(state), None)
    return state.device


def device_for(state: RunState, asked: str | None) -> str:
    """The device for one test: the session's, or a marker's / call's `device` ("cpu", "cuda",
    "cuda:n", "auto"). A test pinned to CUDA skips, with the reason, where CUDA is unusable."""
    if asked is None or asked == "auto":
        return session_device(state)
    if asked == "cpu":
        return "cpu"
    if asked != "cuda" and not asked.startswith("cuda:"):
        raise ValueError(f"device={asked!r}; use 'cpu', 'cuda', 'cuda:<n>' or 'auto'")
    if not session_device(state).startswith("cuda"):
        reason = cuda_reason()
        if reason:
            pytest.skip(f"needs CUDA: {reason}")
    return _gpu(state) if asked == "cuda" else asked


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked `cuda`, with the reason, unless this run verifies on CUDA (the device is
    resolved only when such a test is collected)."""
    marked = [item for item in items if item.get_closest_marker("cuda") is not None]
    if not marked:
        return
    state = run_state(config)
    if session_device(state).startswith("cuda"):
        return
    skip = pytest.mark.skip(reason=f"needs CUDA: {state.cuda_reason}")
    for item in marked:
        item.add_marker(skip)
