"""Write a report directory: parity.json (validated first), parity.md and index.html, each
atomically, with the diff against a baseline (diff.json, diff.md) when one is given."""

from __future__ import annotations

import json
import os
from typing import Any

from harness.report import diff as diffs
from harness.report import html, markdown
from harness.report.files import INDEX_HTML, PARITY_JSON, PARITY_MD, dumps, write_text
from harness.report.schema import validate

DIFF_JSON = "diff.json"
DIFF_MD = "diff.md"


def write_report_dir(document: dict[str, Any], out_dir: str | os.PathLike, *, baseline: dict[str, Any] | None = None,
                     baseline_path: str = "", cases_validated: bool = False) -> dict[str, str]:
    """Validate `document`, then write the report files into `out_dir`; returns {file: path}.
    `cases_validated`: none of its cases has a `schema.case_error`, and none changed since
    (a run in progress, rewriting its report after each case): the rest is validated alone.

    parity.json is written first: if rendering the others fails, the source of truth is there.
    """
    validate(document, cases_validated=cases_validated)
    out = os.fspath(out_dir)
    os.makedirs(out, exist_ok=True)
    written = {PARITY_JSON: write_text(os.path.join(out, PARITY_JSON), dumps(document))}
    found = None
    if baseline is not None:
        found = diffs.diff(baseline, document, base_path=baseline_path, new_path=out)
        written[DIFF_JSON] = write_text(os.path.join(out, DIFF_JSON), json.dumps(found, indent=1) + "\n")
        written[DIFF_MD] = write_text(os.path.join(out, DIFF_MD), diffs.markdown(found, heading="#") + "\n")
    written[PARITY_MD] = write_text(os.path.join(out, PARITY_MD), markdown.render(document, diff=found))
    written[INDEX_HTML] = write_text(os.path.join(out, INDEX_HTML), html.render(document, diff=found, report_dir=out))
    return written
