"""The nightly workflow's own commands, on two small cases: shards, then merge, then diff.

The `run:` scripts are read from .github/workflows/nightly.yml and run with bash as the runner
would (its matrix values as environment variables, artifacts laid out as download-artifact
lays them), with the selection narrowed to two small zoo cases, per-op analysis on.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import model_zoo_cases
from harness.report.files import dumps, load_report

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"
CASES = "superresolution,dcgan_discriminator"
SHARDS = 2


def _steps() -> dict[str, str]:
    """{step id: its run script} over every job of the workflow."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    return {step["id"]: step["run"] for job in workflow["jobs"].values() for step in job["steps"]
            if "id" in step and "run" in step}


def _bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PATH": path, "SHARDS": str(SHARDS), "SELECT": f"--cases {CASES}", **env})


def _matrix(*, shards: int, gpu: str) -> list[dict]:
    """The shards the plan step schedules, with SHARDS and the GPU-runners variable as given."""
    result = subprocess.run(["bash", "-e", "-c", _steps()["plan"].replace('"$GITHUB_OUTPUT"', "/dev/stdout")],
                            capture_output=True, text=True, env={**os.environ, "SHARDS": str(shards), "GPU": gpu})
    return json.loads(result.stdout.split("=", 1)[1])["include"]


def test_workflow_schedules_cpu_and_gpu_shards_for_both_exporters_and_three_dtypes():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert "schedule" in workflow[True] and "workflow_dispatch" in workflow[True]  # yaml reads `on:` as True
    for gpu, devices in (("", {"cpu"}), ("true", {"cpu", "cuda"})):
        matrix = _matrix(shards=4, gpu=gpu)
        assert {m["device"] for m in matrix} == devices and {m["exporter"] for m in matrix} == {"roundtrip", "torch.onnx"}
        runs = {(m["exporter"], m["args"]) for m in matrix}
        assert {("roundtrip", "--dtype float32"), ("torch.onnx", "--dtype float32"), ("roundtrip", "--dtype float16"),
                ("roundtrip", "--dtype bfloat16"), ("roundtrip", "--dtype float32 --no-optimize"),
                ("roundtrip", "--dtype float32 --shapes 8")} <= runs
        per_device = {d: {(m["exporter"], m["args"]) for m in matrix if m["device"] == d} for d in devices}
        assert all(len([m for m in matrix if m["device"] == d and (m["exporter"], m["args"]) == run]) == 4
                   for d in devices for run in per_device[d])
        assert all("gpu" in json.loads(m["runs-on"]) for m in matrix if m["device"] == "cuda")
        # every backend per device, in one run each: onnxruntime's levels and OpenVINO on the CPU,
        # onnxruntime's CUDA and TensorRT providers on a GPU
        backends = {m["device"]: _backends(m["args"]) for m in matrix if "--backend" in m["args"]}
        assert set(backends) == devices
        assert backends["cpu"] == ["onnxruntime", "onnxruntime:level=disabled", "onnxruntime:level=basic",
                                   "onnxruntime:level=extended", "openvino:precision=f32,mode=accuracy", "openvino"]
        if "cuda" in devices:
            assert backends["cuda"] == ["onnxruntime", "onnxruntime:provider=tensorrt"]
        assert all(m["exporter"] == "roundtrip" and m["args"].startswith("--dtype float32 ")
                   for m in matrix if "--backend" in m["args"])
        assert len({m["name"] for m in matrix}) == len(matrix) == 4 * 7 * len(devices)


def _backends(args: str) -> list[str]:
    """The backend specs a run's arguments name, in order."""
    words = args.split()
    return [words[i + 1] for i, word in enumerate(words) if word == "--backend"]


def test_shards_install_what_the_backends_run_needs():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    installs = [step["run"] for step in workflow["jobs"]["shard"]["steps"] if "pip install" in step.get("run", "")]
    assert installs and all("[openvino]" in command for command in installs)


@pytest.mark.slow
def test_shards_merge_and_diff_as_the_workflow_runs_them(tmp_path):
    steps = _steps()
    shards = tmp_path / "reports" / "shards"
    for shard in range(1, SHARDS + 1):
        result = _bash(steps["parity"], tmp_path, DEVICE="cpu", EXPORTER="roundtrip", ARGS="--dtype float32", SHARD=str(shard),
                       NAME=f"cpu-roundtrip-{shard}")
        assert result.returncode == 0, result.stdout + result.stderr
        # download-artifact puts each artifact in a folder named after it
        (tmp_path / "reports" / "shards" / f"cpu-roundtrip-{shard}").rename(shards / f"shard-cpu-roundtrip-{shard}")

    documents = [load_report(shards / f"shard-cpu-roundtrip-{k}") for k in range(1, SHARDS + 1)]
    names = [[case["name"] for case in d["cases"]] for d in documents]
    selected = [case.name for case in model_zoo_cases.select(pattern=CASES)]
    assert all(names) and sorted(sum(names, [])) == sorted(selected), names  # disjoint and complete
    assert [d["shard"] for d in documents] == [f"{k}/{SHARDS}" for k in range(1, SHARDS + 1)]
    assert all(d["dtype"] == "float32" for d in documents)

    summary = tmp_path / "summary.md"
    result = _bash(steps["merge"], tmp_path, GITHUB_STEP_SUMMARY=str(summary))
    assert result.returncode == 0, result.stdout + result.stderr
    merged_dir = tmp_path / "reports" / "nightly" / "cpu-roundtrip"
    merged = load_report(merged_dir)  # validates against the schema
    assert [c["name"] for c in merged["cases"]] == selected  # the unsharded case set, in selection order
    assert all(c["status"] == "pass" and c["verification"]["ops"] for c in merged["cases"])
    assert {p.name for p in merged_dir.iterdir()} >= {"parity.json", "parity.md", "index.html", "logs"}
    assert summary.read_text().startswith("# roundtrip parity: 2 pass of 2 case(s)")

    # The merged report is tonight's baseline; the gate passes against itself ...
    shutil.copytree(merged_dir, tmp_path / "reports" / "baseline")
    gate = _bash(steps["gate"], tmp_path)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "no regressions" in gate.stdout
    # ... and the merge now puts the diff into the job summary
    assert _bash(steps["merge"], tmp_path, GITHUB_STEP_SUMMARY=str(summary)).returncode == 0
    assert "Against the baseline: no regressions" in (merged_dir / "parity.md").read_text()

    # A regressed night: a case that fails and an op whose isolated error crossed its tolerance.
    regressed = copy.deepcopy(merged)
    regressed["cases"][0]["status"] = "fail"
    op = next(o for o in regressed["cases"][1]["verification"]["ops"] if o["isolated"])
    op["passed"], op["isolated"]["tolerance_ratio"] = False, 3.0
    (merged_dir / "parity.json").write_text(dumps(regressed))
    gate = _bash(steps["gate"], tmp_path)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    found = json.loads((tmp_path / "reports" / "nightly" / "diff" / "diff.json").read_text())
    assert {r["kind"] for r in found["regressions"]} == {"case fail", "crossed"}
    assert op["fx_node"] in (tmp_path / "reports" / "nightly" / "diff" / "diff.md").read_text()


