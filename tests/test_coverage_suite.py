"""The coverage suite (coverage_suite/): its tables, a cheap CI sample exported by roundtrip
and verified, the nightly run of every case through both exporters, and the runner's crash
isolation and resumability on a planted case set."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
import torch

import coverage_suite
from coverage_suite import report
from coverage_suite.expectations import KNOWN_FAILURES
from coverage_suite.measure import CRASH, EXPORT, TIMEOUT, measure

ROOT = Path(__file__).resolve().parent.parent
CASES = coverage_suite.CASES
# A case's inputs stay small: a few hundred elements (random draws get a few thousand, enough
# for their distribution check).
MAX_ELEMENTS, MAX_RANDOM_ELEMENTS = 640, 4096


def _runner():
    spec = importlib.util.spec_from_file_location("run_coverage_suite", ROOT / "tools" / "run_coverage_suite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample(per_family: int = 2) -> list[coverage_suite.Case]:
    """The CI sample: the first `per_family` deterministic cases of every family."""
    taken: Counter[str] = Counter()
    chosen = []
    for case in CASES.values():
        if not case.random and taken[case.family] < per_family:
            taken[case.family] += 1
            chosen.append(case)
    return chosen


def test_suite_is_large_grouped_and_described():
    assert len(CASES) >= 500
    families = Counter(case.family for case in CASES.values())
    assert len(families) >= 15 and min(families.values()) >= 10, families
    for case in CASES.values():
        assert case.name.startswith(case.family + ".") and case.description.strip(), case.name


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_inputs_are_small_and_seeded(name):
    case = CASES[name]
    first, again = case.inputs(), case.inputs()
    limit = MAX_RANDOM_ELEMENTS if case.random else MAX_ELEMENTS
    assert sum(t.numel() for t in first) <= limit, f"{name}: inputs of {[tuple(t.shape) for t in first]}"
    assert all(torch.equal(a, b) for a, b in zip(first, again)), f"{name}: inputs are not seeded"
    if case.dynamic:
        other = case.inputs(other_size=True)
        assert [t.shape for t in other] != [t.shape for t in first], f"{name}: the second size is the same"


def test_known_failures_name_real_cases_with_reasons():
    for name, reason in KNOWN_FAILURES.items():
        assert name in CASES, f"{name} in coverage_suite/expectations.py is not a case"
        assert len(reason.split()) >= 4, f"{name}: state a reason a reader can act on"


def test_select_by_family_and_pattern():
    assert {c.family for c in coverage_suite.select(families=["conv"])} == {"conv"}
    assert [c.name for c in coverage_suite.select(["unary.abs_f32"])] == ["unary.abs_f32"]
    with pytest.raises(ValueError, match="unknown coverage families"):
        coverage_suite.select(families=["no-such-family"])


@pytest.mark.parametrize("case", sample(), ids=lambda case: case.name)
def test_ci_sample_exports_and_verifies(case):
    result = measure(case, "roundtrip", per_op=False)
    if case.name in KNOWN_FAILURES:
        assert not result["verified"], f"{case.name} now passes: remove its row from coverage_suite/expectations.py"
        return
    assert result["verified"], f"{case.name}: {result['failure']}: {result['reason']}"


@pytest.mark.nightly
@pytest.mark.parametrize("family", coverage_suite.FAMILIES)
def test_whole_suite_ours_fails_only_with_a_stated_reason(family, tmp_path):
    """Every case of `family` through both exporters (one test per family, so xdist spreads them)."""
    results = _runner().run(coverage_suite.select(families=[family]), ("roundtrip", "torch.onnx"),
                            path=tmp_path / "suite.json")
    assert len(results["cases"]) == len(coverage_suite.select(families=[family]))
    unexplained = {name: record["roundtrip"]["reason"] for name, record in results["cases"].items()
                   if record["torch.onnx"]["verified"] and not record["roundtrip"]["verified"]
                   and name not in KNOWN_FAILURES}
    assert not unexplained, json.dumps(unexplained, indent=1)


PLANTED = '''
import os, time
from pathlib import Path
import torch
from coverage_suite.case import F, Table

table = Table("planted")
BUILDS = Path(os.environ["PLANTED_BUILDS"])


def counted(fn):
    def build():
        with BUILDS.open("a") as log:
            log.write(fn.__name__ + "\\n")
        return fn
    return build


def ok(x):
    return x + 1


def crash(x):
    os._exit(3)


def hang(x):
    time.sleep(3600)
    return x


def refused(x):
    return torch.nonexistent_op(x)


def after(x):
    return x * 2


for fn in (ok, crash, hang, refused, after):
    table.add(fn.__name__, f"planted {fn.__name__}", counted(fn), F(2, 3))
CASES = {case.name: case for case in table.cases}
'''


@pytest.fixture
def planted(tmp_path, monkeypatch):
    (tmp_path / "planted_cases.py").write_text(textwrap.dedent(PLANTED))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("PLANTED_BUILDS", str(tmp_path / "builds.log"))
    sys.path.insert(0, str(tmp_path))
    try:
        import planted_cases

        yield tmp_path, planted_cases
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("planted_cases", None)


def test_runner_isolates_crashes_and_timeouts_and_resumes(planted):
    folder, module = planted
    runner, path = _runner(), folder / "results.json"
    cases = list(module.CASES.values())
    options = dict(path=path, cases_module="planted_cases", timeout_s=20, per_op=False)
    runner.run(cases[:1], ("roundtrip",), **options)
    results = runner.run(cases, ("roundtrip",), **options)
    outcome = {name: record["roundtrip"] for name, record in results["cases"].items()}
    assert outcome["planted.ok"]["verified"] and outcome["planted.after"]["verified"]
    assert outcome["planted.crash"]["failure"] == CRASH and "exited with 3" in outcome["planted.crash"]["reason"]
    assert outcome["planted.hang"]["failure"] == TIMEOUT
    assert outcome["planted.refused"]["failure"] == EXPORT and "nonexistent_op" in outcome["planted.refused"]["reason"]
    builds = (folder / "builds.log").read_text().split()
    assert builds.count("ok") == 1, "a case measured by the first run was measured again"
    assert json.loads(path.read_text())["run"]["commit"]
    again = runner.run(cases, ("roundtrip",), **options)
    assert (folder / "builds.log").read_text().split() == builds and again["cases"] == results["cases"]


def test_section_splices_into_the_document_and_keeps_the_rest():
    results = {"run": {"commit": "abc"}, "cases": {
        "a.one": {"family": "a", "roundtrip": {"verified": False, "failure": EXPORT, "reason": "no symbolic"},
                  "torch.onnx": {"verified": True}},
        "a.two": {"family": "a", "roundtrip": {"verified": True}, "torch.onnx": {"verified": True}}}}
    text = report.section(results, total_cases=3)
    assert "| a | 2 | 1 | 2 | 1 | 1 |" in text and "`a.one`" in text and "Partial run" in text
    document = "# Coverage\n\nkept\n"
    once = report.splice(document, text)
    assert once.startswith(document.rstrip("\n")) and report.splice(once, text) == once


def test_a_random_output_is_judged_by_its_distribution():
    """An output that is a draw passes on its distribution: its value verdict does not overrule it."""
    result = measure(CASES["create.rand_like"], "roundtrip", per_op=False)
    assert result["verified"], result["reason"]
