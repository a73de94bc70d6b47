"""roundtrip's own coverage suite: small single-op and pattern models grouped by op family,
each exported by roundtrip and by torch.onnx (dynamo) and verified by the harness in the same
run (tools/run_coverage_suite.py). Cases are rows of the tables in family_*.py."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from .case import Case, Spec
from .family_elementwise import TABLES as _ELEMENTWISE
from .family_nn import TABLES as _NN
from .family_patterns import TABLES as _PATTERNS
from .family_tensor import TABLES as _TENSOR

__all__ = ["CASES", "FAMILIES", "Case", "Spec", "select"]


def _collect() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for table in (*_ELEMENTWISE, *_TENSOR, *_NN, *_PATTERNS):
        for case in table.cases:
            if case.name in cases:
                raise ValueError(f"coverage case {case.name!r} is declared twice; rename one row")
            cases[case.name] = case
    return cases


CASES: dict[str, Case] = _collect()
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(case.family for case in CASES.values()))


def select(only: Sequence[str] | None = None, families: Sequence[str] | None = None) -> list[Case]:
    """The cases whose name matches any of `only` (fnmatch patterns) and whose family is in
    `families` (all when None), in declaration order."""
    unknown = [f for f in families or () if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown coverage families {unknown}; choose from {list(FAMILIES)}")
    return [c for c in CASES.values() if (not families or c.family in families)
            and (not only or any(fnmatch.fnmatchcase(c.name, p) for p in only))]
