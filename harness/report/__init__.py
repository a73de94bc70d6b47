"""Renderers of run results: parity.json documents (schema_version 3), parity.md, index.html,
diffs against a baseline and merges of shard reports.

Layer 5: imports the API (harness/*.py) and the layers below; the CLI and the pytest plugin
render through it.
"""
