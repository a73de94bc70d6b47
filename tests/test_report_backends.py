"""Reports of a run on several backends: the HTML case x backend grid and the per-op backends side
by side (the backend at fault marked), one Markdown table per backend, and `roundtrip diff`
comparing each backend only with the same backend spec.

Documents are hand-written verification dicts (the shape of `Verification.to_dict()`), so every
rule is checked without running a model.
"""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser

import pytest

from harness.report import diff as diffs
from harness.report import html, markdown
from harness.report.document import case_from_verification, crashed_case
from harness.report.schema import validate
from tests.test_report_document import document, op_row, verification

ORT, OV_F32, OV = "onnxruntime", "openvino:precision=f32", "openvino"


def _row(name: str, ratio: float, backend: str, *, blame: str = "", precision: str = "float32") -> dict:
    row = op_row(name, ratio)
    row.update(backend=backend, blame=blame, runtime_precision={"precision": precision, "source": "runtime model"})
    return row


def _result(backend: str, ops: list[dict], *, passed: bool | None = True, skipped: str = "") -> dict:
    record = verification(ops, passed=bool(passed)) if ops else verification([], passed=bool(passed))
    return {"backend": backend, "passed": None if skipped else passed, "skipped": skipped,
            "outputs": [] if skipped else record["outputs"], "output_verdicts": [], "worst_op": record["worst_op"],
            "ops": ops, "settings": {"backend": backend, "runtime": {"precision": "float32"}}, "notes": [],
            "timings": {}}


def _case(name: str, rows: dict[str, list[dict]], *, passed: dict[str, bool] | None = None,
          skipped: dict[str, str] | None = None) -> dict:
    """A case verified on the backends of `rows` (the first one is the verification's own)."""
    passed, skipped = passed or {}, skipped or {}
    backends = list(rows)
    record = verification(rows[backends[0]], passed=passed.get(backends[0], True))
    record["backend"] = backends[0]
    record["backend_settings"] = {"backend": backends[0]}
    record["backend_results"] = [_result(b, rows[b], passed=passed.get(b, True), skipped=skipped.get(b, ""))
                                 for b in backends[1:]]
    return case_from_verification(record, name=name, seconds=1.0)


def _run() -> dict:
    """Three backends: a clean case; a case where OpenVINO alone fails an op (runtime) and one op
    fails everywhere (export) and one runs in bfloat16 (runtime-precision); a case where OpenVINO
    is skipped; a crashed case."""
    clean = _case("clean", {b: [_row("conv_a", 0.1, b), _row("conv_b", 0.2, b)] for b in (ORT, OV_F32, OV)})
    faulty = _case("faulty", {
        ORT: [_row("conv_a", 0.1, ORT), _row("relu", 0.3, ORT), _row("linear", 4.0, ORT, blame="export")],
        OV_F32: [_row("conv_a", 0.1, OV_F32), _row("relu", 50.0, OV_F32, blame="runtime"),
                 _row("linear", 5.0, OV_F32, blame="export")],
        OV: [_row("conv_a", 0.6, OV, blame="runtime-precision", precision="bfloat16"), _row("relu", 0.3, OV),
             _row("linear", 4.5, OV, blame="export")],
    }, passed={ORT: False, OV_F32: False, OV: False})
    skipped = _case("skipped", {ORT: [_row("conv_a", 0.1, ORT)], OV_F32: [], OV: []},
                    skipped={OV_F32: "openvino is not installed (pip install 'roundtrip[openvino]')",
                             OV: "openvino is not installed (pip install 'roundtrip[openvino]')"})
    doc = document([clean, faulty, skipped, crashed_case("boom", reason="segmentation fault", signal="SIGSEGV")])
    doc["backends"] = [ORT, OV_F32, OV]
    validate(doc)
    return doc


