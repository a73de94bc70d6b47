"""Where each process of a CUDA run verifies: GPU per xdist worker and its share of memory.

With `--roundtrip-device cuda` and N xdist workers over G visible GPUs, worker k ("gwk") uses
GPU k mod G. Workers that share a GPU each get an equal share of its memory, split evenly
between torch's caching allocator (`torch.cuda.set_per_process_memory_fraction`) and
onnxruntime's CUDA arena (the CUDA provider's `gpu_mem_limit`): a verification holds the model's
weights and activations once on each side. A worker alone on its GPU, or a run without xdist,
is not capped. The CUDA context each process creates (a few hundred MiB) is outside both caps.

`plan` and `describe` are arithmetic on numbers; `apply` is the one function that touches torch
and onnxruntime.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from fractions import Fraction

logger = logging.getLogger(__name__)

TORCH_PART = Fraction(1, 2)
"""The part of a worker's share of its GPU's memory given to torch; onnxruntime gets the rest."""


@dataclass(frozen=True)
class Placement:
    """One process's GPU and memory caps."""

    gpu: int
    gpus: int  # GPUs visible
    workers: int  # xdist workers in the run (1 without xdist)
    sharing: int  # workers placed on this GPU, this one included
    worker: str | None = None  # "gw3"; None without xdist

    @property
    def share(self) -> Fraction | None:
        """This worker's share of its GPU's memory; None when it has the GPU to itself."""
        return Fraction(1, self.sharing) if self.sharing > 1 else None

    @property
    def torch_fraction(self) -> float | None:
        """torch.cuda.set_per_process_memory_fraction's argument, or None (no cap)."""
        return float(self.share * TORCH_PART) if self.share else None

    def onnxruntime_limit(self, total_bytes: int) -> int | None:
        """gpu_mem_limit in bytes for a GPU of `total_bytes`, or None (no cap)."""
        return int(total_bytes * self.share * (1 - TORCH_PART)) if self.share else None


def worker_index(worker_id: str | None) -> int | None:
    """3 for xdist's worker id "gw3"; None for None or an id of another form."""
    found = re.fullmatch(r"gw(\d+)", worker_id or "")
    return int(found.group(1)) if found else None


def plan(worker_id: str | None, workers: int, gpus: int) -> Placement:
    """The placement of worker `worker_id` ("gwk", None without xdist) among `workers` over `gpus`."""
    if gpus < 1:
        raise ValueError("no GPU is visible to place the run on")
    index = worker_index(worker_id)
    if index is None:
        return Placement(gpu=0, gpus=gpus, workers=1, sharing=1, worker=worker_id)
    # A crashed worker's replacement gets the next id (-n 2: gw2, gw3 ...): counting every id up
    # to its own on its GPU bounds the workers alive there from above.
    workers = max(workers, index + 1)
    gpu = index % gpus
    sharing = len(range(gpu, workers, gpus))
    return Placement(gpu=gpu, gpus=gpus, workers=workers, sharing=sharing, worker=worker_id)


def describe(workers: int, gpus: int) -> str:
    """The header's placement line for a run of `workers` xdist workers (0: no xdist) over `gpus`."""
    if workers <= 1:
        return f"cuda:0 of {gpus} visible GPU(s), memory not capped"
    loads: dict[int, int] = {}
    for k in range(workers):
        loads[k % gpus] = loads.get(k % gpus, 0) + 1
    if max(loads.values()) == 1:
        return f"{workers} xdist workers over {gpus} GPUs: worker gwk on cuda:k, memory not capped"
    parts = []
    for gpu, count in sorted(loads.items()):
        if count == 1:
            parts.append(f"cuda:{gpu} 1 worker, not capped")
            continue
        share = Fraction(1, count)
        parts.append(f"cuda:{gpu} {count} workers, each capped to {share} of its memory "
                     f"(torch {share * TORCH_PART}, onnxruntime {share * (1 - TORCH_PART)})")
    return f"{workers} xdist workers over {gpus} GPU(s), worker gwk on cuda:(k mod {gpus}): " + "; ".join(parts)


def apply(placement: Placement) -> dict[str, object]:
    """Cap torch's allocator and onnxruntime's CUDA arena on this process's GPU; returns what
    was set (for the report's environment)."""
    import torch

    from harness.runtime.sessions import set_cuda_mem_limit

    applied: dict[str, object] = {"gpu": placement.gpu, "sharing": placement.sharing}
    torch.cuda.set_device(placement.gpu)
    if placement.share is None:
        set_cuda_mem_limit(None)
        return applied
    total = torch.cuda.get_device_properties(placement.gpu).total_memory
    torch.cuda.set_per_process_memory_fraction(placement.torch_fraction, placement.gpu)
    limit = placement.onnxruntime_limit(total)
    set_cuda_mem_limit(limit)
    applied.update(torch_fraction=placement.torch_fraction, onnxruntime_gpu_mem_limit=limit)
    logger.info("roundtrip: %s on cuda:%d, torch capped to %.3f of %d bytes, onnxruntime to %d bytes",
                placement.worker, placement.gpu, placement.torch_fraction, total, limit)
    return applied
