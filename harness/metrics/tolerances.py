"""Per-op tolerance tables: data rows keyed by ATen overload and device, with their source."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Tolerance:
    aten: str
    device: str
    atol: float
    rtol: float
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ToleranceTable:
    """Looks up the row for (aten overload, device); '*' rows are the fallback."""

    def __init__(self, rows: list[Tolerance], description: str = "") -> None:
        self.rows = list(rows)
        self.description = description
        self._index = {(r.aten, r.device): r for r in self.rows}

    def lookup(self, aten: str, device: str) -> Tolerance:
        device = "cuda" if device.lower().startswith("cuda") else device.lower()
        for key in ((aten, device), ("*", device), ("*", "cpu")):
            if key in self._index:
                return self._index[key]
        raise KeyError(f"no tolerance row for {aten} on {device} and no '*' default")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "description": self.description,
            "rows": [r.to_dict() for r in sorted(self.rows, key=lambda r: (r.aten != "*", r.aten, r.device))],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToleranceTable:
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(
                f"tolerance table has schema_version {data.get('schema_version')!r}; expected {SCHEMA_VERSION}"
            )
        return cls([Tolerance(**row) for row in data["rows"]], data.get("description", ""))


DEFAULT_TABLE_PATH = "data/tolerances.json"


def shipped_path() -> str:
    """Filesystem path of the table shipped with the harness."""
    return str(resources.files("harness.metrics").joinpath(DEFAULT_TABLE_PATH))


def load(path: str | os.PathLike | None = None) -> ToleranceTable:
    """The table at `path`, or the one shipped with the harness."""
    if path is None:
        text = resources.files("harness.metrics").joinpath(DEFAULT_TABLE_PATH).read_text()
    else:
        with open(path) as handle:
            text = handle.read()
    return ToleranceTable.from_dict(json.loads(text))