class _Cells(HTMLParser):
    """Every <td> with a data-backend attribute: (table id, row's case or FX node, backend) -> attributes
    and text."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str, str], dict] = {}
        self.at_fault: dict[tuple[str, str], str] = {}
        self._table = self._row = ""
        self._open: dict | None = None
        self._fault_cell: tuple[str, str] | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "table":
            self._table = attributes.get("id", "")
        elif tag == "tr":
            self._row = attributes.get("data-case") or attributes.get("data-fx-node") or ""
        elif tag == "td" and "data-backend" in attributes:
            self._open = {**attributes, "text": ""}
            self.cells[(self._table, self._row, attributes["data-backend"])] = self._open
        elif tag == "td" and attributes.get("class") == "at-fault":
            self._fault_cell = (self._table, self._row)
            self.at_fault[self._fault_cell] = ""

    def handle_endtag(self, tag):
        if tag == "td":
            self._open, self._fault_cell = None, None

    def handle_data(self, data):
        if self._open is not None:
            self._open["text"] += data
        if self._fault_cell is not None:
            self.at_fault[self._fault_cell] += data


def _page(doc: dict, **options) -> str:
    """index.html without its plots (matplotlib's cost; tests/test_browser_report.py draws them)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(html, "error_along_graph", lambda case: None)
        patch.setattr(html, "headroom_by_kind", lambda kinds: None)
        return html.render(doc, **options)


@pytest.fixture(scope="module")
def parsed() -> _Cells:
    cells = _Cells()
    cells.feed(_page(_run()))
    return cells


@pytest.mark.parametrize("case, backend, status", [
    ("clean", ORT, "pass"), ("clean", OV_F32, "pass"), ("clean", OV, "pass"),
    ("faulty", ORT, "fail"), ("faulty", OV_F32, "fail"), ("faulty", OV, "fail"),
    ("skipped", ORT, "pass"), ("skipped", OV_F32, "skipped"), ("skipped", OV, "skipped"),
    ("boom", ORT, "crashed"), ("boom", OV_F32, "crashed"), ("boom", OV, "crashed"),
])
def test_html_grid_has_a_cell_per_case_and_backend(parsed, case, backend, status):
    cell = parsed.cells[("backend-grid", case, backend)]
    assert cell["data-status"] == status and status in cell["class"]
    if status == "skipped":
        assert "openvino is not installed" in cell["title"]


def test_html_grid_names_lower_precision_and_failing_rows(parsed):
    faulty_ov = parsed.cells[("backend-grid", "faulty", OV)]
    assert "1/3 float32" in faulty_ov["text"]  # the runtime's reported precision, beside the rows below it
    assert "1 failing row" in parsed.cells[("backend-grid", "faulty", ORT)]["text"]
    assert "2 failing row" in parsed.cells[("backend-grid", "faulty", OV_F32)]["text"]


@pytest.mark.parametrize("fx_node, faults, at_fault", [
    ("relu", {ORT: "", OV_F32: "runtime", OV: ""}, f"{OV_F32} (runtime)"),
    ("linear", {ORT: "export", OV_F32: "export", OV: "export"}, "the export (every backend)"),
    ("conv_a", {ORT: "", OV_F32: "", OV: "runtime-precision"}, f"{OV} (runtime-precision)"),
])
def test_html_puts_backends_side_by_side_and_marks_the_one_at_fault(parsed, fx_node, faults, at_fault):
    for backend, fault in faults.items():
        cell = parsed.cells[("case-faulty-backends", fx_node, backend)]
        assert cell["data-fault"] == fault
        assert ("fault" in cell["class"].split()) == bool(fault)
        if fault:
            assert fault in cell["text"]
    assert parsed.at_fault[("case-faulty-backends", fx_node)].strip() == at_fault
    relu_ov = parsed.cells[("case-faulty-backends", "relu", OV_F32)]
    assert relu_ov["text"].startswith("50") and "fail" in relu_ov["class"]
    assert parsed.cells[("case-faulty-backends", "conv_a", OV)]["text"].split()[1] == "bfloat16"


FUSED = {"layer": "conv_a", "layer_type": "Convolution", "precision": "bfloat16", "onnx_nodes": ["conv_a", "relu"],
         "fx_nodes": ["conv_a", "relu"], "output": "relu"}


@pytest.mark.parametrize("fusion, shown", [
    ({**FUSED, "passed": True}, "Convolution conv_a, bfloat16 (conv_a + relu: region passes)"),
    ({**FUSED, "passed": False}, "Convolution conv_a, bfloat16 (conv_a + relu: region FAILS)"),
    ({**FUSED, "fx_nodes": ["relu"], "onnx_nodes": ["relu"]}, "Convolution conv_a, bfloat16"),
    (None, ""),
])
def test_html_shows_the_runtime_layer_of_each_row(fusion, shown):
    """The layer that ran a row (runtime_fusion) in the per-op tables, not only in its notes: in
    the backends side by side and in the op table (its own column)."""
    rows = {ORT: [_row("relu", 0.2, ORT)], OV: [_row("relu", 0.4, OV, precision="bfloat16")]}
    if fusion is not None:
        rows[OV][0]["runtime_fusion"] = fusion
    doc = document([_case("fused", rows)])
    doc["backends"] = [ORT, OV]
    validate(doc)
    cells = _Cells()
    cells.feed(_page(doc))
    side_by_side = cells.cells[("case-fused-backends", "relu", OV)]["text"]
    assert (shown in side_by_side) if shown else "Convolution" not in side_by_side
    assert "Convolution" not in cells.cells[("case-fused-backends", "relu", ORT)]["text"]
    ov_only = document([_case("fused", {OV: rows[OV]})])
    tables = re.findall(r'<td class="runtime-layer">([^<]*)</td>', _page(ov_only))
    assert tables and all(text == (shown or "-") for text in tables), tables


def test_html_of_one_backend_has_no_backend_sections():
    doc = document([_case("clean", {ORT: [_row("conv_a", 0.1, ORT)]})])
    page = _page(doc)
    assert 'id="backend-grid"' not in page and "backends-side-by-side" not in page


def _sections(text: str) -> dict[str, list[str]]:
    """Markdown '### backend' sections -> their table rows."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("### "):
            current = line[4:]
            found[current] = []
        elif line.startswith("## "):
            current = None
        elif current is not None and line.startswith("| ") and not line.startswith("| case"):
            found[current].append(line)
    return found


@pytest.mark.parametrize("backend, case, expected", [
    (ORT, "clean", ["pass", "as declared", "0/2", "conv_b", "0.2", "-"]),
    (OV_F32, "faulty", ["FAIL", "float32", "0/3", "relu", "50", "`relu` (runtime); `linear` (export)"]),
    (OV, "faulty", ["FAIL", "float32", "1/3", "linear", "4.5", "`linear` (export)"]),
    (OV, "skipped", ["skipped: openvino is not installed"]),
    (OV_F32, "boom", ["crashed"]),
])
def test_markdown_has_one_table_per_backend(backend, case, expected):
    sections = _sections(markdown.render(_run()))
    assert list(sections) == [ORT, OV_F32, OV]
    assert [row.split(" | ")[0][2:] for row in sections[backend]] == ["clean", "faulty", "skipped", "boom"]
    row = next(r for r in sections[backend] if r.startswith(f"| {case} |"))
    cells = [c.strip() for c in row.strip("|").split(" | ")][1:]
    for text in expected:
        assert any(text in c for c in cells), (text, cells)


def _fail_row(doc: dict, case: str, backend: str, fx_node: str, blame: str = "runtime") -> None:
    record = next(c for c in doc["cases"] if c["name"] == case)["verification"]
    entries = [record] + record["backend_results"]
    entry = next(e for e in entries if (e.get("backend") or ORT) == backend)
    op = next(o for o in entry["ops"] if o["fx_node"] == fx_node)
    op.update(_row(fx_node, 3.0, backend, blame=blame), passed=False)
    entry["passed"] = False


def _respell(doc: dict, old: str, new: str) -> None:
    doc["backends"] = [new if b == old else b for b in doc["backends"]]
    for case in doc["cases"]:
        for entry in [case.get("verification") or {}] + (case.get("verification") or {}).get("backend_results", []):
            if entry.get("backend") == old:
                entry["backend"] = new
                for op in entry["ops"]:
                    op["backend"] = new


def _legacy(doc: dict) -> None:
    """A report from before the backend axis: one backend, no backend fields."""
    doc.pop("backends", None)
    for case in doc["cases"]:
        record = case.get("verification")
        if record:
            for key in ("backend", "backend_settings", "backend_results"):
                record.pop(key, None)
            for op in record["ops"]:
                op.pop("backend", None)


def _one_backend(doc: dict) -> None:
    for case in doc["cases"]:
        if case.get("verification"):
            case["verification"]["backend_results"] = []
    doc["backends"] = [ORT]


@pytest.mark.parametrize("change_base, change_new, regressions, extra", [
    # a row regresses on one backend: found on that backend alone, with the backend's verdict
    (None, lambda d: _fail_row(d, "clean", OV_F32, "conv_b"),
     {("clean", OV_F32, "backend fails", None), ("clean", OV_F32, "crossed", "conv_b")}, {}),
    (None, lambda d: _fail_row(d, "clean", ORT, "conv_a"),
     {("clean", ORT, "backend fails", None), ("clean", ORT, "crossed", "conv_a")}, {}),
    # the new run asks for openvino at its default instead of f32: never compared with each other
    (lambda d: _respell(d, OV, "openvino:precision=bf16"), lambda d: _fail_row(d, "clean", OV, "conv_b"),
     set(), {"missing_backends": {("clean", "openvino:precision=bf16"), ("faulty", "openvino:precision=bf16"),
                                  ("skipped", "openvino:precision=bf16")},
             "added_backends": {("clean", OV), ("faulty", OV), ("skipped", OV)}}),
    # skipped on one side: listed, not compared
    (None, lambda d: d["cases"][2]["verification"]["backend_results"][0].update(skipped="", passed=True),
     set(), {"not_compared": {("skipped", OV_F32)}}),
    # a report from before the backend axis is onnxruntime: compared with onnxruntime only
    (lambda d: (_one_backend(d), _legacy(d)), lambda d: _fail_row(d, "clean", ORT, "conv_a"),
     {("clean", ORT, "crossed", "conv_a"), ("clean", ORT, "backend fails", None)}, {"added_backends": {("clean", OV_F32), ("clean", OV)}}),
])
def test_diff_compares_each_backend_with_itself(change_base, change_new, regressions, extra):
    base = _run()
    new = copy.deepcopy(base)
    if change_base:
        change_base(base)
    change_new(new)
    found = diffs.diff(base, new)
    got = {(r["case"], r.get("backend"), r["kind"], r.get("fx_node")) for r in found["regressions"]
           if not r["kind"].startswith("case ")}
    assert got == regressions
    for key in ("missing_backends", "added_backends", "not_compared"):
        rows = {(r["case"], r["backend"]) for r in found[key] if r["case"] != "boom"}
        if key in extra:
            assert rows >= extra[key], (key, rows)
        elif key == "not_compared":  # skipped on both sides: still listed, never compared
            assert rows <= {("skipped", OV_F32), ("skipped", OV), ("skipped", "openvino:precision=bf16")}, rows
        else:
            assert rows == set(), (key, rows)
    text = diffs.markdown(found)
    for _, backend, kind, _ in regressions:
        assert re.search(rf"\| {re.escape(backend)} \|.*\| {kind} \|", text), text
    if "missing_backends" in extra:
        assert "Backends in the baseline only (not compared)" in text


def test_diff_html_lists_backends_on_one_side_only(tmp_path):
    base, new = _run(), _run()
    _respell(new, OV, "openvino:precision=bf16")
    page = _page(new, diff=diffs.diff(base, new))
    assert "Backends in the baseline only (not compared)" in page and "openvino:precision=bf16" in page
