"""Readers of the model metadata the exporter writes (keys in exporter.contract.keys): the
runtime checks an export left out, and the inputs and outputs it renamed."""

from __future__ import annotations

import json
from typing import Any

from exporter.contract.keys import DROPPED_CHECKS_KEY, RENAMED_VALUES_KEY


def json_entry(model: Any, key: str, default: Any) -> Any:
    """The JSON value a model records under metadata `key`, or `default` when it records none."""
    for entry in getattr(model, "metadata_props", ()):
        if entry.key == key:
            return json.loads(entry.value)
    return default


def dropped_checks(model: Any) -> list[dict[str, str]]:
    """The runtime checks an onnx.ModelProto's exporter left out (`DROPPED_CHECKS_KEY`), [] if none."""
    return list(json_entry(model, DROPPED_CHECKS_KEY, []))


def describe_check(check: dict[str, str]) -> str:
    """One line for a dropped check: what it requires and the user's line it comes from."""
    where = f" ({check['source']})" if check.get("source") else ""
    return (f"runtime check not in the ONNX model: {check['expression']}{where}; torch.export could not "
            "prove it for every size, and inputs that break it run without an error")


def renamed_values(model: Any) -> dict[str, str]:
    """FX value name -> ONNX name for the inputs/outputs renamed by input_names/output_names."""
    return json_entry(model, RENAMED_VALUES_KEY, {})
