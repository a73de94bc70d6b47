"""Provenance of FX nodes: module scope in the seed's form and the user's source line."""

from __future__ import annotations

import os
import re
import site
import sys
from functools import lru_cache
from typing import Any

import torch.fx

# Metadata keys every emitted ONNX node carries (docs/ARCHITECTURE.md, "Provenance").
FX_NODE_KEY = "roundtrip.fx_node"
ATEN_KEY = "roundtrip.aten"
SCOPE_KEY = "roundtrip.scope"
SOURCE_KEY = "roundtrip.source"
# A node that stands for several FX nodes after optimisation (a folded BatchNorm, a fused
# activation): JSON list of {"fx_node", "aten", "scope", "source"} in graph order; its
# roundtrip.fx_node is the last member, whose output the node computes.
REGION_KEY = "roundtrip.region"
# A node the exporter wrapped in Casts because ONNX does not define it for the dtype at the
# target opset: "bfloat16->float32: <why>".
CAST_KEY = "roundtrip.cast"
# Model metadata: JSON {initializer name: FX node} for FX values folded into initializers at export.
FOLDED_VALUES_KEY = "roundtrip.folded_values"
# Model metadata: JSON {value name: value name} for FX values the optimisation stage merged into
# another value that carries the same data (a removed Identity/no-op, a shared sub-expression).
ALIASED_VALUES_KEY = "roundtrip.aliased_values"
# Model metadata: "true" when the optimisation stage ran (export(optimize=True)), else "false".
OPTIMIZED_KEY = "roundtrip.optimized"
# Model metadata: JSON list of {"expression", "fx_node", "source"}, one per runtime check of the
# program (a guard torch.export could not prove for every size) that the ONNX model does not carry.
DROPPED_CHECKS_KEY = "roundtrip.dropped_checks"

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def scope_of(node: torch.fx.Node, root_name: str) -> str:
    """`AlexNet/Sequential[features]/Conv2d[0]` from the node's nn_module_stack."""
    parts = [root_name]
    previous = ""
    for path, module_type in (node.meta.get("nn_module_stack") or {}).values():
        if not path or path == previous:
            continue
        if previous and path.startswith(previous + "."):
            attribute = path[len(previous) + 1 :]
        else:
            attribute = path
        type_name = module_type if isinstance(module_type, str) else getattr(module_type, "__qualname__", "")
        type_name = type_name.rsplit(".", 1)[-1]
        if "_empty_nn_module_stack" in type_name:
            continue
        parts.append(f"{type_name}[{attribute}]")
        previous = path
    return "/".join(parts)


def source_of(node: torch.fx.Node) -> str:
    """`file:line` of the innermost frame of the stack trace outside torch itself."""
    trace = node.meta.get("stack_trace") or ""
    frames = [(m["file"], int(m["line"])) for m in _FRAME.finditer(trace)]
    if not frames:
        return ""
    user = [f for f in frames if not _inside_torch(f[0])]
    if user:
        file, line = user[-1]
    else:  # a module defined inside torch itself; skip torch's own tracing machinery
        machinery = ("torch/fx/", "torch/_", "torch/export/")
        inner = [f for f in frames if not any(m in f[0].replace(os.sep, "/") for m in machinery)]
        if not inner:
            return ""
        file, line = inner[-1]
    return f"{_short_path(file)}:{line}"


def _inside_torch(file: str) -> bool:
    return os.path.abspath(file).startswith(_TORCH_DIR) or file.replace(os.sep, "/").startswith("torch/")


@lru_cache(maxsize=4096)
def _short_path(file: str) -> str:
    """Path relative to the working directory, or to site-packages for installed code."""
    absolute = os.path.abspath(file)
    for root in _site_roots():
        if absolute.startswith(root):
            return absolute[len(root) :]
    cwd = os.getcwd() + os.sep
    if absolute.startswith(cwd):
        return absolute[len(cwd) :]
    return file


@lru_cache(maxsize=1)
def _site_roots() -> tuple[str, ...]:
    roots = list(site.getsitepackages()) + [site.getusersitepackages()]
    roots += [p for p in sys.path if p.endswith("site-packages")]
    return tuple(sorted({os.path.abspath(r) + os.sep for r in roots}, key=len, reverse=True))


def dropped_checks(model: Any) -> list[dict[str, str]]:
    """The runtime checks an onnx.ModelProto's exporter left out (`DROPPED_CHECKS_KEY`), [] if none."""
    import json

    for entry in model.metadata_props:
        if entry.key == DROPPED_CHECKS_KEY:
            return list(json.loads(entry.value))
    return []


def describe_check(check: dict[str, str]) -> str:
    """One line for a dropped check: what it requires and the user's line it comes from."""
    where = f" ({check['source']})" if check.get("source") else ""
    return (f"runtime check not in the ONNX model: {check['expression']}{where}; torch.export could not "
            "prove it for every size, and inputs that break it run without an error")
