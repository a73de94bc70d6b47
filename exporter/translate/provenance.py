"""Provenance of FX nodes: module scope in the seed's form and the user's source line, the
values of the node metadata (keys in exporter.contract.keys) the translator writes."""

from __future__ import annotations

import os
import re

import torch.fx

from exporter.capturing.frames import is_user_file, short_path

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


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
    user = [f for f in frames if is_user_file(f[0], strict=False)]
    if user:
        file, line = user[-1]
    else:  # a module defined inside torch itself; skip torch's own tracing machinery
        machinery = ("torch/fx/", "torch/_", "torch/export/")
        inner = [f for f in frames if not any(m in f[0].replace(os.sep, "/") for m in machinery)]
        if not inner:
            return ""
        file, line = inner[-1]
    return f"{short_path(file)}:{line}"
