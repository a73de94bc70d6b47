"""How many bytes of values a verification holds at once, sized from the memory available.

Torch's values and the backend's exposed values are held whole while they fit this budget
(one torch pass, one instrumented and one isolation run); past it they are streamed in chunks
of the graph (harness.analysis.torch_values, harness.analysis.fx_rows). A fixed small budget
streams every zoo-sized model, which costs a second torch pass and a session per chunk; a
budget from the memory available lets a model whose values fit be verified in one chunk,
while a large one (a detector at 800 px, an LLM) is still streamed and its peak bounded: its
chunks are `FLOOR_BYTES` whatever the budget, as a larger chunk saves sessions only. A model's
weights count with its values (each session packs a copy of those it loads): a Llama of 1.49
GiB whose values take 0.5 GiB streams, each segment loading a few layers' weights. Within
one chunk, the instrumented model and the isolation batch load as one model only where the
model's weights together are no larger than its values (harness.analysis.fx_rows._joinable): the
joint load packs a weight both read twice.

The budget is an eighth of the memory available when the verification starts (the process
holds about three budgets at its peak: torch's values, the backend's, and the isolation's
and fp64 truth's working set), between `FLOOR_BYTES` and `CEILING_BYTES`.
"""

from __future__ import annotations

FLOOR_BYTES = 256 * 2**20
"""The smallest budget: what was always held, however little memory is free."""
CEILING_BYTES = 2**30
"""The largest budget: past it a model is streamed whatever the memory free (the zoo's
largest, resnext101_32x8d at 224 px, exposes about 0.8 GiB of activations)."""
SHARE = 8
"""The budget is the memory available divided by this."""


def available_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """The memory the kernel says is available to a new allocation without swapping
    (MemAvailable), or None where it is not known (no /proc: not Linux)."""
    try:
        with open(meminfo, encoding="ascii") as lines:
            for line in lines:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def values_budget(available: int | None = None) -> int:
    """Bytes of values held whole: `available` (default: read now) divided by `SHARE`, within
    [`FLOOR_BYTES`, `CEILING_BYTES`]; the floor when the memory available is unknown."""
    if available is None:
        available = available_bytes()
    if available is None:
        return FLOOR_BYTES
    return max(FLOOR_BYTES, min(CEILING_BYTES, available // SHARE))
