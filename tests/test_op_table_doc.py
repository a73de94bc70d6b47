"""docs/OPERATORS.md is generated from the registry and the operator table; it must be current.

Generating it exports every row of the table as one module with each row's dynamic axes (several
hundred symbols in one torch.export): about 330 s on a quiet 2-core machine, so the check runs
with the nightly tests, and `python tools/gen_op_table.py --check` runs it on demand.
"""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_op_table", ROOT / "tools" / "gen_op_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.nightly
def test_operator_table_is_current() -> None:
    generator = _generator()
    committed = generator.OUTPUT.read_text() if generator.OUTPUT.exists() else ""
    generated = generator.generate()
    if generated != committed:
        diff = difflib.unified_diff(
            committed.splitlines(), generated.splitlines(), "docs/OPERATORS.md (committed)", "generated", lineterm=""
        )
        shown = "\n".join(list(diff)[:40])
        pytest.fail(f"docs/OPERATORS.md is out of date: run python tools/gen_op_table.py\n{shown}")
