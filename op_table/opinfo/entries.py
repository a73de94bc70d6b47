"""Which OpInfo entries run for which registered overloads, and their samples.

For each registered overload, the candidate entries of
`torch.testing._internal.common_methods_invocations.op_db` are those named after it (its ATen
name, or `nn.functional.<name>`, or an alias below). Kernel forms (`forms.DIRECT_CALLS`) add
the public op's entries under `direct_key`; the recurrent modules add ModuleInfo entries.
Samples are generated under a fixed seed (SAMPLE_SEED), so their values repeat across runs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import torch

from exporter.translate.registry import BUILTINS
from op_table.opinfo.forms import (
    DIRECT_CALLS, DIRECT_KEY_SEPARATOR, MODULE_PREFIX, MODULE_TARGETS, DirectCall, ModuleEntry, direct_key,
    module_entries,
)

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64)
SAMPLE_SEED = 0  # OpInfo's sample generators draw from torch's global RNG
MAX_SAMPLES = 12  # per entry and dtype: OpInfo lists up to ~50; the first ones are the varied ones

# OpInfo names for overloads whose own name is not an OpInfo entry's.
ALIASES: dict[str, tuple[str, ...]] = {
    "_adaptive_avg_pool2d": ("nn.functional.adaptive_avg_pool2d",),
    "_adaptive_avg_pool3d": ("nn.functional.adaptive_avg_pool3d",),
    "_log_softmax": ("log_softmax",),
    "_softmax": ("softmax",),
    "_native_batch_norm_legit_no_training": ("nn.functional.batch_norm",),
    "_native_batch_norm_legit": ("nn.functional.batch_norm",),
    "_pad_circular": ("nn.functional.pad",),
    "reflection_pad1d": ("nn.functional.pad",), "reflection_pad2d": ("nn.functional.pad",),
    "reflection_pad3d": ("nn.functional.pad",), "replication_pad1d": ("nn.functional.pad",),
    "replication_pad2d": ("nn.functional.pad",), "replication_pad3d": ("nn.functional.pad",),
    "constant_pad_nd": ("nn.functional.pad",),
    "_to_copy": ("to",), "_unsafe_view": ("view", "reshape"), "view": ("view", "reshape", "flatten"),
    "convolution": ("nn.functional.conv2d", "nn.functional.conv_transpose2d"),
    "copy": ("copy_",), "index": ("__getitem__",),
    "max_pool1d_with_indices": ("nn.functional.max_pool1d",),
    "max_pool2d_with_indices": ("nn.functional.max_pool2d",),
    "max_pool3d_with_indices": ("nn.functional.max_pool3d",),
    "upsample_nearest1d": ("nn.functional.interpolate",), "upsample_nearest2d": ("nn.functional.interpolate",),
    "upsample_nearest3d": ("nn.functional.interpolate",), "upsample_linear1d": ("nn.functional.interpolate",),
    "upsample_bilinear2d": ("nn.functional.interpolate", "nn.functional.upsample_bilinear"),
    "upsample_trilinear3d": ("nn.functional.interpolate",), "upsample_bicubic2d": ("nn.functional.interpolate",),
    "grid_sampler_2d": ("nn.functional.grid_sample",),
    "native_layer_norm": ("nn.functional.layer_norm",), "native_group_norm": ("nn.functional.group_norm",),
    "slice": ("__getitem__", "narrow"), "select": ("__getitem__", "select"),
    "embedding_renorm": ("nn.functional.embedding",),
    "clamp_min": ("clamp_min", "clamp"), "clamp_max": ("clamp_max", "clamp"),
    "full": ("full", "zeros", "ones", "new_full", "new_zeros", "new_ones"),
    "full_like": ("full_like", "zeros_like", "ones_like"),
    "arange": ("arange",), "max": ("max.reduction_no_dim", "max.reduction_with_dim", "max.binary"),
    "min": ("min.reduction_no_dim", "min.reduction_with_dim", "min.binary"),
    "_trilinear": ("nn.functional.bilinear",),
    "_linalg_det": ("linalg.det",), "_linalg_slogdet": ("linalg.slogdet", "logdet"),
}


def registered_targets() -> list[str]:
    """The ATen overloads the registry translates."""
    return [t for t in BUILTINS.targets() if t.startswith("aten.")]


def resolve(key: str) -> tuple[Any, DirectCall | None]:
    """The OpInfo entry and kernel form (None for the entry's own op) a results key names."""
    if key.startswith(MODULE_PREFIX):
        return module_entries()[key], None
    name, _, target = key.partition(DIRECT_KEY_SEPARATOR)
    entry = next(e for e in op_db() if entry_key(e) == name)
    call = next((c for c in DIRECT_CALLS if c.target == target), None) if target else None
    return entry, call


@functools.cache
def op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db as database

    return list(database)


def entry_key(entry: Any) -> str:
    return f"{entry.name}.{entry.variant_test_name}" if entry.variant_test_name else entry.name


def candidates(target: str) -> list[Any]:
    """The OpInfo entries whose samples may exercise `target` ("aten.add.Tensor")."""
    base = target.split(".")[1]
    names = {base, f"nn.functional.{base}", *ALIASES.get(base, ())}
    return [e for e in op_db() if e.name in names or e.aten_name == base or entry_key(e) in names]


def sample_dtypes(entry: Any) -> list[torch.dtype]:
    supported = entry.supported_dtypes("cpu")
    return [dtype for dtype in DTYPES if dtype in supported]



def samples_of(entry: Any, dtype: torch.dtype, max_samples: int, call: DirectCall | None = None) -> list[Any]:
    """The samples the sweep runs: the entry's first `max_samples`; for a kernel form, every
    sample (its adapter skips those that do not fit, so the first ones may all be skipped); for
    a module, every sample (ModuleInfo lists few, and nn.RNN's tanh ones come after its relu ones)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SAMPLE_SEED)
        samples = list(entry.sample_inputs("cpu", dtype, requires_grad=False))
    return samples if call is not None or isinstance(entry, ModuleEntry) else samples[:max_samples]


def entries_for(targets: Iterable[str]) -> dict[str, tuple[Any, set[str]]]:
    """results key -> (entry, the overloads it is run for): the entries named after each
    overload, and for each kernel form, its entries keyed by `direct_key`."""
    return dict(_entries_for(tuple(targets)))


@functools.cache
def _entries_for(targets: tuple[str, ...]) -> dict[str, tuple[Any, set[str]]]:
    table: dict[str, tuple[Any, set[str]]] = {}
    for target in targets:
        for entry in candidates(target):
            table.setdefault(entry_key(entry), (entry, set()))[1].add(target)
    by_key = {entry_key(e): e for e in op_db()}
    for call in DIRECT_CALLS:
        if call.target in targets:
            for name in call.entries:
                table[direct_key(name, call.target)] = (by_key[name], {call.target})
    for key, entry in module_entries().items():
        claimed = {t for t in MODULE_TARGETS[entry.info.module_cls.__name__] if t in targets}
        if claimed:
            table[key] = (entry, claimed)
    return table
