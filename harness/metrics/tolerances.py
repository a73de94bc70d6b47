"""Per-op tolerance tables: data rows keyed by ATen overload, device and dtype, with their source.

A row applies to an op when its `aten`, `device` and `dtype` match; `*` matches anything. The
lookup takes the most specific row: the op's own overload before the `*` default, and within
each the op's dtype before `*`. A table also carries the policy `roundtrip tolerances
--calibrate` follows for it (margin, loosening cap), each number with its source.

Schema version 2 added `dtype`; version 1 tables still load, their rows reading as dtype `*`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
ANY = "*"
OUTPUT = "output"  # the rows of a model's outputs (not an ATen overload)
# An op whose output dtype the caller does not know is looked up as the harness's working
# precision: every zoo model and the FX values the analysis compares are float32.
DEFAULT_DTYPE = "float32"


@dataclass(frozen=True)
class Tolerance:
    aten: str
    device: str
    atol: float
    rtol: float
    source: str = ""
    dtype: str = ANY

    def to_dict(self) -> dict[str, Any]:
        # its fields are scalars: read directly, not through asdict's recursive deep copy (a row each op)
        return {"aten": self.aten, "device": self.device, "atol": self.atol, "rtol": self.rtol,
                "source": self.source, "dtype": self.dtype}


@dataclass(frozen=True)
class CalibrationPolicy:
    """How calibration may change a table's rows: `margin` times the worst observed error, and
    never more than `max_loosen_factor` times the row it replaces (unless allowed)."""

    margin: float = 4.0
    max_loosen_factor: float = 10.0
    sources: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"margin": self.margin, "margin_source": self.sources.get("margin", ""),
                "max_loosen_factor": self.max_loosen_factor,
                "max_loosen_factor_source": self.sources.get("max_loosen_factor", "")}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> CalibrationPolicy:
        if not data:
            return cls()
        return cls(float(data.get("margin", cls.margin)), float(data.get("max_loosen_factor", cls.max_loosen_factor)),
                   {key: data.get(f"{key}_source", "") for key in ("margin", "max_loosen_factor")})


def is_override(row: Tolerance) -> bool:
    """Whether a row names an op's own overload: it then decides instead of the verdict rule."""
    return row.aten not in (ANY, OUTPUT)


def normalise_device(device: str) -> str:
    return "cuda" if device.lower().startswith("cuda") else device.lower()


class ToleranceTable:
    """Looks up the row for (aten overload, device, dtype); '*' rows are the fallbacks."""

    def __init__(self, rows: list[Tolerance], description: str = "",
                 calibration: CalibrationPolicy | None = None) -> None:
        self.rows = list(rows)
        self.description = description
        self.calibration = calibration or CalibrationPolicy()
        self._index: dict[tuple[str, str, str], Tolerance] = {}
        for row in self.rows:
            key = (row.aten, row.device, row.dtype)
            if key in self._index:
                raise ValueError(f"two tolerance rows for aten={row.aten} device={row.device} dtype={row.dtype}")
            self._index[key] = row

    def lookup(self, aten: str, device: str, dtype: str | None = None) -> Tolerance:
        """The most specific row for an op; `dtype` None means the caller does not know it
        (taken as DEFAULT_DTYPE)."""
        device = normalise_device(device)
        dtype = dtype or DEFAULT_DTYPE
        for key in ((aten, device, dtype), (aten, device, ANY), (ANY, device, dtype), (ANY, device, ANY),
                    (ANY, "cpu", ANY)):
            if key in self._index:
                return self._index[key]
        raise KeyError(f"no tolerance row for {aten} on {device} ({dtype}) and no '*' default")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "description": self.description,
            "calibration": self.calibration.to_dict(),
            "rows": [r.to_dict() for r in sorted(self.rows, key=lambda r: (r.aten != ANY, r.aten, r.device, r.dtype))],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToleranceTable:
        if not isinstance(data, dict) or data.get("schema_version") not in READABLE_VERSIONS:
            version = data.get("schema_version") if isinstance(data, dict) else None
            raise ValueError(f"tolerance table has schema_version {version!r}; expected one of {READABLE_VERSIONS}")
        try:
            rows = [Tolerance(**{"dtype": ANY, **row}) for row in data["rows"]]
        except (KeyError, TypeError) as error:
            raise ValueError(f"tolerance table rows are malformed ({error}); each row needs aten, device, atol, "
                             "rtol and may have source and dtype") from None
        return cls(rows, data.get("description", ""), CalibrationPolicy.from_dict(data.get("calibration")))


DEFAULT_TABLE_PATH = "data/tolerances.json"


def shipped_path() -> str:
    """Filesystem path of the table shipped with the harness."""
    return str(resources.files("harness.metrics").joinpath(DEFAULT_TABLE_PATH))


def load(path: str | os.PathLike | None = None) -> ToleranceTable:
    """The table at `path`, or the one shipped with the harness. A missing file raises
    FileNotFoundError; a file that is not a table raises ValueError naming it."""
    if path is None:
        text = resources.files("harness.metrics").joinpath(DEFAULT_TABLE_PATH).read_text()
    else:
        with open(path) as handle:
            text = handle.read()
    try:
        return ToleranceTable.from_dict(json.loads(text))
    except (json.JSONDecodeError, ValueError) as error:
        raise ValueError(f"{path or shipped_path()}: not a tolerance table: {error}") from None
