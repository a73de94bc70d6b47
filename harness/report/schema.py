"""The JSON Schema of parity.json (`schema.json` beside this module) and its validator.

Every alternative in the schema (`anyOf`) is disjoint from the others (a number or one of the
strings 'inf', '-inf', 'nan'; an object or null), so a value matches at most one: `anyOf` says
the same as `oneOf` would and stops at the first match, where `oneOf` tries them all (a third
less validation time on a large report).

A report grows case by case while a run rewrites it after each one: `case_error` checks one
case alone, and `validate(document, cases_validated=True)` then checks the rest of the document
without walking its cases again. The schema has no constraint across cases (each item of
`cases` is one `#/$defs/case`), so the two together say exactly what `validate(document)` says.
A report of many ops on several backends runs to tens of MB, and jsonschema walks it at about
1 MB/s: validated whole after every case, a run spends time quadratic in its length there.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

SCHEMA_FILE = "schema.json"


@functools.cache
def schema() -> dict[str, Any]:
    """The shipped schema of parity.json (schema_version 3; version 2 documents validate too)."""
    return json.loads(resources.files("harness.report").joinpath(SCHEMA_FILE).read_text())


def _checked(target: dict[str, Any]) -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema())
    cls.check_schema(schema())
    return cls(target)


@functools.cache
def _validator() -> Any:
    return _checked(schema())


@functools.cache
def _case_validator() -> Any:
    root = schema()
    return _checked({"$schema": root["$schema"], "$defs": root["$defs"], "$ref": "#/$defs/case"})


def _best(errors: Any) -> Any:
    import jsonschema

    return jsonschema.exceptions.best_match(errors)


def validate(document: dict[str, Any], *, cases_validated: bool = False) -> None:
    """Raise jsonschema.ValidationError (the most relevant error) when `document` does not
    follow the schema. `cases_validated`: each of its cases has no `case_error` and has not
    changed since, so only the rest of the document is checked."""
    error = _best(_validator().iter_errors({**document, "cases": []} if cases_validated else document))
    if error is not None:
        raise error


def case_error(case: dict[str, Any]) -> Any:
    """The most relevant jsonschema.ValidationError of one case (an item of a document's `cases`),
    its path starting inside the case; None when the case follows the schema."""
    return _best(_case_validator().iter_errors(case))
