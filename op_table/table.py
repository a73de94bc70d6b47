"""The operator table as a whole: collecting rows, building their samples, exporting them.

Shared by the runner (tests/test_ops.py), the meta-tests and tools/gen_op_table.py, so the
three agree on what a row exports.
"""

from __future__ import annotations

import copy
import json
import importlib
import pkgutil
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import torch

import exporter
from exporter.contract.keys import ATEN_KEY, REGION_KEY
from exporter.translate.registry import BUILTINS, normalize_target
from exporter.capturing.trace import forward_input_names
from exporter.capturing.signature import normalize_dynamic_axes
from harness.metrics.comparison import compare
from harness.metrics.distribution import compare_distribution

from .schema import OpCase

# A row with dynamic axes is also run with every dynamic axis this much longer than traced: a
# size baked into the graph at export then fails the row. Larger only, so index inputs that
# point into a dynamic axis stay valid; torch.export specialises sizes 0 and 1 anyway.
OTHER_SIZE_STEPS = (1, 3)


def all_cases() -> list[OpCase]:
    """Every row of every `cases_*.py` module next to this file, module by module."""
    package = importlib.import_module(__package__)
    cases: list[OpCase] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("cases_"):
            cases += importlib.import_module(f"{__package__}.{info.name}").CASES
    return cases


def case_seed(case: OpCase) -> int:
    """The row's seed: stable across processes and runs (unlike hash())."""
    return zlib.crc32(case.name.encode())


@dataclass
class Sample:
    """A row's module and inputs, built from its seed."""

    module: torch.nn.Module
    args: tuple[Any, ...]
    seed: int

    @property
    def tensor_args(self) -> list[torch.Tensor]:
        """The ONNX model's inputs: Python scalars were specialised by torch.export."""
        return [a for a in self.args if isinstance(a, torch.Tensor)]


def build_sample(case: OpCase) -> Sample:
    """Module (built under torch's RNG seeded from the row) and inputs (from a seeded generator)."""
    seed = case_seed(case)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = case.module().eval()
    args = case.inputs(torch.Generator().manual_seed(seed))
    return Sample(module, tuple(args), seed)


def expected_outputs(case: OpCase, sample: Sample) -> list[torch.Tensor]:
    """torch's outputs for the sample: the row's `reference` on the inputs when it has one,
    else the module run on a copy (a module may change its own state, e.g. max_norm)."""
    with torch.no_grad():
        if case.reference is not None:
            return flat_tensors(case.reference(*sample.args))
        return flat_tensors(copy.deepcopy(sample.module)(*sample.args))


def check_outputs(case: OpCase, actual: list[np.ndarray], expected: list[torch.Tensor], reproduce: str,
                  inputs: tuple[Any, ...] = ()) -> None:
    """The backend's outputs against torch's: as many, same dtypes and shapes, within the row's
    atol/rtol (integers and bools exactly), or, for a row with a `law`, distributed as the law
    of the `inputs` says; assertion messages start with `reproduce`."""
    assert len(actual) == len(expected), f"{reproduce}: {len(actual)} outputs, torch has {len(expected)}"
    laws = flat_laws(case.law(*inputs)) if case.law is not None else [None] * len(expected)
    for index, (got, want, law) in enumerate(zip(actual, expected, laws)):
        if law is not None:
            comparison = compare_distribution(got, want.numpy(), law, name=f"output {index}")
        else:
            comparison = compare(got, want.numpy(), atol=case.atol, rtol=case.rtol, name=f"output {index}")
        assert comparison.dtype_match, f"{reproduce}: output {index} is {got.dtype}, torch gives {want.dtype}"
        assert comparison.passed, f"{reproduce}: output {index} differs: {comparison.to_dict()}"


def flat_laws(laws: Any) -> list[Any]:
    """A row's law(s) as a list, one per output."""
    return list(laws) if isinstance(laws, (tuple, list)) else [laws]


def resized_samples(case: OpCase, sample: Sample) -> list[Sample]:
    """The row's sample with every dynamic axis at each of the other sizes: traced + step (one
    size per dim name, shared by the inputs that name it), then each of the row's `sizes`. An
    input's slices along a dynamic axis are drawn from its own slices, so values stay in the
    row's domain (indices valid, signs kept); floats are then scaled by a random factor in
    [0.9, 1.1], so no slice repeats. An axis traced empty has no slices to draw: it is filled
    afresh (normal floats, small non-negative integers, random bools)."""
    if not case.dynamic_axes:
        return []
    names = forward_input_names(sample.module, sample.args)
    axes_by_name = normalize_dynamic_axes(case.dynamic_axes)
    traced: dict[str, int] = {}
    for name, arg in zip(names, sample.args):
        for axis, dim_name in axes_by_name.get(name, {}).items():
            traced.setdefault(dim_name, arg.shape[axis])
    other_sizes = [{dim_name: size + step for dim_name, size in traced.items()} for step in OTHER_SIZE_STEPS]
    for sizes in case.sizes:
        if set(sizes) != set(traced):
            raise ValueError(f"row {case.name!r}: sizes {dict(sizes)} must name every dynamic dim {sorted(traced)}")
        other_sizes.append(dict(sizes))
    samples = []
    for index, sizes in enumerate(other_sizes):
        step = OTHER_SIZE_STEPS[index] if index < len(OTHER_SIZE_STEPS) else 100 + index
        gen = torch.Generator().manual_seed(sample.seed + step)
        args = tuple(_resized(arg, axes_by_name.get(name, {}), sizes, gen) for name, arg in zip(names, sample.args))
        samples.append(Sample(sample.module, args, sample.seed))
    return samples


