"""The plugin's per-run state, kept in `config.stash`: settings, this process's role and device,
and (controller or single process) the report's cases."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.pytest_plugin.options import Settings
from harness.pytest_plugin.placement import Placement


def role_of(config: pytest.Config) -> str:
    """"worker" (an xdist worker), "controller" (xdist's controller, which runs no test) or
    "single" (no xdist)."""
    if hasattr(config, "workerinput"):
        return "worker"
    distributing = getattr(config.option, "dist", "no") != "no" and bool(getattr(config.option, "tx", None))
    return "controller" if distributing else "single"


def xdist_workers(config: pytest.Config) -> int:
    """Workers in this run: 0 without xdist."""
    if hasattr(config, "workerinput"):
        return int(config.workerinput.get("workercount", 1))
    if role_of(config) != "controller":
        return 0
    return sum(int(spec.split("*", 1)[0]) if "*" in spec else 1 for spec in config.option.tx)


@dataclass
class RunState:
    """What the plugin knows about this run."""

    settings: Settings
    role: str
    workers: int = 0
    worker_id: str | None = None
    device: str | None = None  # "cpu" | "cuda:k", resolved on first use (or at start-up for cuda)
    cuda_reason: str | None = None  # why CUDA is not used, once known
    placement: Placement | None = None
    placement_applied: dict[str, Any] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)  # the report's cases (controller / single)
    headlines: list[dict[str, Any]] = field(default_factory=list)  # one per case, for the terminal summary
    report_paths: dict[str, str] = field(default_factory=dict)
    report_error: str = ""


STATE = pytest.StashKey[RunState]()


def run_state(config: pytest.Config) -> RunState:
    """This run's state (set up by the plugin's pytest_configure)."""
    return config.stash[STATE]
