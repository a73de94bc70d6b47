"""docs/OPERATORS.md is generated from the registry and the operator table; it must be current."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_op_table", ROOT / "tools" / "gen_op_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_operator_table_is_current() -> None:
    generator = _generator()
    committed = generator.OUTPUT.read_text() if generator.OUTPUT.exists() else ""
    assert generator.generate() == committed, (
        "docs/OPERATORS.md is out of date with the registry or tests/op_table: run python tools/gen_op_table.py"
    )
