"""CUDA placement of xdist workers, as arithmetic: GPU k mod count, memory shares, the header
line, and the onnxruntime provider option the cap becomes (no GPU needed)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from harness.pytest_plugin.placement import describe, plan, worker_index
from harness.runtime.sessions import cuda_provider_options, set_cuda_mem_limit

GIB = 1 << 30


@pytest.mark.parametrize(("worker", "workers", "gpus", "gpu", "sharing"), [
    (None, 1, 1, 0, 1),  # no xdist: the first GPU, alone
    (None, 1, 4, 0, 1),
    ("gw0", 1, 1, 0, 1),  # -n 1: alone, not capped
    ("gw0", 4, 1, 0, 4),  # -n 4 on one GPU: a quarter each
    ("gw3", 4, 1, 0, 4),
    ("gw0", 4, 4, 0, 1),  # one worker per GPU
    ("gw3", 4, 4, 3, 1),
    ("gw5", 8, 2, 1, 4),  # 8 workers over 2 GPUs: gw1, gw3, gw5, gw7 on cuda:1
    ("gw2", 3, 2, 0, 2),  # uneven: cuda:0 has gw0 and gw2 ...
    ("gw1", 3, 2, 1, 1),  # ... cuda:1 has gw1 alone
    # xdist names a crashed worker's replacement with the next id (-n 2: gw2, gw3 ...); it counts
    # every id before its own on its GPU, an upper bound of the workers alive there
    ("gw6", 2, 4, 2, 2),
    ("gw2", 2, 1, 0, 3),
])
def test_worker_k_uses_gpu_k_mod_count(worker, workers, gpus, gpu, sharing):
    placement = plan(worker, workers, gpus)
    assert (placement.gpu, placement.sharing) == (gpu, sharing)


@pytest.mark.parametrize(("workers", "torch_fraction", "onnxruntime_gib"), [
    (1, None, None),
    (2, 0.25, 20.0),
    (4, 0.125, 10.0),
    (8, 0.0625, 5.0),
])
def test_one_gpu_is_shared_evenly_between_workers_and_between_torch_and_onnxruntime(
        workers, torch_fraction, onnxruntime_gib):
    placement = plan("gw0", workers, 1)
    assert placement.torch_fraction == torch_fraction
    limit = placement.onnxruntime_limit(80 * GIB)
    assert (limit / GIB if limit is not None else None) == onnxruntime_gib
    if placement.share is not None:  # the two caps add up to the worker's share
        assert placement.torch_fraction * 80 * GIB + limit == pytest.approx(80 * GIB / workers)
        assert placement.share == Fraction(1, workers)


@pytest.mark.parametrize(("workers", "gpus", "expected"), [
    (0, 1, "cuda:0 of 1 visible GPU(s), memory not capped"),
    (4, 4, "4 xdist workers over 4 GPUs: worker gwk on cuda:k, memory not capped"),
    (4, 1, "4 xdist workers over 1 GPU(s), worker gwk on cuda:(k mod 1): cuda:0 4 workers, each capped to 1/4 "
           "of its memory (torch 1/8, onnxruntime 1/8)"),
    (3, 2, "3 xdist workers over 2 GPU(s), worker gwk on cuda:(k mod 2): cuda:0 2 workers, each capped to 1/2 "
           "of its memory (torch 1/4, onnxruntime 1/4); cuda:1 1 worker, not capped"),
])
def test_the_header_states_the_placement(workers, gpus, expected):
    assert describe(workers, gpus) == expected


@pytest.mark.parametrize(("worker_id", "index"), [("gw0", 0), ("gw12", 12), (None, None), ("master", None)])
def test_worker_index(worker_id, index):
    assert worker_index(worker_id) == index


def test_no_gpu_is_an_error():
    with pytest.raises(ValueError, match="no GPU"):
        plan("gw0", 2, 0)


def test_the_cap_reaches_the_cuda_provider_options():
    assert "gpu_mem_limit" not in cuda_provider_options(0, False)
    assert cuda_provider_options(1, True, 5 * GIB) == {"device_id": 1, "use_tf32": 1, "gpu_mem_limit": 5 * GIB}
    set_cuda_mem_limit(3 * GIB)
    try:
        assert cuda_provider_options(0, False)["gpu_mem_limit"] == 3 * GIB
        assert cuda_provider_options(0, False, 2 * GIB)["gpu_mem_limit"] == 2 * GIB  # a session's own wins
    finally:
        set_cuda_mem_limit(None)
    assert "gpu_mem_limit" not in cuda_provider_options(0, False)


@pytest.mark.parametrize(("worker", "workers", "torch_fraction", "onnxruntime_limit"), [
    ("gw1", 4, 0.25, 20 * GIB),  # four workers over two GPUs: gw1 and gw3 share cuda:1
    ("gw1", 1, None, None),  # alone: nothing capped
])
def test_apply_caps_torch_and_onnxruntime_on_the_workers_gpu(monkeypatch, worker, workers, torch_fraction,
                                                             onnxruntime_limit):
    """`apply`'s calls, recorded instead of made (no GPU here)."""
    import torch

    from harness.pytest_plugin.placement import apply
    from harness.runtime import sessions

    calls: list[tuple] = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: calls.append(("set_device", index)))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: type("P", (), {"total_memory": 80 * GIB}))
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                        lambda fraction, index: calls.append(("fraction", fraction, index)))
    monkeypatch.setattr(sessions, "_cuda_mem_limit", None)
    applied = apply(plan(worker, workers, 2))
    gpu = 1
    expected = [("set_device", gpu)] + ([("fraction", torch_fraction, gpu)] if torch_fraction else [])
    assert calls == expected
    assert sessions.cuda_provider_options(gpu, False).get("gpu_mem_limit") == onnxruntime_limit
    assert applied.get("onnxruntime_gpu_mem_limit") == onnxruntime_limit
