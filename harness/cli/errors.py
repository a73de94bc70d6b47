"""The CLI's exit codes and the error that means "you asked for something that cannot be done"."""

from __future__ import annotations

EXIT_PASS = 0  # every case passed (and no regression)
EXIT_FAIL = 1  # a divergence, a crash, or a regression against the baseline
EXIT_USAGE = 2  # a usage error: one line on stderr, nothing run
EXIT_INTERNAL = 3  # the harness failed; the report is still written


class UsageError(Exception):
    """A request the CLI refuses before doing anything: printed as one line, exit code 2."""
