"""Loads the harness pytest plugin for this repo when the installed entry point has not."""

from __future__ import annotations

import os
from importlib.metadata import entry_points

_autoloaded = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") is None and any(
    ep.value == "harness.pytest_plugin" for ep in entry_points(group="pytest11")
)
pytest_plugins = [] if _autoloaded else ["harness.pytest_plugin"]
