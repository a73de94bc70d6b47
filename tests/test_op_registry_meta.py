"""Meta-tests: the operator table, the registry and the seed's operator list agree.

Every operator of the seed's list has a symbolic for each ATen overload that implements it
today and a test row that exports it; every registered built-in has a test row; every row names
registered overloads; every built-in's docstring opens with its ATen schema line.

Coverage is what the runner checks, never a label: the targets of rows it exports and holds to
the exported model's provenance (table.checked_targets; xfail and refused rows cover nothing).
Seed operators that an eval-mode export removes (dropout) are covered by checked rows holding
such a layer, whose exports the runner holds to having no dropout left. Each row's `seed_ops`
labels must follow from what the row covers.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from exporter.translate.registry import BUILTINS, MAX_OPSET, MIN_OPSET, normalize_target
from op_table.seed_ops import SEED_LIST, SEED_OPERATORS, SEED_REMOVED_IN_EVAL, seed_name
from op_table.table import all_cases, build_sample, checked_targets, is_checked

CASES = all_cases()
COVERED = {target for case in CASES for target in checked_targets(case)}
BUILTIN_TARGETS = BUILTINS.targets()


def test_seed_table_names_every_seed_operator_in_order() -> None:
    assert list(SEED_OPERATORS) == [seed_name(line) for line in SEED_LIST]


@pytest.mark.parametrize("name", list(SEED_OPERATORS))
def test_seed_operator_has_symbolics(name: str) -> None:
    missing = [t for t in SEED_OPERATORS[name] if t not in BUILTINS]
    assert not missing, f"seed operator {name!r}: no built-in symbolic for {missing}"


@pytest.mark.parametrize("name", list(SEED_OPERATORS))
def test_seed_operator_has_checked_rows(name: str) -> None:
    """Each overload implementing the operator is a target of a row the runner exports and
    checks (an xfail or refused row does not count)."""
    missing = [t for t in SEED_OPERATORS[name] if t not in COVERED]
    assert not missing, f"seed operator {name!r}: no checked row of op_table targets {missing}"
    assert SEED_OPERATORS[name] or name in SEED_REMOVED_IN_EVAL, f"seed operator {name!r} maps to nothing"


@pytest.mark.parametrize("name", sorted(SEED_REMOVED_IN_EVAL))
def test_seed_operator_removed_in_eval_has_checked_rows(name: str) -> None:
    """A checked row holds one of the layers; the runner asserts its export leaves no dropout."""
    layers = SEED_REMOVED_IN_EVAL[name]
    holding = [case.name for case in _checked_modules() if _holds(case, layers)]
    assert holding, f"seed operator {name!r}: no checked row's module holds any of {[t.__name__ for t in layers]}"


@pytest.mark.parametrize("case", [c for c in CASES if c.seed_ops], ids=lambda case: case.name)
def test_row_seed_labels_follow_from_what_it_covers(case) -> None:
    """A row may list a seed operator only when it covers one of its overloads (or holds one of
    the layers an eval-mode export removes); xfail and refused rows list none."""
    assert is_checked(case), f"{case.name} is {'xfail' if case.xfail else 'refused'} and covers nothing"
    for name in case.seed_ops:
        assert name in SEED_OPERATORS, f"{name!r} is not a seed operator"
        covers = set(SEED_OPERATORS[name]) & set(checked_targets(case))
        removed = SEED_REMOVED_IN_EVAL.get(name, ())
        assert covers or (removed and _holds(case, removed)), (
            f"{case.name} lists {name!r} but targets none of {SEED_OPERATORS[name]}"
            + (f" and holds none of {[t.__name__ for t in removed]}" if removed else "")
        )


_MODULES: dict[str, torch.nn.Module] = {}


def _checked_modules():
    return [case for case in CASES if is_checked(case)]


def _holds(case, layers) -> bool:
    if case.name not in _MODULES:
        _MODULES[case.name] = build_sample(case).module
    return any(isinstance(m, tuple(layers)) for m in _MODULES[case.name].modules())


@pytest.mark.parametrize("target", BUILTIN_TARGETS)
def test_builtin_has_a_row(target: str) -> None:
    assert target in COVERED, f"built-in symbolic {target} has no row in op_table/cases_*.py"


@pytest.mark.parametrize("target", BUILTIN_TARGETS)
def test_builtin_opset_ranges_are_supported(target: str) -> None:
    for entry in BUILTINS.entries(target):
        assert MIN_OPSET <= entry.since_opset <= MAX_OPSET, f"{target} since {entry.since_opset} ({entry.location})"


@pytest.mark.parametrize("target", [t for t in BUILTIN_TARGETS if t.startswith("aten.")])
def test_builtin_docstring_opens_with_the_schema(target: str) -> None:
    """Project rule: a built-in symbolic's docstring opens with the ATen schema line of one of
    its overloads (as native_functions.yaml or torch print it: both parse to the same schema)."""
    for entry in BUILTINS.entries(target):
        first_line = ((inspect.getdoc(entry.fn) or "").splitlines() or [""])[0]
        schemas = {_schema_line(t) for t in _targets_of_function(entry.fn)}
        assert _parsed_schema_line(first_line) in schemas, (
            f"{entry.location}: docstring should open with one of {sorted(schemas)}, not {first_line!r}"
        )


def test_row_names_are_unique() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_row_is_well_formed(case) -> None:
    assert case.targets, "a row must name the overloads it covers"
    for target in case.targets:
        assert normalize_target(target) == target, f"write {normalize_target(target)!r}, not {target!r}"
        assert target in BUILTINS, f"{target} is not a registered built-in"
    assert case.opsets and all(MIN_OPSET <= o <= MAX_OPSET for o in case.opsets)
    assert not (case.xfail and case.refused), "a row is either refused or an xfail"
    for reason in (case.xfail, case.refused):
        assert reason is None or reason.strip(), "xfail/refused need a reason"
    assert bool(case.xfail) == bool(case.fails_with), "an xfail row names the failure it expects (fails_with), and only it"


def _schema_line(target: str) -> str:
    namespace, name, overload = target.split(".")
    op = getattr(getattr(getattr(torch.ops, namespace), name), overload)
    return str(op._schema).removeprefix(f"{namespace}::")


def _parsed_schema_line(line: str) -> str | None:
    try:
        return str(torch._C.parse_schema(f"aten::{line}")).removeprefix("aten::")
    except RuntimeError:
        return None


def _targets_of_function(fn) -> list[str]:
    return [t for t in BUILTIN_TARGETS if t.startswith("aten.") and any(e.fn is fn for e in BUILTINS.entries(t))]
