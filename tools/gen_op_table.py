"""Write docs/OPERATORS.md: every built-in symbolic, what it implements and what it emits.

One row per registered ATen overload: the seed-list operator(s) it implements, the ONNX ops it
emits (collected by exporting the operator table's rows, grouped by node provenance), the opsets
it covers (one range per registered function), its OpInfo samples passing / run per dtype (read
from docs/opinfo.json, which tools/opinfo_sweep.py records) and its remaining limits (the `Limits:` paragraph
of the symbolic's docstring). Rows marked xfail or refused in the table are listed too.

All rows are exported as ONE module (one torch.export capture, the slow part) and converted
once per opset where a symbolic changes, so generation takes seconds and is deterministic.

    python tools/gen_op_table.py          # rewrite docs/OPERATORS.md
    python tools/gen_op_table.py --check  # exit 1 when the file is stale
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import onnx
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import exporter  # noqa: E402
from exporter.translate.registry import BUILTINS, MAX_OPSET  # noqa: E402
from op_table.schema import OpCase  # noqa: E402
from op_table.seed_ops import SEED_LIST, SEED_OPERATORS, seed_name, seed_names_by_target  # noqa: E402
from op_table.table import ATEN_KEY, all_cases, build_sample  # noqa: E402

OUTPUT = ROOT / "docs" / "OPERATORS.md"
OPINFO_RESULTS = ROOT / "docs" / "opinfo.json"  # recorded by tools/opinfo_sweep.py
TORCHLIB_GAP = ROOT / "docs" / "torchlib_gap.json"  # measured by tools/torchlib_gap.py
OPINFO_DTYPES = (("float32", "f32"), ("float16", "f16"), ("bfloat16", "bf16"), ("int64", "i64"))


class _AllRows(torch.nn.Module):
    """Every exportable row's module side by side; forward takes all rows' inputs in order."""

    def __init__(self, modules: Sequence[torch.nn.Module], arities: Sequence[int]) -> None:
        super().__init__()
        self.rows = torch.nn.ModuleList(modules)
        self.arities = list(arities)

    def forward(self, *args: Any) -> tuple[Any, ...]:
        outputs, start = [], 0
        for module, arity in zip(self.rows, self.arities):
            outputs.append(module(*args[start:start + arity]))
            start += arity
        return tuple(outputs)


def exportable_rows(cases: Iterable[OpCase]) -> list[OpCase]:
    return [c for c in cases if not (c.xfail or c.refused)]


def _combined(rows: Sequence[OpCase]) -> tuple[_AllRows, tuple[Any, ...], dict[str, dict[int, str]]]:
    """The rows as one module, its inputs, and their dynamic axes renamed per row."""
    samples = [build_sample(case) for case in rows]
    args: list[Any] = []
    dynamic_axes: dict[str, dict[int, str]] = {}
    for case, sample in zip(rows, samples):
        names = _input_names(sample.module, len(sample.args))
        for name, axes in (case.dynamic_axes or {}).items():
            index = len(args) + names.index(name)
            dynamic_axes[f"args_{index}"] = {int(a): f"{case.name}__{d}" for a, d in axes.items()}
        args += sample.args
    module = _AllRows([s.module for s in samples], [len(s.args) for s in samples])
    return module, tuple(args), dynamic_axes


def _input_names(module: torch.nn.Module, count: int) -> list[str]:
    """The names export gives a module's inputs: forward's parameters, `args_<i>` for *args."""
    names = []
    for parameter in inspect.signature(module.forward).parameters.values():
        if parameter.kind == parameter.VAR_POSITIONAL:
            return names + [f"{parameter.name}_{i}" for i in range(len(names), count)]
        names.append(parameter.name)
    return names[:count]


def _ops_of(model: onnx.ModelProto) -> dict[str, set[str]]:
    ops: dict[str, set[str]] = {}
    for node in model.graph.node:
        target = next((p.value for p in node.metadata_props if p.key == ATEN_KEY), None)
        if target and node.op_type != "Constant":  # operands, not the op's work
            ops.setdefault(target, set()).add(f"{node.domain}::{node.op_type}" if node.domain else node.op_type)
    return ops


def collect_onnx_ops(rows: Sequence[OpCase], opsets: Sequence[int]) -> dict[int, dict[str, set[str]]]:
    """opset -> ATen overload -> ONNX op types, from one capture per group of rows that start
    at the same opset (nearly all start at the lowest); a group is converted at the opsets it runs at."""
    groups: dict[int, list[OpCase]] = {}
    for case in rows:
        groups.setdefault(min(case.opsets), []).append(case)
    collected: dict[int, dict[str, set[str]]] = {opset: {} for opset in opsets}
    for first, group in sorted(groups.items()):
        module, args, dynamic_axes = _combined(group)
        with warnings.catch_warnings():  # the rows' own export warnings belong to their tests
            warnings.simplefilter("ignore")
            program = exporter.capture(module, args, dynamic_axes=dynamic_axes or None)
        for opset in opsets:
            if opset >= first:
                for target, ops in _ops_of(exporter.convert(program, opset_version=opset)).items():
                    collected[opset].setdefault(target, set()).update(ops)
    return collected


def opset_ranges(target: str) -> list[tuple[int, int]]:
    """One (first, last) range per registered function of `target`."""
    starts = [entry.since_opset for entry in BUILTINS.entries(target)]
    return [(start, (starts[i + 1] - 1) if i + 1 < len(starts) else MAX_OPSET) for i, start in enumerate(starts)]


def limits_of(fn: Callable[..., Any]) -> list[str]:
    """The `Limits:` paragraph of a symbolic's docstring, as one line."""
    doc = inspect.getdoc(fn) or ""
    paragraphs = [" ".join(p.split()) for p in doc.split("\n\n")]
    found = []
    for paragraph in paragraphs:
        for line in [paragraph[paragraph.index("Limits:"):]] if "Limits:" in paragraph else []:
            found.append(line.removeprefix("Limits:").strip())
    return found


