"""The budget of values held whole, sized from the memory available (harness.analysis.budget)."""

import pytest

from harness.analysis import budget

GiB = 2**30


@pytest.mark.parametrize("available, expected", [
    (None, budget.FLOOR_BYTES),  # unknown: the old fixed budget
    (0, budget.FLOOR_BYTES),
    (1 * GiB, budget.FLOOR_BYTES),  # an eighth is below the floor
    (4 * GiB, GiB // 2),
    (8 * GiB, GiB),
    (64 * GiB, budget.CEILING_BYTES),  # never past the ceiling
])
def test_budget_is_an_eighth_of_the_available_memory_within_its_bounds(available, expected, monkeypatch):
    monkeypatch.setattr(budget, "available_bytes", lambda: available)
    assert budget.values_budget() == expected


@pytest.mark.parametrize("text, expected", [
    ("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   16000000 kB\n", 16000000 * 1024),
    ("MemTotal:       24000000 kB\nMemFree:  100 kB\n", None),  # an old kernel without the line
])
def test_available_memory_is_read_from_meminfo(text, expected, tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(text)
    assert budget.available_bytes(str(meminfo)) == expected


def test_a_missing_meminfo_means_unknown(tmp_path):
    assert budget.available_bytes(str(tmp_path / "absent")) is None


def test_parameters_do_not_count_against_the_budget_of_torch_values():
    """A model whose weights alone pass the budget, and whose computed values do not, is recorded
    whole: its parameters are the module's own memory, not values the verification holds."""
    import torch
    import exporter
    from harness.analysis import torch_values

    module = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU()).eval()
    args = (torch.randn(2, 512),)
    program = exporter.capture(module, args)
    weights = sum(p.numel() * p.element_size() for p in module.parameters())
    computed = 3 * 2 * 512 * 4  # linear, relu and the output, at most
    recorded = torch_values.record_values(program, args, budget=weights // 2)
    assert weights // 2 > computed
    assert not recorded.streaming
    assert torch_values.record_values(program, args, budget=computed // 4).streaming  # computed values do count
