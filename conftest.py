"""This repository's pytest set-up: the harness plugin (loaded here when its entry point is not
installed), pytester for the plugin's own tests, and short aliases of the plugin's options for
this repository only, so that the mission's `pytest -n auto --device cuda` works:
`--device` (`--roundtrip-device`), `--zoo-tier` (`--roundtrip-tier`), `--zoo-cases`
(`--roundtrip-cases`)."""

from __future__ import annotations

import argparse
import os
from importlib.metadata import entry_points

import pytest

_autoloaded = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") is None and any(
    ep.value == "harness.pytest_plugin" for ep in entry_points(group="pytest11")
)
# Every test runs the harness strictly: a bug in harness code raises instead of becoming a note.
os.environ.setdefault("ROUNDTRIP_STRICT", "1")

pytest_plugins = ["pytester"] + ([] if _autoloaded else ["harness.pytest_plugin"])

ALIASES = (  # the plugin checks the values, whichever flag gave them
    ("--device", "roundtrip_device", "cpu|cuda|auto"),
    ("--zoo-tier", "roundtrip_tier", "TIER"),
    ("--zoo-cases", "roundtrip_cases", "PATTERN"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("roundtrip")
    for flag, dest, metavar in ALIASES:
        long_name = "--roundtrip-" + dest.removeprefix("roundtrip_")
        try:
            group.addoption(flag, dest=dest, default=None, metavar=metavar,
                            help=f"this repository's alias of {long_name}")
        except argparse.ArgumentError:
            # Another project runs the shipped zoo tests from this (editable) checkout and has
            # its own option of that name: pytest loads this conftest beside them; theirs wins.
            continue