def _range_text(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _ops_cell(target: str, ranges: list[tuple[int, int]], collected: dict[int, dict[str, set[str]]]) -> str:
    per_range = [(r, ", ".join(sorted(collected[r[0]].get(target, ())))) for r in ranges]
    if len({ops for _, ops in per_range}) == 1:
        return per_range[0][1] or "(none)"
    return "; ".join(f"{_range_text(*r)}: {ops or '(none)'}" for r, ops in per_range)


def load_opinfo_summary(path: Path = OPINFO_RESULTS) -> dict[str, dict[str, list[int]]]:
    """overload -> dtype -> [passed, total] of the recorded OpInfo sweep ({} if none is recorded)."""
    if not path.exists():
        return {}
    return json.loads(path.read_text()).get("summary", {})


def _opinfo_cell(per_dtype: dict[str, list[int]] | None) -> str:
    if not per_dtype:
        return "no samples"
    return ", ".join(f"{short} {per_dtype[name][0]}/{per_dtype[name][1]}"
                     for name, short in OPINFO_DTYPES if name in per_dtype)


def load_torchlib_gap(path: Path = TORCHLIB_GAP) -> dict[str, Any]:
    """The recorded comparison with onnxscript's torch_lib ({} if none is recorded)."""
    return json.loads(path.read_text()) if path.exists() else {}


def _torchlib_cell(target: str, torchlib: set[str]) -> str:
    if not target.startswith("aten."):
        return "-"
    return "yes" if target in torchlib else "no"


def render_torchlib_gap(gap: dict[str, Any]) -> list[str]:
    """The section listing every overload torch_lib translates and we do not, with its reason."""
    if not gap:
        return []
    counts = ", ".join(f"{category} {count}" for category, count in gap["gap_by_category"].items())
    lines = [
        "", "## Compared with onnxscript's torch_lib", "",
        "Measured by `python tools/torchlib_gap.py` (`docs/torchlib_gap.json`) against onnxscript",
        f"{gap['onnxscript']}'s torch_lib on torch {gap['torch']}: torch_lib registers {gap['torchlib_overloads']}",
        f"ATen overloads, this registry {gap['our_overloads']}; {gap['both']} are in both, {len(gap['ours_only'])}",
        f"only here. {gap['gap_count']} of torch_lib's are not registered here: {counts}.",
        "'decomposed at capture' overloads reach the registry as the ATen ops torch.export's",
        "decomposition rewrites them into.",
        "", "| torch_lib overload not registered here | Category | Reason |", "|---|---|---|",
    ]
    lines += [f"| `{item['target']}` | {item['category']} | {item['reason'].partition(': ')[2] or item['reason']} |"
              for item in gap["gap"]]
    return lines


def render(cases: Sequence[OpCase], collected: dict[int, dict[str, set[str]]],
           opinfo: dict[str, dict[str, list[int]]] | None = None, gap: dict[str, Any] | None = None) -> str:
    opinfo = opinfo or {}
    gap = gap or {}
    torchlib = set(gap.get("torchlib", ()))
    seed_names = seed_names_by_target()
    lines = [
        "# Operators",
        "",
        "Generated by `python tools/gen_op_table.py` from the registry and the operator table",
        "(`op_table/cases_*.py`); do not edit by hand. ONNX ops are those the table's rows",
        "emit, read off the nodes' `roundtrip.aten` provenance (Constant nodes, which only hold",
        "operands, are left out); an opset range with its own symbolic function is listed",
        "separately when its ops differ. Limits come from the symbolics' `Limits:` docstrings.",
        "OpInfo is the recorded sweep of PyTorch's OpInfo samples (`docs/opinfo.json`, written by",
        "`python tools/opinfo_sweep.py`): samples passing / run per dtype, exported at opset 18, run",
        "on onnxruntime CPU (bfloat16: on `onnx.reference` where onnxruntime's CPU provider has no",
        "bfloat16 kernel, as for most ops) and judged as the harness judges an op: its tolerance rows",
        "and its verdict against the fp64 truth; a random op's draw by its law, an op's indices",
        "through the values they select, a nearest grid sample's picks on .5 ties by either neighbour, `torch.empty` by",
        "shape and dtype. Overloads that capture never records",
        "from a public call (`_softmax`, `convolution`, `add.Scalar`, ...) run the public op's samples",
        "through the kernel form, a Python number taken from the sample's other operand where the",
        "form takes a Scalar. 'no samples' where no OpInfo entry reaches the overload (the `_operator`",
        "rows are SymInt arithmetic on dynamic sizes; tests/test_opinfo.py says why for the others).",
        "torch_lib: whether onnxscript's torch_lib registers the overload too (see the section at the end).",
        "",
        "| ATen overload | Seed operator | ONNX ops | Opsets | OpInfo samples | torch_lib | Limits |",
        "|---|---|---|---|---|---|---|",
    ]
    for target in BUILTINS.targets():
        ranges = opset_ranges(target)
        limits = sorted({text for entry in BUILTINS.entries(target) for text in limits_of(entry.fn)})
        lines.append(
            f"| `{target}` | {', '.join(seed_names.get(target, [])) or '-'} | {_ops_cell(target, ranges, collected)} "
            f"| {', '.join(_range_text(*r) for r in ranges)} | {_opinfo_cell(opinfo.get(target))} "
            f"| {_torchlib_cell(target, torchlib)} "
            f"| {' '.join(limits) or '-'} |"
        )
    lines += ["", "## The seed's operator list", "", "| Seed operator (as the seed lists it) | ATen overloads today |", "|---|---|"]
    for line in SEED_LIST:
        targets = SEED_OPERATORS[seed_name(line)]
        shown = ", ".join(f"`{t}`" for t in targets) or "none: torch.export leaves no op for it in eval mode"
        lines.append(f"| {line} | {shown} |")
    lines += ["", "## Known limitations (table rows marked xfail or refused)", "", "| Row | Targets | Status | Reason |", "|---|---|---|---|"]
    for case in sorted((c for c in cases if c.xfail or c.refused), key=lambda c: c.name):
        status, reason = ("xfail", case.xfail) if case.xfail else ("refused", case.refused)
        lines.append(f"| `{case.name}` | {', '.join(f'`{t}`' for t in case.targets)} | {status} | {reason} |")
    lines += render_torchlib_gap(gap)
    return "\n".join(lines) + "\n"


def generate() -> str:
    """The text of docs/OPERATORS.md for the current registry and table."""
    cases = all_cases()
    opsets = sorted({entry.since_opset for t in BUILTINS.targets() for entry in BUILTINS.entries(t)})
    return render(cases, collect_onnx_ops(exportable_rows(cases), opsets), load_opinfo_summary(), load_torchlib_gap())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/OPERATORS.md is stale")
    options = parser.parse_args(argv)
    text = generate()
    if options.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            sys.stderr.write(f"{OUTPUT.relative_to(ROOT)} is stale: run python tools/gen_op_table.py\n")
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
