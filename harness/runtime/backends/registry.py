"""The backends by name. Adapters register themselves with `@register_backend` where they are
defined; the built-in ones (onnxruntime, openvino, onnx.reference) are imported on first lookup,
and none imports its runtime package until it is used."""

from __future__ import annotations

import importlib
from typing import TypeVar

_BUILTIN_MODULES = (
    "harness.runtime.backends.onnxruntime_backend",
    "harness.runtime.backends.openvino_backend",
    "harness.runtime.backends.reference_backend",
)
_REGISTRY: dict[str, type] = {}
B = TypeVar("B", bound=type)


class BackendSpecError(ValueError):
    """A backend name or option that does not exist or has a value it does not take."""


def register_backend(cls: B) -> B:
    """Class decorator: make a Backend subclass available under its `name`."""
    name = getattr(cls, "name", "")
    if not name:
        raise ValueError(f"{cls.__name__} has no backend name")
    known = _REGISTRY.get(name)
    reloaded = known is not None and (known.__module__, known.__qualname__) == (cls.__module__, cls.__qualname__)
    if known is not None and known is not cls and not reloaded:  # a module imported again replaces its class
        raise ValueError(f"backend {name!r} is registered twice ({_REGISTRY[name].__name__}, {cls.__name__})")
    _REGISTRY[name] = cls
    return cls


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def backend_names() -> list[str]:
    """The registered backends' names, sorted."""
    _load_builtins()
    return sorted(_REGISTRY)


def backend_class(name: str) -> type:
    """The Backend class registered as `name`; BackendSpecError listing the names otherwise."""
    _load_builtins()
    if name not in _REGISTRY:
        raise BackendSpecError(f"unknown backend {name!r}; choose one of {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]
