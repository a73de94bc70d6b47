"""Where cases come from, and how a run splits them into shards.

A case is described by plain data (a `Task`) that a worker process turns back into a model:

* zoo:     a model_zoo_cases case by name;
* factory: `package.module:function`, a function returning `(module, args)` or a mapping with
           `module`, `args` and optionally `other_args` (a second input size), `dynamic_axes`,
           `input_names`, `atol`, `rtol`;
* onnx:    an ONNX file, with inputs (and optionally expected outputs) from .npz files.

`shard(tasks, k, n)` is deterministic and cost-balanced: tasks are dealt, most expensive
first, to the shard with the least cost so far.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.cli.errors import UsageError
from harness.cli.npz_inputs import check_expected, check_inputs


@dataclass
class Task:
    """One case to verify, as plain data a worker process can rebuild it from."""

    name: str
    origin: dict[str, Any]
    position: int = 0
    cost: float = 1.0
    family: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Built:
    """What a worker verifies: a module and its args (or an ONNX file), and how to judge it."""

    module: Any = None
    args: tuple[Any, ...] = ()
    other_args: tuple[Any, ...] | None = None
    sizes: list[str] = field(default_factory=lambda: ["traced"])
    options: dict[str, Any] = field(default_factory=dict)  # verify() keyword arguments
    onnx_path: str | None = None
    inputs: Any = None
    expected: Any = None
    float_module: Any = None  # a quantized case's float module: the quantization cost is measured against it
    sweep_axes: dict[str, Any] | None = None  # the dynamic axes exported for a shape sweep (default: options')
    axis_ranges: dict[str, Any] = field(default_factory=dict)  # {axis: (lowest, highest)} a sweep stays inside
    # A zoo case verified at given sizes of its dynamic axes ({axis: size}) instead of other_args:
    # the same ONNX model, inputs drawn there by `sized_inputs(sizes)` (harness.shapes' sweep).
    other_sizes: list[dict[str, int]] = field(default_factory=list)
    sized_inputs: Any = None


def zoo_tasks(*, tier: str, pattern: str | None) -> list[Task]:
    """The zoo cases a run selects, in table order, costed by their parameter counts."""
    import model_zoo_cases

    try:
        cases = model_zoo_cases.select(tier=None if pattern else tier, pattern=pattern)
    except KeyError as error:
        raise UsageError(str(error).strip("'\"")) from None
    if not cases:
        raise UsageError(f"no case matches {pattern!r}; see model_zoo_cases.CASES")
    return [Task(case.name, {"kind": "zoo", "case": case.name}, index,
                 float(case.measured.params) if case.measured else 1.0, case.family)
            for index, case in enumerate(cases)]


def target_tasks(targets: Sequence[str], *, inputs: str | None, expected: str | None) -> list[Task]:
    """Tasks for `roundtrip verify` targets: ONNX files and `package.module:factory` names."""
    tasks: list[Task] = []
    onnx_targets = [t for t in targets if t.endswith(".onnx") or os.path.isfile(t)]
    if (inputs or expected) and len(onnx_targets) != 1:
        raise UsageError("--inputs and --expected go with exactly one ONNX file target")
    names: set[str] = set()
    for index, target in enumerate(targets):
        if target in onnx_targets:
            if not os.path.isfile(target):
                raise UsageError(f"no ONNX file at {target}")
            for label, path in (("--inputs", inputs), ("--expected", expected)):
                if path and not os.path.isfile(path):
                    raise UsageError(f"{label} {path}: no such file (an .npz of arrays by input/output name)")
            if inputs:
                check_inputs(target, inputs)
            if expected:
                check_expected(target, expected)
            origin = {"kind": "onnx", "path": os.path.abspath(target),
                      "inputs": os.path.abspath(inputs) if inputs else None,
                      "expected": os.path.abspath(expected) if expected else None}
            name = os.path.splitext(os.path.basename(target))[0]
        elif ":" in target and all(part.isidentifier() for part in target.split(":", 1)[0].split(".")):
            origin = {"kind": "factory", "target": target, "cwd": os.getcwd()}
            name = target
        else:
            raise UsageError(f"{target!r} is neither an ONNX file nor a package.module:factory name")
        unique, suffix = name, 2
        while unique in names:
            unique, suffix = f"{name}-{suffix}", suffix + 1
        names.add(unique)
        tasks.append(Task(unique, origin, index))
    return tasks


def apply_costs(tasks: list[Task], recorded: Mapping[str, float]) -> None:
    """Use recorded seconds (a baseline's) as costs when they cover every task, so the units
    never mix; otherwise keep the estimates the tasks came with."""
    if tasks and all(recorded.get(task.name) for task in tasks):
        for task in tasks:
            task.cost = float(recorded[task.name])


def shard(tasks: Sequence[Task], index: int, count: int) -> list[Task]:
    """Shard `index` (1-based) of `count`: a deterministic, cost-balanced slice, in task order."""
    if not 1 <= index <= count:
        raise UsageError(f"--shard {index}/{count}: K must be between 1 and N")
    loads = [0.0] * count
    owner: dict[str, int] = {}
    for task in sorted(tasks, key=lambda t: (-t.cost, t.name)):
        lightest = min(range(count), key=lambda s: (loads[s], s))
        loads[lightest] += task.cost
        owner[task.name] = lightest
    return [task for task in tasks if owner[task.name] == index - 1]


def parse_shard(text: str) -> tuple[int, int]:
    """'K/N' -> (K, N)."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard {text!r}: expected K/N, e.g. 2/4") from None
    if count < 1 or not 1 <= index <= count:
        raise UsageError(f"--shard {text}: need 1 <= K <= N")
    return index, count


