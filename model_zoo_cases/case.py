"""`ModelCase`: one model the harness verifies, as data plus two factories.

A case knows how to build its (untrained, seeded, calibrated) module and how to
make realistic example arguments for it, and carries everything a verification
run needs to judge the result: names, dynamic axes, batch sizes to check, the
end-to-end tolerance and the activation bound that keeps the comparison honest.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import re
import threading
from typing import Any, Callable, Literal, get_args

import torch
from torch import nn

from model_zoo_cases import calibration
from model_zoo_cases.measurements import Measured

logger = logging.getLogger(__name__)

Family = Literal[
    "alexnet",
    "resnet",
    "vgg",
    "densenet",
    "inception",
    "dcgan",
    "superresolution",
    "word_language_model",
    # torchvision beyond the 2018 zoo (the extended tier): classifier modules, then tasks
    "convnext",
    "efficientnet",
    "googlenet",
    "maxvit",
    "mnasnet",
    "mobilenetv2",
    "mobilenetv3",
    "regnet",
    "shufflenetv2",
    "squeezenet",
    "swin_transformer",
    "vision_transformer",
    "segmentation",
    "video",
    "optical_flow",
    "detection",
    "transformer",
]
# Levels: smoke (every CI run) < full (nightly) < extended (nightly: every torchvision family).
# `detection` and `quantized` (nightly) stand apart, each selected only by its own name:
# torchvision's detectors; PT2E-quantized modules (model_zoo_cases.quantized).
Tier = Literal["smoke", "full", "extended", "detection", "quantized"]

FAMILIES: tuple[str, ...] = get_args(Family)
TIERS: tuple[str, ...] = get_args(Tier)

# Calibration data comes from a generator seeded with `seed + CALIBRATION_SEED_OFFSET`
# so that it never coincides with the verification inputs drawn from `seed`.
CALIBRATION_SEED_OFFSET = 1_000_003

InputFn = Callable[[torch.Generator, int], "tuple[torch.Tensor, ...]"]


@dataclasses.dataclass(frozen=True)
class ModelCase:
    """A model-zoo case: how to build it, feed it, and judge its export.

    `build_fn` builds an *uncalibrated* module and relies on the caller for
    seeding; `module(seed)` is the reproducible entry point (seed, build,
    calibrate, eval). `input_fn(generator, batch)` returns the example args.
    """

    name: str
    family: str
    build_fn: Callable[[], nn.Module]
    input_fn: InputFn
    tier: str
    atol: float
    rtol: float
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: dict[str, dict[int, str]]
    activation_bound: float
    calibrate: bool
    traced_batch: int = 2
    other_batch: int = 3
    allowed_mismatch_fraction: float = 0.0
    mismatch_reason: str = ""
    torch_onnx_issue: str | None = None
    # With torch_onnx_issue: a regex the message of torch.onnx's expected failure must match (a
    # strict expectation: a pass, or any other failure, fails the case's torch.onnx test).
    torch_onnx_fails_with: str | None = None
    # Data-dependent weight rescaling (LSUV-like) for nets whose default init
    # makes activations vanish or explode; see calibration.rescale_weights.
    rescale_weights: bool = False
    calibration_batch: int = 4
    calibration_steps: int = 3
    description: str = ""
    # The measurements atol/rtol/activation_bound were derived from, if any.
    measured: Measured | None = None
    # Outputs hold one entry per input (a detector's list of per-image mappings), so the batch
    # is no dynamic axis: traced_batch == other_batch, and other_inputs() varies the other axes.
    fixed_batch: bool = False
    # A PT2E quantization scheme (model_zoo_cases.quantized.SCHEMES): the module is quantized
    # after calibration, on `calibration_steps` batches drawn like the inputs; None: float.
    quantization: str | None = None
    # The range of each dynamic axis, {axis name: (lowest, highest)}: the sizes the case promises
    # to work at, which a shape sweep (harness.shapes, `roundtrip run --shapes N`) stays inside.
    axis_ranges: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    # Axes declared dynamic only when the case is swept (image sides): the two-size checks and the
    # committed baseline keep verifying the export of `dynamic_axes` alone.
    sweep_axes: dict[str, dict[int, str]] = dataclasses.field(default_factory=dict)
    # Sizes ({axis name: size}) the same ONNX model is verified at besides the traced one, in place
    # of other_inputs()'s halved axes; `sized_input_fn(generator, sizes)` draws the args there.
    other_sizes: tuple[dict[str, int], ...] = ()
    sized_input_fn: Callable[[torch.Generator, dict[str, int]], tuple[torch.Tensor, ...]] | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: unknown family {self.family!r}; expected one of {FAMILIES}")
        if self.tier not in TIERS:
            raise ValueError(f"{self.name}: unknown tier {self.tier!r}; expected one of {TIERS}")
        if self.fixed_batch:
            if self.traced_batch != self.other_batch:
                raise ValueError(f"{self.name}: a fixed batch needs other_batch == traced_batch")
        elif self.traced_batch == self.other_batch:
            raise ValueError(f"{self.name}: other_batch must differ from traced_batch")
        elif min(self.traced_batch, self.other_batch) < 2:
            # torch.export specialises dimensions of size 0 and 1, so a dynamic
            # batch axis needs example batches of at least 2.
            raise ValueError(f"{self.name}: batches must be >= 2 for a dynamic batch axis")
        if bool(self.torch_onnx_issue) != bool(self.torch_onnx_fails_with):
            raise ValueError(f"{self.name}: torch_onnx_issue (why) and torch_onnx_fails_with (a regex of the "
                             "failure's message) go together")
        if self.torch_onnx_fails_with:
            re.compile(self.torch_onnx_fails_with)
        if not 0.0 <= self.allowed_mismatch_fraction <= 1.0:
            raise ValueError(f"{self.name}: allowed_mismatch_fraction must be in [0, 1]")
        if self.allowed_mismatch_fraction > 0.0 and not self.mismatch_reason:
            raise ValueError(f"{self.name}: a nonzero allowed_mismatch_fraction needs a mismatch_reason")
        if self.other_sizes and self.sized_input_fn is None:
            raise ValueError(f"{self.name}: other_sizes needs a sized_input_fn to draw inputs at them")
        axes = {axis for dims in self.dynamic_axes.values() for axis in dims.values()}
        for sizes in self.other_sizes:
            if set(sizes) - axes:
                raise ValueError(f"{self.name}: other_sizes names {sorted(set(sizes) - axes)}, not dynamic axes "
                                 f"({sorted(axes)})")
        unknown = set(self.dynamic_axes) - set(self.input_names) - set(self.output_names)
        if unknown:
            raise ValueError(f"{self.name}: dynamic_axes names {sorted(unknown)} are not inputs or outputs")
        if set(self.sweep_axes) - set(self.input_names):
            raise ValueError(f"{self.name}: sweep_axes names {sorted(set(self.sweep_axes) - set(self.input_names))}, "
                             "which are not inputs")
        axes = {axis for table in (self.dynamic_axes, self.sweep_axes) for dims in table.values() for axis in dims.values()}
        for axis, (lowest, highest) in self.axis_ranges.items():
            if axis not in axes:
                raise ValueError(f"{self.name}: axis_ranges names {axis!r}, which is no dynamic axis ({sorted(axes)})")
            if not 0 <= lowest <= highest:
                raise ValueError(f"{self.name}: the range of {axis!r}, [{lowest}, {highest}], is empty or negative")

    def __hash__(self) -> int:
        # dynamic_axes is a dict, so the generated hash would fail; names are unique.
        return hash((self.name, self.family, self.tier))

    def build(self, seed: int = 0, dtype: torch.dtype | None = None) -> nn.Module:
        """Build a fresh module: seed, `build_fn`, calibrate, `.eval()`, then cast to `dtype`.

        Deterministic for a seed. The global RNG state is left as it was. Calibration (batch
        norm statistics, weight rescaling) always runs in float32, on float32 inputs; the
        calibrated module is then cast, as a user casts a trained model (`.half()`).
        """
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = self.build_fn()
        module.eval()
        if self.rescale_weights or self.calibrate:
            calibration_gen = torch.Generator().manual_seed(seed + CALIBRATION_SEED_OFFSET)

            def make_batch(step: int) -> tuple[torch.Tensor, ...]:
                del step  # batches differ because the generator advances
                return self.input_fn(calibration_gen, self.calibration_batch)

            if self.rescale_weights:
                calibration.rescale_weights(module, make_batch(0))
            if self.calibrate:
                calibration.calibrate_batchnorm(module, make_batch, self.calibration_steps)
        module.eval()
        if self.quantization is not None:
            return self._quantized(module, seed, dtype)
        if dtype is not None:
            module.to(dtype)  # floating parameters and buffers only
        logger.debug("built %s (seed=%d, dtype=%s)", self.name, seed, dtype or "float32")
        return module

    def float_module(self, seed: int = 0) -> nn.Module:
        """The float module a quantized case quantizes (seeded and calibrated as `build`); the
        module itself for a float case."""
        if self.quantization is None:
            return self.build(seed)
        return dataclasses.replace(self, quantization=None).build(seed)

    def _quantized(self, module: nn.Module, seed: int, dtype: torch.dtype | None) -> nn.Module:
        from model_zoo_cases import quantized

        if dtype is not None:
            raise ValueError(f"{self.name}: a quantized case runs in float32 around its int8 tensors; "
                             f"dtype={dtype} does not apply")
        generator = torch.Generator().manual_seed(seed + CALIBRATION_SEED_OFFSET + 1)
        batches = [self.input_fn(generator, self.traced_batch) for _ in range(self.calibration_steps)]
        return quantized.quantize(module, self.inputs(seed), batches, self.quantization)

    def output_tolerance(self, dtype: Any = None) -> tuple[float | None, float | None]:
        """(atol, rtol) that judge the case's outputs in `dtype`: the measured `atol`/`rtol` in
        float32 (None), where they were measured; (None, None) in any other dtype, whose outputs
        the verdict rule judges against the fp64 truth with the shipped per-dtype rows, and for
        a quantized case, whose dequantized outputs the rule judges alone."""
        if self.quantization is not None:
            return None, None
        if dtype is None or str(dtype).removeprefix("torch.") == "float32":
            return self.atol, self.rtol
        return None, None

    def module(self, seed: int = 0, dtype: torch.dtype | None = None) -> nn.Module:
        """The module for `seed` in `dtype` (None: float32), from a small LRU cache keyed by
        (name, seed, dtype).

        The returned module is shared: treat it as read-only (use `build` for a
        copy you may change).
        """
        return _MODULE_CACHE.get(self, seed, dtype)

    def inputs(self, seed: int = 0, batch: int | None = None, dtype: torch.dtype | None = None
               ) -> tuple[torch.Tensor, ...]:
        """Example args drawn from a `torch.Generator` seeded with `seed`; with `dtype`, the
        floating ones are drawn in float32 and then cast (the same values, rounded), token ids
        and other integer inputs stay as they are."""
        generator = torch.Generator().manual_seed(seed)
        args = tuple(self.input_fn(generator, self.traced_batch if batch is None else batch))
        return args if dtype is None else tuple(a.to(dtype) if a.is_floating_point() else a for a in args)

    def other_inputs(self, seed: int = 1, dtype: torch.dtype | None = None) -> tuple[torch.Tensor, ...]:
        """Args at `other_batch`, with every other dynamic axis (e.g. sequence) cut to about half.

        Verifying at these sizes exercises each dynamic axis at a size it was not traced at.
        """
        lengths: dict[str, int] = {}
        args = []
        for name, arg in zip(self.input_names, self.inputs(seed, self.other_batch, dtype)):
            for dim, axis in self.dynamic_axes.get(name, {}).items():
                if axis != "batch":
                    length = lengths.setdefault(axis, max(2, arg.shape[dim] // 2))
                    arg = arg.narrow(dim, 0, length)
            args.append(arg.contiguous())
        return tuple(args)

    def swept_axes(self) -> dict[str, dict[int, str]]:
        """The dynamic axes of the inputs when the case is swept: `dynamic_axes` and `sweep_axes`."""
        return {name: {**self.dynamic_axes.get(name, {}), **self.sweep_axes.get(name, {})}
                for name in self.input_names if name in self.dynamic_axes or name in self.sweep_axes}

    def inputs_at(self, sizes: dict[str, int], seed: int = 1) -> tuple[torch.Tensor, ...]:
        """Args at one of `other_sizes` ({axis name: size}), drawn from a generator seeded with `seed`."""
        if self.sized_input_fn is None:
            raise ValueError(f"{self.name} draws no inputs at given sizes (it has no sized_input_fn)")
        return tuple(self.sized_input_fn(torch.Generator().manual_seed(seed), dict(sizes)))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for reports (no callables)."""
        return {
            "name": self.name,
            "family": self.family,
            "tier": self.tier,
            "description": self.description,
            "atol": self.atol,
            "rtol": self.rtol,
            "allowed_mismatch_fraction": self.allowed_mismatch_fraction,
            "mismatch_reason": self.mismatch_reason,
            "input_names": list(self.input_names),
            "output_names": list(self.output_names),
            "dynamic_axes": {k: {str(d): v for d, v in axes.items()} for k, axes in self.dynamic_axes.items()},
            "traced_batch": self.traced_batch,
            "other_batch": self.other_batch,
            "activation_bound": self.activation_bound,
            "torch_onnx_issue": self.torch_onnx_issue,
            "torch_onnx_fails_with": self.torch_onnx_fails_with,
            "calibrate": self.calibrate,
            "rescale_weights": self.rescale_weights,
            "calibration_batch": self.calibration_batch,
            "calibration_steps": self.calibration_steps,
            "measured": None if self.measured is None else self.measured.to_dict(),
            "fixed_batch": self.fixed_batch,
            "axis_ranges": {axis: list(bounds) for axis, bounds in self.axis_ranges.items()},
            "sweep_axes": {k: {str(d): v for d, v in axes.items()} for k, axes in self.sweep_axes.items()},
            "other_sizes": [dict(sizes) for sizes in self.other_sizes],
        }


class _ModuleCache:
    """LRU of built modules keyed by (case name, seed, dtype).

    Full-tier models weigh up to ~0.6 GB each, so the cache stays small. An
    entry is reused only if it was built by the same `build_fn`, so an ad-hoc
    case that reuses a registered name never receives the wrong module.
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._entries: collections.OrderedDict[
            tuple[str, int, torch.dtype | None], tuple[Callable[[], nn.Module], nn.Module]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, case: ModelCase, seed: int, dtype: torch.dtype | None = None) -> nn.Module:
        key = (case.name, seed, dtype)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is case.build_fn:
                self._entries.move_to_end(key)
                return entry[1]
        module = case.build(seed, dtype)
        with self._lock:
            self._entries[key] = (case.build_fn, module)
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return module

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


MODULE_CACHE_SIZE = 2
_MODULE_CACHE = _ModuleCache(MODULE_CACHE_SIZE)


def clear_module_cache() -> None:
    """Drop every cached module (frees memory between heavy cases)."""
    _MODULE_CACHE.clear()
