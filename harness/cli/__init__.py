"""The `roundtrip` command line: run, verify, diff, merge, tolerances; cases run in worker processes.

A front end: imports the report renderers, the API and below; never the pytest plugin.
"""

from __future__ import annotations

from harness.cli.main import main

__all__ = ["main"]
