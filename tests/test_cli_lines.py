"""`roundtrip run`'s terminal lines (harness.cli.lines): at most 120 characters, long names cut
in the middle, the reason on a second line; the long form (-v) is the report's whole line.

The records are real: the committed CPU baseline's cases (reports/baseline), and failing,
crashed and refused cases made from them the way the worker and scheduler make them."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from harness.cli.lines import (
    ELLIPSIS, WIDTH, case_lines, end_ellipsis, middle_ellipsis, short_lines, summary_lines,
)
from harness.cli.reasons import failure_reason, terminal_line
from harness.report.document import crashed_case, error_case

BASELINE = Path(__file__).resolve().parent.parent / "reports" / "baseline" / "parity.json.gz"


@pytest.fixture(scope="module")
def baseline() -> dict:
    with gzip.open(BASELINE, "rt") as handle:
        return json.load(handle)


def _failing(case: dict, fx_node: str, score: float) -> dict:
    """`case` with one op over its allowance and the first output over its tolerance."""
    case = copy.deepcopy(case)
    record = case["verification"]
    op = next(op for op in record["ops"] if op["fx_node"] == fx_node)
    op["passed"], op["verdict"]["score"], op["verdict"]["passed"] = False, score, False
    record.update(passed=False, worst_op=fx_node)
    record["outputs"][0].update(passed=False, tolerance_ratio=80.0, max_abs=0.0123)
    case["status"] = "fail"
    return case


@pytest.mark.parametrize("text, width, expected", [
    ("resnet18", 24, "resnet18"),
    ("word_language_model_lstm_tied", 24, f"word_languag{ELLIPSIS}l_lstm_tied"),
    ("_native_batch_norm_legit_no_training_27", 20, f"_native_ba{ELLIPSIS}aining_27"),
    ("abcdef", 1, ELLIPSIS),
    ("abcdef", 2, f"a{ELLIPSIS}"),
    ("abcdef", 0, ""),
])
def test_middle_ellipsis(text, width, expected):
    assert middle_ellipsis(text, width) == expected and len(expected) <= max(width, 0)


def test_every_baseline_case_fits_and_names_its_worst_op(baseline):
    for case in baseline["cases"]:
        (line,) = short_lines(case)  # passing: one line
        assert len(line) <= WIDTH and line.startswith(f"PASS  {middle_ellipsis(case['name'], 24)}"), line
        assert "x allowed" in line and line.endswith(f"{case['seconds']:.1f}s"), line


LINES = [
    # (record maker, expected lines): real records from the baseline, failing as the worker writes them
    (lambda b: b["resnet18"],
     ["PASS  resnet18                 out 4.17e-07  worst _native_batch_…o_training_5+1 [Conv]    0.285x allowed    7.8s"]),
    (lambda b: _failing(b["resnet18"], "relu_3", 1.623e6),
     ["FAIL  resnet18                 out   0.0123  worst relu_3 [Relu]                        1.62e+06x allowed    7.8s",
      "    output 'linear': max_abs 0.0123 (80x its tolerance, atol 1e-05 rtol 0.0001, 0% of elements outside); 1 op(s) "
      "over t…"]),
    (lambda b: _failing(b["word_language_model_lstm_tied"], "lstm", 12.5),
     ["FAIL  word_languag…l_lstm_tied out   0.0123  worst lstm [Slicex4+LSTMx2+Squeezex2+Con…]     12.5x allowed    1.5s",
      "    output 'linear': max_abs 0.0123 (80x its tolerance, atol 4e-05 rtol 0.0001, 0% of elements outside); 1 op(s) "
      "over t…"]),
    (lambda b: crashed_case("densenet161", reason="killed by SIGKILL: out of memory (the kernel's OOM killer) or killed "
                            "by hand", signal="SIGKILL", seconds=27.3, log_tail=["..."]),
     ["CRASH densenet161                27.3s",
      "    killed by SIGKILL: out of memory (the kernel's OOM killer) or killed by hand"]),
    (lambda b: error_case("a_model_with_a_really_very_long_name_from_a_factory",
                          error="export: ExportError: aten.foo.default has no symbolic " + "x" * 200, seconds=1.0),
     ["ERROR a_model_with…m_a_factory    1.0s",
      "    export: ExportError: aten.foo.default has no symbolic " + "x" * 61 + ELLIPSIS]),
]


@pytest.mark.parametrize("make, expected", LINES, ids=["pass", "fail", "fail long names", "crash", "error"])
def test_short_lines_table(baseline, make, expected):
    case = make({c["name"]: c for c in baseline["cases"]})
    lines = short_lines(case)
    assert lines == expected
    assert all(len(line) <= WIDTH for line in lines)
    if case["status"] != "pass":  # the reason's line is the reason, cut at the width at most
        assert failure_reason(case).startswith(lines[1].strip().removesuffix(ELLIPSIS))


def test_narrower_widths_are_kept(baseline):
    case = _failing(baseline["cases"][1], "relu_3", 1.623e6)
    for width in (60, 80, 100):
        assert all(len(line) <= width for line in short_lines(case, width))
    for width in (100, 105):  # a plain log's prefix leaves ~105: the op column narrows, the seconds stay
        head = short_lines(case, width)[0]
        assert head.endswith("7.8s") and "1.62e+06x allowed" in head and "relu_3 [Relu]" in head, head


def test_verbose_is_todays_long_line(baseline):
    """-v: the report's whole line, as before (checker, both sizes, worst op, region, truth errors,
    allowance, scope, source, and the reason)."""
    case = _failing(baseline["cases"][1], "relu_3", 1.623e6)
    (line,) = case_lines(case, verbose=True)
    assert line == terminal_line(case) and len(line) > WIDTH
    for part in ("checker=ok", "max_out_err=0.0123", "batch 3=", "worst_op=relu_3 [Relu]", "e_backend", "e_torch",
                 "ResNet/Sequential[layer1]", "torchvision/models/resnet.py", failure_reason(case)):
        assert part in line, part


def test_summary_tables_fit(baseline):
    cases = {c["name"]: c for c in baseline["cases"]}
    document = {"cases": [cases["resnet18"], _failing(cases["resnet34"], "relu_3", 5.0),
                          crashed_case("densenet161", reason="segmentation fault", seconds=2.0),
                          *baseline["cases"][10:20]]}
    lines = summary_lines(document)
    assert lines[0] == "Not passed (2):"
    assert lines[1].split() == ["case", "verdict", "max", "out", "ops", "reason"]
    assert lines[2] == ("resnet34     FAIL     0.0123   1    output 'linear': max_abs 0.0123 (80x its t…de); 1 op(s) over "
                        "tolerance, first relu_3")  # the reason cut in the middle: its end names the op
    assert lines[3].startswith("densenet161  CRASH") and lines[3].endswith("segmentation fault")
    worst = lines.index("Worst 10 ops (error over what the verdict allowed):")
    assert len(lines) == worst + 1 + 1 + 10
    assert lines[worst + 2].startswith("resnet34") and "relu_3 [Relu]" in lines[worst + 2] and "5x" in lines[worst + 2]
    assert all(len(line) <= WIDTH for line in lines), max(map(len, lines))
    # ops whose names differ only in the middle stay apart: the type list gives way first
    labels = [line.split()[1] for line in lines[worst + 2:]]
    assert "_native_batch…o_training_88" in labels and "_native_batch…o_training_90" in labels


def test_end_ellipsis():
    assert end_ellipsis("abc", 3) == "abc" and end_ellipsis("abcd", 3) == f"ab{ELLIPSIS}"