def _resized(arg: Any, axes: dict[int, str], sizes: dict[str, int], gen: torch.Generator) -> Any:
    if not isinstance(arg, torch.Tensor) or not axes:
        return arg
    for axis, dim_name in axes.items():
        if arg.shape[axis] == 0:
            arg = _fresh(arg, axis, sizes[dim_name], gen)
            continue
        picks = torch.randint(0, arg.shape[axis], (sizes[dim_name],), generator=gen)
        arg = arg.index_select(axis, picks)
    if arg.is_floating_point():
        arg = arg * (0.9 + 0.2 * torch.rand(arg.shape, generator=gen)).to(arg.dtype)
    return arg


def _fresh(arg: torch.Tensor, axis: int, size: int, gen: torch.Generator) -> torch.Tensor:
    """`arg` with `axis` at `size`, filled with new values of its dtype."""
    shape = list(arg.shape)
    shape[axis] = size
    if arg.dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if arg.is_floating_point():
        return torch.randn(shape, generator=gen).to(arg.dtype)
    return torch.randint(0, 5, shape, generator=gen).to(arg.dtype)


def capture_case(case: OpCase, sample: Sample) -> torch.export.ExportedProgram:
    """The row's program: one capture serves every opset of the row."""
    return exporter.capture(sample.module, sample.args, dynamic_axes=case.dynamic_axes)


def convert_case(case: OpCase, program: torch.export.ExportedProgram, opset: int) -> exporter.ExportResult:
    """The row's program converted at `opset`, one node per op (optimize=False): a row checks
    its op's translation, which the optimisation stage could fold or fuse away."""
    return exporter.convert_program(program, opset_version=opset, dynamic_axes=case.dynamic_axes, optimize=False)

def provenance_targets(model: onnx.ModelProto) -> set[str]:
    """The ATen overloads named by the model's node provenance (an optimised node's region too)."""
    named = {p.value for node in model.graph.node for p in node.metadata_props if p.key == ATEN_KEY}
    return named | {member["aten"] for node in model.graph.node for p in node.metadata_props
                    if p.key == REGION_KEY for member in json.loads(p.value)}


def program_targets(program: torch.export.ExportedProgram) -> set[str]:
    return {normalize_target(n.target) for n in program.graph.nodes if n.op == "call_function"}


def emits_no_nodes(target: str) -> bool:
    """Whether the built-in symbolic for `target` leaves no node in the model: it translates to
    nothing (a check), or to a value only dropped runtime checks read (removed as dead code)."""
    return any(getattr(entry.fn, "emits_no_nodes", False) or getattr(entry.fn, "read_by_checks", False)
               for entry in BUILTINS.entries(target))


def flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in flat_tensors(item)]
    return []


def targets_of(cases: Iterable[OpCase]) -> set[str]:
    return {t for case in cases for t in case.targets}


def is_checked(case: OpCase) -> bool:
    """Whether the runner exports the row and checks its targets (xfail and refused rows: no)."""
    return not (case.xfail or case.refused)


def checked_targets(case: OpCase) -> tuple[str, ...]:
    """The overloads the runner asserts in the row's exported program and provenance: what the
    row covers (none for xfail and refused rows)."""
    return case.targets if is_checked(case) else ()


DROPOUT_MODULES = (torch.nn.modules.dropout._DropoutNd,)


def is_dropout_row(case: OpCase, sample: Sample) -> bool:
    """A row whose module holds a dropout layer or which targets a dropout overload: its
    eval-mode export must leave no dropout in the graph."""
    holds = any(isinstance(m, DROPOUT_MODULES) for m in sample.module.modules())
    return holds or any("dropout" in target for target in case.targets)


def dropout_left(case: OpCase, program: torch.export.ExportedProgram, model: onnx.ModelProto) -> list[str]:
    """Dropout left in an eval-mode export: ONNX Dropout nodes, and dropout overloads in the
    program other than those the row targets (native_dropout with train=False is kept whole
    and translated to an Identity)."""
    left = [f"ONNX node {node.name or node.op_type}" for node in model.graph.node if node.op_type == "Dropout"]
    left += [f"FX op {target}" for target in sorted(program_targets(program))
             if "dropout" in target and target not in case.targets]
    return left
