"""Stated reasons for coverage cases that roundtrip fails: case name -> why. The nightly test
fails on a case torch.onnx verifies and roundtrip does not unless it is listed here; the CI
sample expects a listed case to fail, and fails when it starts to pass (remove its row).
Each reason names what to add or fix; rows come from the run in docs/coverage_suite.json."""

from __future__ import annotations

KNOWN_FAILURES: dict[str, str] = {}