# --- in the worker: rebuild a task's model -------------------------------------------------


def _zoo(origin: Mapping[str, Any], seed: int) -> Built:
    import model_zoo_cases

    case = model_zoo_cases.get(origin["case"])
    args = case.inputs(seed)
    if case.other_sizes:
        other_args, sizes = None, [_size_label(case, args)] + [_sizes_text(s) for s in case.other_sizes]
    else:
        other_args = case.other_inputs(seed + 1)
        sizes = [_size_label(case, args), _size_label(case, other_args)]
    atol, rtol = case.output_tolerance()
    return Built(
        module=case.module(seed), args=args, other_args=other_args, sizes=sizes,
        float_module=case.float_module(seed) if case.quantization is not None else None,
        other_sizes=[dict(s) for s in case.other_sizes],
        sized_inputs=(lambda point: case.inputs_at(point, seed + 1)) if case.other_sizes else None,
        options=dict(dynamic_axes={k: v for k, v in case.dynamic_axes.items() if k in case.input_names},
                     input_names=case.input_names, output_atol=atol, output_rtol=rtol,
                     allowed_mismatch=case.allowed_mismatch_fraction),
        sweep_axes=case.swept_axes(), axis_ranges=dict(case.axis_ranges),
    )


def _sizes_text(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{axis} {size}" for axis, size in sizes.items())


def _size_label(case: Any, args: Sequence[Any]) -> str:
    """'batch 3, sequence 10': the size of every dynamic axis of the case's inputs."""
    sizes: dict[str, int] = {}
    for name, arg in zip(case.input_names, args):
        for dim, axis in case.dynamic_axes.get(name, {}).items():
            sizes.setdefault(axis, int(arg.shape[dim]))
    return ", ".join(f"{axis} {size}" for axis, size in sizes.items()) or "traced"


def load_factory(target: str, cwd: str | None = None) -> Any:
    """The function named by `package.module:function` (the working directory importable)."""
    module_name, _, attribute = target.partition(":")
    if cwd and cwd not in sys.path:
        sys.path.insert(0, cwd)
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise AttributeError(f"module {module_name} has no {attribute!r}") from None


_FACTORY_OPTIONS = {"dynamic_axes": "dynamic_axes", "input_names": "input_names", "atol": "output_atol",
                    "rtol": "output_rtol"}


def _factory(origin: Mapping[str, Any]) -> Built:
    made = load_factory(origin["target"], origin.get("cwd"))()
    if isinstance(made, Mapping):
        unknown = set(made) - {"module", "args", "other_args", "axis_ranges"} - set(_FACTORY_OPTIONS)
        if unknown or "module" not in made or "args" not in made:
            raise TypeError(f"{origin['target']} returned a mapping with keys {sorted(made)}; expected 'module', "
                            f"'args' and optionally 'other_args', 'axis_ranges', {', '.join(sorted(_FACTORY_OPTIONS))}")
        module, args, other = made["module"], made["args"], made.get("other_args")
        options = {_FACTORY_OPTIONS[k]: v for k, v in made.items() if k in _FACTORY_OPTIONS}
    elif isinstance(made, tuple) and len(made) == 2:
        (module, args), other, options = made, None, {}
    else:
        raise TypeError(f"{origin['target']} returned {type(made).__name__}; expected (module, args) or a mapping")
    ranges = dict(made.get("axis_ranges") or {}) if isinstance(made, Mapping) else {}
    return Built(module=module, args=_as_tuple(args), other_args=None if other is None else _as_tuple(other),
                 sizes=["given args", "other args"] if other is not None else ["given args"], options=options,
                 axis_ranges=ranges)


def _as_tuple(args: Any) -> tuple[Any, ...]:
    return args if isinstance(args, tuple) else (args,)


def _onnx(origin: Mapping[str, Any], seed: int) -> Built:
    import numpy as np
    import onnx

    model = onnx.load(origin["path"], load_external_data=False)
    if origin.get("inputs"):
        with np.load(origin["inputs"]) as data:
            inputs = {name: data[name] for name in data.files}
    else:
        inputs = _random_inputs(model, seed)
    expected = None
    if origin.get("expected"):
        with np.load(origin["expected"]) as data:
            expected = {name: data[name] for name in data.files}
        if all(name.startswith("arr_") for name in expected):  # np.savez(a, b): positional
            expected = [expected[f"arr_{i}"] for i in range(len(expected))]
    label = "given inputs" if origin.get("inputs") else f"random inputs (seed {seed})"
    return Built(onnx_path=origin["path"], inputs=inputs, expected=expected, sizes=[label])


def _random_inputs(model: Any, seed: int) -> dict[str, Any]:
    """Seeded N(0, 1) inputs for a model whose inputs are all floating point with static shapes."""
    import numpy as np
    from onnx import helper

    initializers = {t.name for t in model.graph.initializer}
    generator = np.random.default_rng(seed)
    inputs = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        shape = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        if dtype.kind != "f" or None in shape:
            raise ValueError(f"input {value.name!r} ({dtype}, shape {shape}) needs real values: pass --inputs in.npz")
        inputs[value.name] = generator.standard_normal(shape).astype(dtype)
    return inputs


def build(origin: Mapping[str, Any], seed: int) -> Built:
    """Rebuild a task's model in the worker."""
    kind = origin["kind"]
    if kind == "zoo":
        return _zoo(origin, seed)
    if kind == "factory":
        return _factory(origin)
    if kind == "onnx":
        return _onnx(origin, seed)
    raise ValueError(f"unknown case origin {kind!r}")
