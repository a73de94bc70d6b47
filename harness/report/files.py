"""Reading and writing report files: a report is a directory holding parity.json (or the JSON
file itself); writes are atomic and respect the user's umask."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from exporter.contract.fileio import umask, write_text_atomic
from harness.report.document import READABLE_VERSIONS, SCHEMA_VERSION

PARITY_JSON = "parity.json"
PARITY_MD = "parity.md"
INDEX_HTML = "index.html"


class ReportError(ValueError):
    """A report that cannot be read or used: the message names the file and what to do."""


def dumps(document: dict[str, Any]) -> str:
    """A parity document as JSON: the header indented, one compact line per case (small files
    that still diff line by line)."""
    header = {key: value for key, value in document.items() if key != "cases"}
    cases = ",\n".join(json.dumps(case, separators=(",", ":")) for case in document.get("cases", []))
    text = json.dumps(header, indent=1)
    return f'{text[:-2]},\n "cases": [\n{cases}\n ]\n}}\n' if cases else json.dumps(document, indent=1) + "\n"


def write_text(path: str | os.PathLike, text: str) -> str:
    """Write `text` atomically (a reader sees the old file or the new one), with the mode a
    plain `open()` would give under the user's umask."""
    write_text_atomic(path, text)
    os.chmod(path, 0o666 & ~umask())
    return os.fspath(path)


def fix_directory_mode(path: str | os.PathLike) -> None:
    """Give a directory made with tempfile.mkdtemp (mode 0700) the mode the umask asks for."""
    os.chmod(path, 0o777 & ~umask())


def report_json_path(path: str | os.PathLike) -> Path:
    """parity.json of a report directory (parity.json.gz where only that is there, as in the
    committed baseline), or the path itself for a JSON file."""
    path = Path(path)
    if not path.is_dir():
        return path
    plain = path / PARITY_JSON
    packed = path / f"{PARITY_JSON}.gz"
    return packed if packed.exists() and not plain.exists() else plain


def read_json_text(file: Path) -> str:
    """A JSON file's text, gunzipped when its name ends in .gz."""
    if file.suffix == ".gz":
        import gzip

        return gzip.decompress(file.read_bytes()).decode()
    return file.read_text()


def load_report(path: str | os.PathLike) -> dict[str, Any]:
    """The parity document at `path` (a report directory or its parity.json), validated."""
    from harness.report.schema import validate

    file = report_json_path(path)
    try:
        document = json.loads(read_json_text(file))
    except FileNotFoundError:
        raise ReportError(f"{path}: no report there (expected a report directory holding {PARITY_JSON}, "
                          "or a parity.json file)") from None
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ReportError(f"{file}: cannot read the report: {error}") from None
    if not isinstance(document, dict) or document.get("schema_version") not in READABLE_VERSIONS:
        version = document.get("schema_version") if isinstance(document, dict) else None
        raise ReportError(f"{file}: schema_version {version!r}, expected one of {READABLE_VERSIONS}; "
                          "re-run `roundtrip run` to make a current report")
    import jsonschema

    try:
        validate(document)
    except jsonschema.ValidationError as error:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ReportError(f"{file}: not a valid parity report at {where}: {error.message}") from None
    return document
