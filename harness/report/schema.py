"""The JSON Schema of parity.json (`schema.json` beside this module) and its validator."""

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


@functools.cache
def _validator() -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema())
    cls.check_schema(schema())
    return cls(schema())


def validate(document: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError (the most relevant error) when `document` does not
    follow the schema."""
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator().iter_errors(document))
    if error is not None:
        raise error
