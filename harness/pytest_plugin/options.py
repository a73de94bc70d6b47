"""The plugin's options: `--roundtrip-*` on the command line, `roundtrip_*` in the ini file.

Every option is prefixed because the plugin loads into every pytest run of an environment that
has this package installed: a project's own `--device` never meets ours. A value comes from the
command line, else the ini file (`roundtrip_device = cuda` under `[tool.pytest.ini_options]`),
else (tier only) the ROUNDTRIP_TIER environment variable, else the default. Paths from the ini
file are relative to the ini file's folder, from the command line to the invocation folder.

Resolving the settings imports nothing heavy: torch and onnxruntime load only when a roundtrip
fixture, marker or zoo test runs, or when CUDA is asked for (the check needs both).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

DEVICES = ("cpu", "cuda", "auto")
EXPORTERS = ("roundtrip", "torch.onnx", "torchscript")
"""harness.exporters.EXPORTERS, spelt out here so that parsing the options imports no torch
(tests/test_plugin_options.py keeps the two equal)."""
DTYPES = ("float32", "float16", "bfloat16")
"""harness.runtime.dtypes.DTYPES' names, spelt out here for the same reason."""
TIER_ENVIRONMENT = "ROUNDTRIP_TIER"


@dataclass(frozen=True)
class OptionSpec:
    """One setting: its name (`--roundtrip-<flag>`, ini `roundtrip_<name>`), default and help."""

    name: str
    help: str
    default: Any = None
    choices: tuple[str, ...] | None = None
    kind: str = "text"  # "text" | "int" | "path" | "list" (repeatable; whitespace-separated in the ini file)
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--roundtrip-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "roundtrip_" + self.name


OPTIONS = (
    OptionSpec("device", "device to verify on: cpu (default); cuda (a usage error, with the reason, when torch "
               "or onnxruntime cannot use CUDA); auto (cuda when both can, else cpu)", "cpu", DEVICES),
    OptionSpec("exporter", "exporter the roundtrip fixture and the zoo tests hold to account (default roundtrip)",
               "roundtrip", EXPORTERS),
    OptionSpec("opset", "ONNX opset to export at (default: the exporter's)", None, kind="int", metavar="N"),
    OptionSpec("tier", f"model zoo tier of the zoo tests: smoke (default), full (the 2018 zoo) or extended (full plus every "
               f"other torchvision model; nightly); also ${TIER_ENVIRONMENT}",
               "smoke", metavar="TIER"),
    OptionSpec("cases", "only zoo cases matching this fnmatch pattern or comma-separated list (any tier)",
               metavar="PATTERN"),
    OptionSpec("report_dir", "write the run's report (parity.json, parity.md, index.html) and the failing "
               "tests' reproducers to this folder (default: no report; reproducers under pytest's tmp "
               "folder)", kind="path", metavar="DIR"),
    OptionSpec("tolerances", "per-op tolerance table (JSON) to judge ops by (default: the shipped table)",
               kind="path", metavar="PATH"),
    OptionSpec("dtype", "verify a copy of each model, and its float inputs, cast to this dtype (zoo cases are "
               "calibrated in float32, then cast); default: as built", None, DTYPES),
    OptionSpec("ort_config", "onnxruntime session settings to verify, a JSON object (graph_optimization_level, "
               "config_entries, provider_options, ...; default: onnxruntime's own)", kind="path", metavar="FILE"),
    OptionSpec("backend", "a backend to verify on, repeatable (onnxruntime[:provider=..,level=..], "
               "openvino[:precision=f32|bf16|f16,mode=accuracy|performance], onnx.reference); the first decides "
               "each test, every one is judged against the same fp64 truth (default: onnxruntime)",
               kind="list", metavar="SPEC"),
)


@dataclass(frozen=True)
class Settings:
    """The run's roundtrip settings, resolved from the command line, the ini file and defaults."""

    device: str = "cpu"  # as asked: cpu | cuda | auto
    exporter: str = "roundtrip"
    opset: int | None = None
    tier: str = "smoke"
    cases: str | None = None
    report_dir: str | None = None
    tolerances: str | None = None
    dtype: str | None = None
    ort_config: str | None = None
    backend: tuple[str, ...] | None = None  # canonical specs; None: onnxruntime


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("roundtrip", "roundtrip: ONNX round-trip verification")
    for spec in OPTIONS:
        extra: dict[str, Any] = {"choices": spec.choices} if spec.choices else {"metavar": spec.metavar}
        if spec.kind == "int":
            extra["type"] = int
        action = "append" if spec.kind == "list" else "store"
        group.addoption(spec.flag, action=action, dest=spec.dest, default=None, help=spec.help, **extra)
        parser.addini(spec.dest, f"{spec.help} (command line: {spec.flag})", default="")


def _ini_value(config: pytest.Config, spec: OptionSpec) -> Any:
    text = str(config.getini(spec.dest) or "").strip()
    if not text:
        return None
    where = f"{spec.dest} = {text!r} in {config.inipath or 'the ini file'}"
    if spec.choices and text not in spec.choices:
        raise pytest.UsageError(f"{where}: choose one of {', '.join(spec.choices)}")
    if spec.kind == "int":
        try:
            return int(text)
        except ValueError:
            raise pytest.UsageError(f"{where}: not an integer") from None
    if spec.kind == "path":
        base = config.inipath.parent if config.inipath else config.rootpath
        return str(base / text)
    if spec.kind == "list":
        return text.split()
    return text


def resolve(config: pytest.Config) -> Settings:
    """The settings of this run (command line > ini > environment > default), paths absolute."""
    values: dict[str, Any] = {}
    for spec in OPTIONS:
        value = config.getoption(spec.dest, default=None)
        if value is not None and spec.choices and value not in spec.choices:  # an alias's value
            raise pytest.UsageError(f"{spec.flag} {value!r}: choose one of {', '.join(spec.choices)}")
        if value is not None and spec.kind == "path":
            value = str(Path(config.invocation_params.dir, value))
        if value is None:
            value = _ini_value(config, spec)
        if value is None and spec.name == "tier":
            value = os.environ.get(TIER_ENVIRONMENT) or None
        values[spec.name] = spec.default if value is None else value
    if values.get("ort_config"):
        from harness.runtime.ort_config import OrtConfig, OrtConfigError

        try:
            OrtConfig.load(values["ort_config"])
        except OrtConfigError as error:
            raise pytest.UsageError(f"--roundtrip-ort-config {error}") from None
    if values.get("backend"):
        values["backend"] = backend_specs(values["backend"], "--roundtrip-backend")
    return Settings(**values)


def backend_specs(texts: Any, where: str) -> tuple[str, ...]:
    """Backend specs, canonical; a pytest.UsageError naming `where` for an unknown backend or
    option, or one given twice. Parsing imports no runtime package."""
    from harness.runtime.backends import BackendSpec, BackendSpecError

    texts = [texts] if isinstance(texts, str) else list(texts)
    try:
        specs = tuple(str(BackendSpec.parse(text)) for text in texts)
    except BackendSpecError as error:
        raise pytest.UsageError(f"{where} {error}") from None
    if len(set(specs)) != len(specs):
        raise pytest.UsageError(f"{where}: {sorted({s for s in specs if specs.count(s) > 1})} given more than once")
    return specs


def write_back(config: pytest.Config, settings: Settings) -> None:
    """Put the resolved values on `config.option`, so `config.getoption("roundtrip_tier")`
    reads what the ini file or the environment said too."""
    for spec in OPTIONS:
        setattr(config.option, spec.dest, getattr(settings, spec.name))
