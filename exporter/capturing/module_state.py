"""The user's module as it was: capture leaves every submodule's attributes as it found them.

torch.export runs forward() on FakeTensors. A module that caches in forward (a detection head
storing `anchors`/`strides` for the input size it last saw, a lazily built mask) would keep
the capture's FakeTensors, and fail when the user runs it afterwards. torch restores the
attributes a module had before the trace, but not one created during it, nor the contents of
a list or dict it changed in place; and a capture that retries traces more than once. So
`module_state_kept` snapshots each submodule's attributes (its own dict, with its parameter,
buffer and submodule tables, and the lists, dicts and sets they hold) and puts them back
afterwards, in place: objects others hold references to stay the same objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

_CONTAINERS = (list, dict, set)
_DEPTH = 4  # how deep containers of containers are snapshotted


@contextmanager
def module_state_kept(model: torch.nn.Module) -> Iterator[None]:
    """Restore every submodule's attributes, and the containers they hold, when the block ends
    (whether the capture succeeded or not): attributes added are removed, replaced ones are
    put back, containers changed in place get their old contents back."""
    modules = list(model.modules())
    attributes = [(module, dict(module.__dict__)) for module in modules]
    contents: dict[int, tuple[Any, Any]] = {}
    for _, saved in attributes:
        for value in saved.values():
            _snapshot(value, contents, _DEPTH)
    try:
        yield
    finally:
        for container, items in contents.values():
            _restore(container, items)
        for module, saved in attributes:
            current = module.__dict__
            for name in [name for name in current if name not in saved]:
                del current[name]
            for name, value in saved.items():
                if current.get(name) is not value:
                    current[name] = value


def _snapshot(value: Any, contents: dict[int, tuple[Any, Any]], depth: int) -> None:
    """Record the items of `value` and of the containers inside it, `depth` levels down."""
    if depth == 0 or not isinstance(value, _CONTAINERS) or id(value) in contents:
        return
    items: Any = dict(value) if isinstance(value, dict) else list(value)
    contents[id(value)] = (value, items)
    for item in (items.values() if isinstance(items, dict) else items):
        _snapshot(item, contents, depth - 1)
    if isinstance(value, dict):
        for key in items:
            _snapshot(key, contents, depth - 1)


def _restore(container: Any, items: Any) -> None:
    """Give `container` its recorded items back, in place (identity compared, never values:
    tensors do not compare to a bool)."""
    if isinstance(container, list):
        if len(container) != len(items) or any(a is not b for a, b in zip(container, items)):
            container[:] = items
    elif isinstance(container, dict):
        if container.keys() != items.keys() or any(container[key] is not value for key, value in items.items()):
            container.clear()
            container.update(items)
    elif len(container) != len(items) or any(item not in container for item in items):
        container.clear()
        container.update(items)