def _planned(device: str, name: str) -> dict:
    """The first shard the plan step makes of run `name` on `device` (GPU runners declared)."""
    return next(m for m in _matrix(shards=1, gpu="true") if m["device"] == device and m["name"] == f"{device}-{name}-1")


@pytest.mark.slow
def test_backends_shard_verifies_each_backend_per_op(tmp_path):
    """The CPU backends run as its shard runs it, on one small case: a per-op section for every
    backend after the first, each passing (openvino is in the test extra) against the same truth."""
    planned = _planned("cpu", "roundtrip-backends")
    result = _bash(_steps()["parity"], tmp_path, DEVICE="cpu", EXPORTER=planned["exporter"], ARGS=planned["args"],
                   SHARD="1", NAME=planned["name"], SHARDS="1", SELECT="--cases dcgan_discriminator")
    assert result.returncode == 0, result.stdout + result.stderr
    report = load_report(tmp_path / "reports" / "shards" / planned["name"])
    verification = report["cases"][0]["verification"]
    specs = _backends(planned["args"])
    assert verification["backend"] == specs[0]
    further = {b["backend"]: b for b in verification["backend_results"]}
    assert sorted(further) == sorted(_canonical(spec) for spec in specs[1:])
    for name, backend in further.items():
        assert backend["passed"] and not backend["skipped"], (name, backend["skipped"], backend["notes"])
        assert len(backend["ops"]) == len(verification["ops"]) > 0, name


def _canonical(spec: str) -> str:
    """A backend spec as reports name it (options sorted by name)."""
    from harness.runtime.backends import get_backend

    return str(get_backend(spec).spec)


def test_tox_nightly_runs_the_nightly_tests_and_the_full_tier_against_the_baseline():
    import configparser

    tox = configparser.ConfigParser()
    tox.read(REPO / "tox.ini")
    commands = tox["testenv:nightly"]["commands"]
    assert "roundtrip run --tier full" in commands and "--baseline reports/baseline" in commands
    assert "pytest -m nightly" in commands
    backends = next(line for line in commands.splitlines() if "--backend" in line)
    assert "roundtrip run --tier full" in backends and "--backend openvino" in backends
    assert {"onnxruntime:level=disabled", "onnxruntime:level=basic", "openvino:precision=f32,mode=accuracy"} <= set(
        _backends(backends))


def _nightly_ids(command: str) -> set[str]:
    """The test ids `command` (a pytest command line) selects, collected without running."""
    script = command.replace("pytest ", f"{sys.executable} -m pytest --collect-only -q -p no:xdist ", 1)
    script = script.replace(" -n auto", "")
    result = _bash(script, REPO)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return {line.strip() for line in result.stdout.splitlines() if "::" in line}


@pytest.mark.slow
def test_workflow_runs_every_nightly_test():
    """The `tests` job's command selects the whole nightly tier: every OpInfo entry and dtype
    the sweep recorded, and every other test marked nightly."""
    command = _steps()["nightly-tests"]
    assert "-m nightly" in command
    selected = _nightly_ids(command.split("--junitxml")[0].strip())
    nightly = _bash(f"{sys.executable} -m pytest --collect-only -q -p no:xdist -m nightly", REPO)
    assert selected == {line.strip() for line in nightly.stdout.splitlines() if "::" in line}
    opinfo = {i for i in selected if i.startswith("tests/test_opinfo.py::test_opinfo_samples[")}
    recorded = json.loads((REPO / "docs" / "opinfo.json").read_text())["entries"]
    in_ci = [(key, dtype) for key, per_dtype in recorded.items() for dtype in per_dtype
             if f"tests/test_opinfo.py::test_opinfo_samples[{key}-{dtype}]" not in opinfo]
    assert len(opinfo) + len(in_ci) == sum(len(per_dtype) for per_dtype in recorded.values())
    assert 0 < len(in_ci) <= 20, in_ci  # CI runs a few pairs (tests/test_opinfo.py: CI_ENTRIES, CI_PAIRS), never the sweep
    assert any(i.startswith("tests/test_transformer_blocks.py") for i in selected)
