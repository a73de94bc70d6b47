"""Size-dependent values exported as constants are found at export (exporter.optimize.baked_sizes):
planted size-baking bugs are named with their FX node and line, warned about, refused under
strict_dynamic, and recorded in the model's metadata; a correct dynamic model raises nothing."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch
from torch import nn

import exporter
from exporter.api import export_program
from exporter.contract.keys import BAKED_SIZES_KEY
from exporter.errors import ExportError, ExportWarning
from exporter.optimize import baked_sizes


class PaddedToFour(nn.Module):
    """Pads the longer side to a multiple of 4, reading it as a Python int: the capture fixes
    the size (a guard on max(batch, length)) and `arange` is made at the traced size."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        padded = int(math.ceil(float(max(x.shape[0], x.shape[1])) / 4) * 4)  # the planted bug
        return x.sum(1, keepdim=True) + torch.arange(padded, dtype=x.dtype)


class PaddedToFourInTheGraph(nn.Module):
    """The same padding computed on SymInts: nothing is fixed, nothing is baked."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        longest = torch.sym_max(x.shape[0], x.shape[1])
        return x.sum(1, keepdim=True) + torch.arange((longest + 3) // 4 * 4, dtype=x.dtype)


class Positions(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.arange(x.shape[0], dtype=x.dtype)[:, None]


def _traced_batch(g, self, dim):
    """A planted translation bug: `x.shape[0]` folded to the traced batch (5) instead of Shape."""
    return g.constant(5, torch.int64)


AXES = {"x": {0: "batch", 1: "length"}}


def _export(model: nn.Module, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = export_program(model, (torch.randn(5, 6),), input_names=["x"], dynamic_axes=AXES, **options)
    baked_warnings = [str(w.message) for w in caught
                      if issubclass(w.category, ExportWarning) and "depend on a dynamic axis" in str(w.message)]
    return result, baked_warnings


def test_a_size_the_capture_fixed_is_found_with_its_guard_and_the_baked_factory() -> None:
    result, messages = _export(PaddedToFour())
    fixed = baked_sizes.fixed_sizes(result.program)
    assert [(size.expression, size.value) for size in fixed] == [(str(fixed[0].expression), 6)]
    assert "Max(" in fixed[0].expression and fixed[0].frame[0].endswith("test_baked_sizes.py")
    found = baked_sizes.check_initializers(result.program, result.ir_model)
    arange = next(node.name for node in result.program.graph.nodes if "arange" in str(node.target))
    assert [(b.initializer, b.shape, b.fx_node) for b in found] == [(arange, (8,), arange)]
    assert found[0].source.endswith(f"test_baked_sizes.py:{PaddedToFour.forward.__code__.co_firstlineno + 2}")
    assert "read as the int 6" in found[0].reason
    assert len(messages) == 1 and f"'{arange}' [8]" in messages[0] and "test_baked_sizes.py" in messages[0]
    recorded = json.loads({p.key: p.value for p in result.skeleton.metadata_props}[BAKED_SIZES_KEY])
    assert [entry["fx_node"] for entry in recorded] == [arange]


def test_a_symbolic_value_folded_in_translation_is_found_naming_its_node() -> None:
    result, messages = _export(Positions(), custom_symbolics={"aten::sym_size.int": _traced_batch})
    found = baked_sizes.check_initializers(result.program, result.ir_model)
    assert found, "the folded arange over x.shape[0] was not found"
    node = result.program.graph.find_nodes(op="call_function", target=torch.ops.aten.unsqueeze.default)[0]
    assert [b.fx_node for b in found] == [node.name]
    assert "depends on the input's sizes" in found[0].reason and "s" in found[0].reason
    assert len(messages) == 1 and repr(node.name) in messages[0]


def test_strict_dynamic_refuses_a_baked_size() -> None:
    # capture refuses first: the size int() fixed is named with its value and the user's line
    with pytest.raises(ExportError, match=r"max\(x\.shape\[1\], x\.shape\[0\]\) is exported as the constant 6 "
                                          r"\(its value at the traced shapes\) at tests/test_baked_sizes\.py:\d+"):
        exporter.export(PaddedToFour(), (torch.randn(5, 6),), input_names=["x"], dynamic_axes=AXES,
                        strict_dynamic=True)


@pytest.mark.parametrize("model", [PaddedToFourInTheGraph(), Positions()], ids=["padded", "positions"])
def test_sizes_computed_in_the_graph_are_not_reported(model: nn.Module) -> None:
    result, messages = _export(model)
    assert baked_sizes.fixed_sizes(result.program) == []
    assert messages == []
    assert BAKED_SIZES_KEY not in {p.key for p in result.skeleton.metadata_props}
