"""pytest plugin: the `roundtrip` fixture and marker, the zoo as tests, per-test records, reports.

Loaded into every pytest run of an environment that has this package (entry point `roundtrip`;
`-p no:roundtrip` turns it off), so it stays out of the way until used: its options are
prefixed (`--roundtrip-device cpu|cuda|auto`, `--roundtrip-exporter`, `--roundtrip-opset`,
`--roundtrip-tier`, `--roundtrip-cases`, `--roundtrip-report-dir`, `--roundtrip-tolerances`,
`--roundtrip-dtype`;
each also an ini key, `roundtrip_device = cuda`), and torch and onnxruntime are imported only
when a roundtrip fixture, marker or zoo test runs, or when CUDA is asked for.

    options      the options and their resolution (command line > ini > default)
    placement    GPU per xdist worker and its memory caps (arithmetic, and `apply`)
    device       the CUDA check at start-up, the lazily resolved device, the `cuda` marker's skip
    fixtures     `roundtrip` (a fixtures.Roundtrip: verify, verify_onnx, record), `roundtrip_device`
    records      cases per test through report.user_properties; crashed workers; the report dir
    summary      the header and the end-of-run table of failing verifications

Plugin state lives in `config.stash` (harness.pytest_plugin.state).
"""

from __future__ import annotations

import pytest

# Plugin modules, each imported by pytest (so that it may rewrite their asserts) after those it
# imports; this module imports none of them at the top for the same reason.
pytest_plugins = [
    "harness.pytest_plugin.options",
    "harness.pytest_plugin.device",
    "harness.pytest_plugin.records",
    "harness.pytest_plugin.fixtures",
    "harness.pytest_plugin.summary",
]

MARKERS = (
    "roundtrip(atol=None, rtol=None, exporter=None, opset=None, device=None, tolerances=None, dtype=None, "
    "backend=None): "
    "this test's settings for the roundtrip fixture",
    "cuda: needs a CUDA GPU usable by torch and onnxruntime; skipped, with the reason, unless the run "
    "verifies on CUDA (--roundtrip-device cuda, or auto on a machine with a usable GPU)",
)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Resolve the settings, keep the run's state in config.stash, check CUDA when asked for."""
    from harness.pytest_plugin.device import check_cuda_at_start
    from harness.pytest_plugin.options import resolve, write_back
    from harness.pytest_plugin.records import Collector
    from harness.pytest_plugin.state import STATE, RunState, role_of, xdist_workers

    for line in MARKERS:
        config.addinivalue_line("markers", line)
    settings = resolve(config)
    write_back(config, settings)
    worker = getattr(config, "workerinput", {}).get("workerid")
    state = RunState(settings=settings, role=role_of(config), workers=xdist_workers(config), worker_id=worker)
    config.stash[STATE] = state
    check_cuda_at_start(state)
    if state.role != "worker":
        config.pluginmanager.register(Collector(config), "roundtrip-collector")
