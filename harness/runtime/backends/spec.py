"""`BackendSpec`: a backend named with its options, as the CLI, the plugin and reports spell it.

    onnxruntime                      onnxruntime, CPU provider, its default optimisation level
    onnxruntime:level=all            ... graph optimisation level all
    onnxruntime:provider=cuda        ... CUDA execution provider
    openvino:precision=bf16,mode=accuracy

`BackendSpec.parse` checks the name and every option against the registered backend's
declared options, and an error lists the valid ones. `str(spec)` is the canonical spelling
(options sorted), the `backend` a report row records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.runtime.backends.registry import BackendSpecError, backend_class


@dataclass(frozen=True)
class BackendOption:
    """One option a backend takes: its name, the values it accepts (None: any string) with
    their spellings mapped to one canonical value, its default and a line of help."""

    name: str
    help: str
    choices: Mapping[str, str] | None = None  # accepted spelling -> canonical value
    default: str | None = None

    def canonical(self, backend: str, value: str) -> str:
        if self.choices is None:
            if not value:
                raise BackendSpecError(f"{backend}: option {self.name!r} needs a value ({self.help})")
            return value
        found = self.choices.get(value.strip().lower())
        if found is None:
            valid = ", ".join(sorted(set(self.choices.values())))
            raise BackendSpecError(f"{backend}: {self.name}={value!r} is not valid; choose one of {valid}")
        return found


@dataclass(frozen=True)
class BackendSpec:
    """A backend's registered name and its options (canonical values, sorted by name)."""

    name: str
    options: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @classmethod
    def parse(cls, text: str | BackendSpec) -> BackendSpec:
        """`name` or `name:key=value,key=value`, checked against the registry."""
        if isinstance(text, BackendSpec):
            return text
        if not isinstance(text, str) or not text.strip():
            raise BackendSpecError(f"backend {text!r}: give a name such as 'onnxruntime' or "
                                   "'openvino:precision=f32'")
        name, _, rest = text.strip().partition(":")
        options: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in rest.split(","))):
            key, equals, value = item.partition("=")
            if not equals:
                raise BackendSpecError(f"backend {text!r}: option {item!r} is not key=value")
            key = key.strip().lower()
            if key in options:
                raise BackendSpecError(f"backend {text!r}: option {key!r} given twice")
            options[key] = value.strip()
        return cls.of(name.strip().lower(), options)

    @classmethod
    def of(cls, name: str, options: Mapping[str, Any] | None = None) -> BackendSpec:
        """The spec of backend `name` with `options`, each checked and made canonical."""
        declared = backend_class(name).OPTIONS
        checked = {}
        for key, value in dict(options or {}).items():
            if key not in declared:
                valid = ", ".join(f"{o.name} ({o.help})" for o in declared.values()) or "none"
                raise BackendSpecError(f"{name}: unknown option {key!r}; valid options: {valid}")
            checked[key] = declared[key].canonical(name, str(value))
        return cls(name, tuple(sorted(checked.items())))

    def option(self, key: str, default: str | None = None) -> str | None:
        return dict(self.options).get(key, default)

    def __str__(self) -> str:
        if not self.options:
            return self.name
        return f"{self.name}:" + ",".join(f"{key}={value}" for key, value in self.options)


def get_backend(spec: BackendSpec | str | Any) -> Any:
    """The Backend for `spec` ("openvino:precision=f32", a BackendSpec, or a Backend itself)."""
    if hasattr(spec, "prepare") and hasattr(spec, "unavailable_reason"):
        return spec
    parsed = BackendSpec.parse(spec)
    return backend_class(parsed.name)(parsed)
