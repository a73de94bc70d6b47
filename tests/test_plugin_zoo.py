"""The zoo as a test suite shipped with the package (model_zoo_cases/test_zoo.py), run from
another project with `--pyargs`: one test per case and input size, every case in the report."""

from __future__ import annotations

import json

import pytest

import model_zoo_cases  # imports torch now: pytester's in-process runs unload what they import
from harness.report.schema import validate

CHEAP_CASE = "dcgan_discriminator"  # about 4 s per size on a shared 2-core CPU


def test_one_test_per_case_and_size_each_in_the_report(pytester: pytest.Pytester):
    case = model_zoo_cases.get(CHEAP_CASE)
    # In a subprocess: an in-process run would unload the torch modules it imports lazily, and
    # torch cannot import them twice.
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-v", "--pyargs", "model_zoo_cases.test_zoo",
                                "--roundtrip-cases", CHEAP_CASE, "--roundtrip-report-dir", "out")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*test_zoo_case[[]{CHEAP_CASE}-batch{case.traced_batch}[]] PASSED*",
                                 f"*test_zoo_case[[]{CHEAP_CASE}-batch{case.other_batch}[]] PASSED*"])
    report = json.loads((pytester.path / "out" / "parity.json").read_text())
    validate(report)
    cases = {c["name"]: c for c in report["cases"]}
    assert sorted(cases) == [f"{CHEAP_CASE} batch {case.traced_batch}", f"{CHEAP_CASE} batch {case.other_batch}"]
    for entry in cases.values():
        assert entry["status"] == "pass" and entry["family"] == case.family
        assert entry["origin"]["zoo"] == CHEAP_CASE and entry["verification"]["ops"]  # verified per op
    other = cases[f"{CHEAP_CASE} batch {case.other_batch}"]["verification"]
    assert other["outputs"][0]["shape_expected"][0] == case.other_batch


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--roundtrip-tier", "nightly", "--roundtrip-tier 'nightly': choose one of {tiers}"),
    ("--roundtrip-cases", "dcgan_discriminatr", "--roundtrip-cases 'dcgan_discriminatr': *dcgan_discriminator*"),
])
def test_a_bad_selection_fails_the_collection_saying_what_to_pass(pytester: pytest.Pytester, option, value, message):
    result = pytester.runpytest("-p", "no:xdist", "--pyargs", "model_zoo_cases.test_zoo", option, value)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's exit status for a collection error
    result.stdout.fnmatch_lines([message.format(tiers=", ".join(model_zoo_cases.TIERS))])
    assert "Traceback" not in result.stdout.str()
