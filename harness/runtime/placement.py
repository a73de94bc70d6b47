"""Which execution provider ran each node: onnxruntime's profile of a run, read back.

A CUDA session may place nodes on the CPU provider (no CUDA kernel for the op or type); a
verification on CUDA reports those nodes instead of accepting them silently.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from harness.runtime.sessions import BackendRep


def node_placement(rep: BackendRep, inputs: Any = None) -> dict[str, str]:
    """{node name: execution provider} as onnxruntime placed the nodes of the optimised graph.

    The rep must have been prepared with `profile=True`. `inputs` are run once first; pass None
    when the rep has already run (the profile of those runs is read).
    """
    if rep.device.kind == "reference":
        raise ValueError("node placement is an onnxruntime notion; the reference evaluator has none")
    if not rep.session.get_session_options().enable_profiling:
        raise ValueError("node_placement needs a rep prepared with profile=True")
    if inputs is not None:
        rep.run(inputs)
    path = rep.session.end_profiling()
    try:
        with open(path) as handle:
            events = json.load(handle)
    finally:
        os.unlink(path)
        try:
            os.rmdir(os.path.dirname(path))
        except OSError:
            pass
    return parse_profile(events)


def parse_profile(events: list[dict[str, Any]]) -> dict[str, str]:
    """{node name: provider} from onnxruntime's profile events (Chrome trace format): one
    `cat == "Node"` event named `<node>_kernel_time` (also `_fence_before/_after`) per node run,
    whose args carry `provider` and `op_name`."""
    placement: dict[str, str] = {}
    for event in events:
        args = event.get("args") or {}
        if event.get("cat") != "Node" or "provider" not in args:
            continue
        name = event.get("name", "")
        for suffix in ("_kernel_time", "_fence_before", "_fence_after"):
            name = name.removesuffix(suffix)
        placement[name] = args["provider"]
    return placement


def cpu_placed_nodes(placement: Mapping[str, str]) -> list[str]:
    """Nodes a CUDA session ran on the CPU provider."""
    return sorted(name for name, provider in placement.items() if provider == "CPUExecutionProvider")
