"""docs/SHAPE_SWEEPS.md and docs/shape_sweeps.json: a tier's sweep run recorded per case (sizes,
verdict, max error, first failing size), rendered, and the committed page in step with its JSON."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gen_shape_sweeps_doc", ROOT / "tools" / "gen_shape_sweeps_doc.py")
doc = sys.modules.setdefault("gen_shape_sweeps_doc", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(doc)


def _size(label, status="pass", max_abs=1e-6, error=""):
    return {"label": label, "status": status, "max_abs": max_abs, "reasons": ["traced"], "error": error}


PARITY = {
    "command": "roundtrip run --tier smoke --shapes 3", "started": "a", "finished": "b",
    "versions": {"torch": "2.14.1", "onnxruntime": "1.31.1"},
    "cases": [
        {"name": "good", "status": "pass", "shape_sweep": {"passed": True, "first_failing": None, "sizes": [
            _size("batch 2"), _size("batch 3", max_abs=4e-6), _size("batch 1", "invalid", None, "torch refused")]}},
        {"name": "baked", "status": "fail", "shape_sweep": {"passed": False, "sizes": [
            _size("batch 2"), _size("batch 3", "fail", 2.5, "shape differs")],
            "first_failing": {"label": "batch 3", "diagnosis": "first failing op at batch 3: view_1 (aten.view)"}}},
        {"name": "static_only", "status": "pass"},
    ],
}

# (case, the row rendered for it)
ROWS = [
    pytest.param("good", "| `good` | pass | 3 | 1 invalid, 2 pass | 4e-06 | batch 2; batch 3; batch 1 (invalid) |",
                 id="a-pass-counts-every-size-and-names-the-invalid-one"),
    pytest.param("baked", "| `baked` | **fail** | 2 | 1 fail, 1 pass | 2.5 | batch 2; batch 3 (fail) |", id="a-failure"),
    pytest.param("static_only", "| `static_only` | not swept | 0 | - | - | - |", id="no-sweep-is-said"),
]


@pytest.mark.parametrize(("case", "row"), ROWS)
def test_each_case_is_rendered_with_its_sizes_verdict_and_max_error(tmp_path, case, row):
    parity = tmp_path / "parity.json"
    parity.write_text(json.dumps(PARITY))
    results = doc.record({}, [f"smoke={parity}"])
    text = doc.render(results)
    assert row in text
    assert "**1 of 3 cases pass every size.**" in text
    assert "- `baked` at batch 3: first failing op at batch 3: view_1 (aten.view)" in text


def test_a_tier_recorded_again_replaces_its_old_record_and_keeps_the_others(tmp_path):
    parity = tmp_path / "parity.json"
    parity.write_text(json.dumps(PARITY))
    old = {"full": {"command": "x", "cases": []}, "smoke": {"command": "old", "cases": []}}
    results = doc.record(old, [f"smoke={parity}"])
    assert results["full"] == old["full"] and results["smoke"]["command"] == PARITY["command"]
    with pytest.raises(SystemExit, match="TIER=PATH"):
        doc.record({}, [str(parity)])


def test_the_committed_page_matches_the_committed_results():
    assert doc.main(["--check"]) == 0, "run python tools/gen_shape_sweeps_doc.py"


@pytest.mark.parametrize("command, shown", [
    ("roundtrip run --tier full --shapes 8 -j 2 --out /tmp/someone/full8", "roundtrip run --tier full --shapes 8 -j 2 --out REPORT_DIR"),
    ("roundtrip run --tier smoke --shapes 8", "roundtrip run --tier smoke --shapes 8"),
])
def test_the_page_shows_the_command_without_the_machines_report_path(command, shown):
    assert doc._shown_command(command) == shown
