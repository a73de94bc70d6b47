"""The onnxruntime session configuration a verification runs with, and records.

The production run, whose outputs decide the verdict, runs as users deploy: onnxruntime's
defaults (graph optimisations all on, prepacking on), or the user's own configuration, given as

* an `onnxruntime.SessionOptions` (its settings are read; each session gets fresh options built
  from them, since onnxruntime's options object collects the initializers added to it),
* a mapping, or a JSON file holding one (`roundtrip verify --ort-config FILE`):

      {"graph_optimization_level": "extended", "intra_op_num_threads": 4,
       "config_entries": {"session.disable_prepacking": "1"},
       "provider_options": {"CUDAExecutionProvider": {"cudnn_conv_algo_search": "HEURISTIC"}},
       "custom_ops_libraries": ["libmy_ops.so"]}

The analysis sessions (instrumented, isolation) run with the same configuration, so that their
values are the production run's. The harness adds only what cannot change a result: idle
threads sleep instead of spinning, and, when the configuration leaves them open, as many intra-op
threads as torch uses and no CPU memory arena (an array onnxruntime returns from an arena session
holds the whole arena, every intermediate's high-water mark, for as long as the array lives, even
after the session is gone; without it each output is its own allocation). `OrtConfig.to_dict()` is
what a report records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")
"""graph_optimization_level names, as onnxruntime's GraphOptimizationLevel ORT_DISABLE_ALL,
ORT_ENABLE_BASIC, ORT_ENABLE_EXTENDED and ORT_ENABLE_ALL (its default)."""

_LEVEL_ENUM = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
               "all": "ORT_ENABLE_ALL"}
_MODES = {"sequential": "ORT_SEQUENTIAL", "parallel": "ORT_PARALLEL"}

KNOWN_CONFIG_KEYS = (
    # onnxruntime/core/session/onnxruntime_session_options_config_keys.h (1.2x): the entries read
    # back from a SessionOptions, which cannot list its own; the JSON form takes any key.
    "session.disable_prepacking", "session.use_env_allocators", "session.load_model_format",
    "session.save_model_format", "session.set_denormal_as_zero", "session.disable_quant_qdq",
    "session.disable_double_qdq_remover", "session.enable_quant_qdq_cleanup", "optimization.enable_gelu_approximation",
    "optimization.disable_specified_optimizers", "session.use_device_allocator_for_initializers",
    "session.inter_op.allow_spinning", "session.intra_op.allow_spinning", "session.use_ort_model_bytes_directly",
    "session.disable_cpu_ep_fallback", "session.qdq_matmulnbits_accuracy_level", "session.dynamic_block_base",
    "mlas.enable_gemm_fastmath_arm64_bfloat16", "session.disable_aot_function_inlining",
    "session.record_ep_graph_assignment_info", "optimization.minimal_build_optimizations",
    "session.x64quantprecision", "session.intra_op_thread_affinities", "session.qdqisint8allowed",
    "session.graph_optimizations_loop_level", "mlas.use_kleidiai",
)
SPINNING_KEYS = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")
_FLAGS = ("use_deterministic_compute", "enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse")


class OrtConfigError(ValueError):
    """A session configuration that cannot be used; the message names the key and what to do."""


@dataclass(frozen=True)
class OrtConfig:
    """onnxruntime settings for every session of a verification (None: onnxruntime's default)."""

    graph_optimization_level: str | None = None
    intra_op_num_threads: int | None = None
    inter_op_num_threads: int | None = None
    execution_mode: str | None = None
    use_deterministic_compute: bool | None = None
    enable_cpu_mem_arena: bool | None = None
    enable_mem_pattern: bool | None = None
    enable_mem_reuse: bool | None = None
    config_entries: Mapping[str, str] = field(default_factory=dict)
    provider_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    custom_ops_libraries: tuple[str, ...] = ()
    source: str = "onnxruntime defaults"  # where it came from: defaults, a file, SessionOptions, a mapping

    def __post_init__(self) -> None:
        if self.graph_optimization_level is not None and self.graph_optimization_level not in OPTIMIZATION_LEVELS:
            raise OrtConfigError(f"graph_optimization_level {self.graph_optimization_level!r}: choose one of "
                                 f"{', '.join(OPTIMIZATION_LEVELS)}")
        if self.execution_mode is not None and self.execution_mode not in _MODES:
            raise OrtConfigError(f"execution_mode {self.execution_mode!r}: choose sequential or parallel")
        for name in ("intra_op_num_threads", "inter_op_num_threads"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise OrtConfigError(f"{name} {value!r}: a number of threads (0: onnxruntime's choice)")

    @classmethod
    def of(cls, value: Any) -> OrtConfig:
        """None (onnxruntime's defaults), an OrtConfig, an onnxruntime.SessionOptions, a mapping,
        or the path of a JSON file holding one."""
        if value is None:
            return cls()
        if isinstance(value, OrtConfig):
            return value
        if isinstance(value, (str, os.PathLike)):
            return cls.load(value)
        if isinstance(value, Mapping):
            return cls.from_dict(value)
        if type(value).__name__ == "SessionOptions":
            return cls.from_session_options(value)
        raise OrtConfigError(f"session_options={type(value).__name__}: pass an onnxruntime.SessionOptions, a "
                             "mapping of its settings, or the path of a JSON file holding one")

    @classmethod
    def load(cls, path: str | os.PathLike) -> OrtConfig:
        """The configuration in a JSON file; OrtConfigError naming the file for a bad one."""
        try:
            with open(path) as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise OrtConfigError(f"{os.fspath(path)}: no such file (a JSON object of onnxruntime session "
                                 "settings)") from None
        except (OSError, ValueError) as error:
            raise OrtConfigError(f"{os.fspath(path)}: not a JSON object of session settings ({error})") from None
        if not isinstance(data, Mapping):
            raise OrtConfigError(f"{os.fspath(path)}: holds a {type(data).__name__}, expected a JSON object")
        try:
            return cls.from_dict(data, source=os.fspath(path))
        except OrtConfigError as error:
            raise OrtConfigError(f"{os.fspath(path)}: {error}") from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "a mapping") -> OrtConfig:
        known = {f.name for f in fields(cls)} - {"source"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise OrtConfigError(f"unknown setting(s) {unknown}; known: {', '.join(sorted(known))}")
        values = dict(data)
        values["config_entries"] = {str(k): str(v) for k, v in dict(values.get("config_entries") or {}).items()}
        providers = values.get("provider_options") or {}
        if not isinstance(providers, Mapping) or not all(isinstance(v, Mapping) for v in providers.values()):
            raise OrtConfigError("provider_options: a mapping of provider name to its options, e.g. "
                                 '{"CUDAExecutionProvider": {"cudnn_conv_algo_search": "HEURISTIC"}}')
        values["provider_options"] = {str(k): dict(v) for k, v in providers.items()}
        values["custom_ops_libraries"] = tuple(values.get("custom_ops_libraries") or ())
        return cls(**values, source=source)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> OrtConfig:
        """The configuration `to_dict()` recorded (how a run hands it to its workers)."""
        return cls.from_dict({k: v for k, v in record.items() if k != "source"},
                             source=record.get("source", "a mapping"))

    def with_level(self, level: str | None) -> OrtConfig:
        """This configuration with its graph optimisation level set to `level` (unchanged: None)."""
        if level is None:
            return self
        source = "onnxruntime defaults" if self.source == "onnxruntime defaults" else self.source
        return replace(self, graph_optimization_level=level,
                       source=f"{source}; graph_optimization_level {level}")

    @classmethod
    def from_session_options(cls, options: Any) -> OrtConfig:
        """The settings of a user's SessionOptions (config entries: the KNOWN_CONFIG_KEYS set)."""
        import onnxruntime as ort

        levels = {getattr(ort.GraphOptimizationLevel, name): level for level, name in _LEVEL_ENUM.items()}
        modes = {getattr(ort.ExecutionMode, name): mode for mode, name in _MODES.items()}
        entries = {}
        for key in KNOWN_CONFIG_KEYS:
            try:
                entries[key] = options.get_session_config_entry(key)
            except RuntimeError:  # onnxruntime raises when the key is not set
                continue
        return cls(
            graph_optimization_level=levels.get(options.graph_optimization_level),
            intra_op_num_threads=options.intra_op_num_threads or None,
            inter_op_num_threads=options.inter_op_num_threads or None,
            execution_mode=modes.get(options.execution_mode),
            **{flag: bool(getattr(options, flag)) for flag in _FLAGS},
            config_entries=entries, source="SessionOptions",
        )

    def session_options(self, *, threads: int | None = None, spinning: bool = False, arena: bool = True) -> Any:
        """A fresh onnxruntime.SessionOptions with these settings; `threads` fills an unset
        intra-op thread count, idle threads sleep unless the configuration says otherwise
        or `spinning`, and `arena=False` turns the CPU memory arena off unless the configuration
        sets it (none of them changes a result)."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        if self.graph_optimization_level is not None:
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                                       _LEVEL_ENUM[self.graph_optimization_level])
        if self.execution_mode is not None:
            options.execution_mode = getattr(ort.ExecutionMode, _MODES[self.execution_mode])
        intra = self.intra_op_num_threads if self.intra_op_num_threads is not None else threads
        if intra:
            options.intra_op_num_threads = intra
        if self.inter_op_num_threads:
            options.inter_op_num_threads = self.inter_op_num_threads
        for flag in _FLAGS:
            if getattr(self, flag) is not None:
                setattr(options, flag, getattr(self, flag))
        if not arena and self.enable_cpu_mem_arena is None:
            options.enable_cpu_mem_arena = False
        if not spinning:
            for key in SPINNING_KEYS:
                if key not in self.config_entries:
                    options.add_session_config_entry(key, "0")
        for key, value in self.config_entries.items():
            options.add_session_config_entry(key, value)
        for library in self.custom_ops_libraries:
            options.register_custom_ops_library(library)
        return options

    def provider_options_for(self, provider: str, harness_options: Mapping[str, Any]) -> dict[str, Any]:
        """`provider`'s options: the harness's (device, TF32, arena cap), then the user's; a
        user's value that contradicts the harness's (another device, TF32 on when it is
        pinned off) is an error, since the verification could not record what ran."""
        user = dict(self.provider_options.get(provider, {}))
        for key in ("device_id", "use_tf32"):
            if key in user and str(user[key]) != str(harness_options.get(key, user[key])):
                raise OrtConfigError(f"provider_options {provider} {key}={user[key]!r} contradicts the verification's "
                                     f"{key}={harness_options[key]!r}; set it through the device or tf32 argument")
        return {**harness_options, **user}

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a report records it: every setting given (None: onnxruntime's
        default), and where it came from."""
        return {
            "source": self.source, "graph_optimization_level": self.graph_optimization_level,
            "intra_op_num_threads": self.intra_op_num_threads, "inter_op_num_threads": self.inter_op_num_threads,
            "execution_mode": self.execution_mode, **{flag: getattr(self, flag) for flag in _FLAGS},
            "config_entries": dict(self.config_entries),
            "provider_options": {k: dict(v) for k, v in self.provider_options.items()},
            "custom_ops_libraries": list(self.custom_ops_libraries),
        }
