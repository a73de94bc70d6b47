"""Measure the ATen overloads onnxscript's torch_lib translates and our registry does not.

The gap is derived, never typed in: the installed torch_lib's registry of ATen overload names
(`onnxscript.function_libs.torch_lib.registration.default_registry`) against the built-ins of
`exporter.translate.registry.BUILTINS`. Each overload of the gap gets one category and a reason:

- `complex-only`, `training-only`, `internal`: an overload an inference export of real tensors
  never meets (the reason says why);
- `no such overload`: torch_lib names an overload this torch does not define (measured);
- `decomposed at capture`: torch.export's default decomposition table (or the op's
  CompositeImplicitAutograd kernel) rewrites it into other ATen ops before translation, so it
  reaches the registry as those ops (measured against the installed torch);
- `not capturable`: the op's result is a Python value of the tensors' data (`allclose`'s
  bool), which torch.export's fake tensors refuse to compute (DataDependentOutputException),
  so no exported program holds it (measured: the op is called on fake tensors);
- `not yet translated`: none of the above: exporting it fails today.

The result goes to docs/torchlib_gap.json; tools/gen_op_table.py renders it in OPERATORS.md.

    python tools/torchlib_gap.py          # rewrite docs/torchlib_gap.json, print the counts
    python tools/torchlib_gap.py --check  # exit 1 when the file is stale
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exporter.translate.registry import BUILTINS, normalize_target  # noqa: E402

log = logging.getLogger(__name__)

OUTPUT = ROOT / "docs" / "torchlib_gap.json"

COMPLEX_ONLY = {
    f"aten.{name}": "complex-only: complex tensors have no ONNX type"
    for name in ("_conj.default", "conj.default", "complex.default", "polar.default", "angle.default",
                 "resolve_conj.default", "resolve_neg.default", "mH.default")
}
TRAINING_ONLY = {
    "aten._native_batch_norm_legit.default": "training-only: batch norm updating running stats (eval exports use _no_training)",
    "aten._native_batch_norm_legit_functional.default": "training-only: functional running-stat update of training batch norm",
    "aten.native_batch_norm.default": "training-only: eval-mode capture emits _native_batch_norm_legit_no_training",
    "aten.hardtanh_backward.default": "training-only: a backward kernel",
    "aten.fake_quantize_per_channel_affine.default": "training-only: quantisation-aware training",
    "aten.fake_quantize_per_tensor_affine.default": "training-only: quantisation-aware training",
    "aten.fake_quantize_per_tensor_affine.tensor_qparams": "training-only: quantisation-aware training",
    "aten.dropout.default": "training-only: an eval-mode export removes dropout",
}
INTERNAL = {
    "aten.sym_storage_offset.default": "internal: storage offsets do not exist in ONNX",
    "aten.as_strided.default": "internal: strided views over storage; functionalised capture emits none for real models",
    "aten.empty_strided.default": "internal: strided allocation; capture emits empty.memory_format or full",
    "aten.new_empty_strided.default": "internal: strided allocation; capture emits empty.memory_format or full",
    "aten.lift_fresh_copy.default": "internal: lifts a constant; export inlines the constant",
    "aten._grouped_mm.default": "internal: CUDA-only grouped GEMM kernel",
    "aten._scaled_dot_product_efficient_attention.default": "internal: CUDA kernel form; CPU capture emits scaled_dot_product_attention",
    "aten._scaled_dot_product_flash_attention.default": "internal: CUDA kernel form; CPU capture emits scaled_dot_product_attention",
}
DECOMPOSED = "decomposed at capture: torch.export rewrites it into other ATen ops before translation"
UNCAPTURABLE = ("not capturable: its result is a Python value computed from the tensors' data, which "
                "torch.export's fake tensors refuse (DataDependentOutputException), so no exported program holds it")
UNTRANSLATED = "not yet translated: exporting it fails today"


def torchlib_targets() -> list[str]:
    """The ATen overloads (normalised names) the installed torch_lib registers."""
    from onnxscript.function_libs.torch_lib import registration
    import onnxscript.function_libs.torch_lib.ops  # noqa: F401  (fills the registry)

    names = {normalize_target(name) for name, _ in registration.default_registry.items()}
    return sorted(name for name in names if name.startswith("aten."))


def _overload(target: str) -> Any:
    """torch's OpOverload for a normalised name, or None when this torch has no such overload."""
    _, name, overload = target.split(".")
    try:
        op = getattr(getattr(torch.ops.aten, name), overload)
        op.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)
    except (AttributeError, RuntimeError):
        return None
    return op


def _decomposed_at_capture(op: Any, table: set[str]) -> bool:
    if str(op) in table:
        return True
    return op.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)


def _refused_by_fake_tensors(op: Any) -> bool:
    """Whether torch.export's fake tensors refuse to compute `op` on small float tensors: an op
    tagged data_dependent_output whose result they cannot represent (an unbacked symbol would
    do, as for `_local_scalar_dense`). Only ops taking tensors alone are called."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    if torch.Tag.data_dependent_output not in op.tags:
        return False
    required = [a for a in op._schema.arguments if not a.has_default_value() and not a.kwarg_only]
    if not all(isinstance(a.type, torch.TensorType) for a in required):
        return False
    with FakeTensorMode(shape_env=ShapeEnv()):
        tensors = [torch.zeros(2) for _ in required]
        try:
            op(*tensors)
        except DataDependentOutputException:
            return True
    return False


def classify(target: str, table: set[str]) -> tuple[str, str]:
    """(category, reason) of an overload torch_lib translates and we do not."""
    for known in (COMPLEX_ONLY, TRAINING_ONLY, INTERNAL):
        if target in known:
            reason = known[target]
            return reason.split(":")[0], reason
    op = _overload(target)
    if op is None:
        return "no such overload", f"no such overload: torch {torch.__version__.split('+')[0]} does not define it"
    if _decomposed_at_capture(op, table):
        return "decomposed at capture", DECOMPOSED
    if _refused_by_fake_tensors(op):
        return "not capturable", UNCAPTURABLE
    return "not yet translated", UNTRANSLATED


def measure(torchlib: Iterable[str] | None = None, ours: Iterable[str] | None = None) -> dict[str, Any]:
    """The comparison as data: both registries' ATen overloads, the gap with its reasons, counts."""
    import onnxscript

    torchlib = sorted(torchlib if torchlib is not None else torchlib_targets())
    ours = sorted(t for t in (ours if ours is not None else BUILTINS.targets()) if t.startswith("aten."))
    table = {str(op) for op in torch.export.default_decompositions()}
    ours_set, torchlib_set = set(ours), set(torchlib)
    gap = []
    for target in torchlib:
        if target not in ours_set:
            category, reason = classify(target, table)
            gap.append({"target": target, "category": category, "reason": reason})
    return {
        "onnxscript": onnxscript.__version__,
        "torch": torch.__version__.split("+")[0],
        "torchlib_overloads": len(torchlib),
        "our_overloads": len(ours),
        "both": len(ours_set & torchlib_set),
        "ours_only": sorted(ours_set - torchlib_set),
        "gap_count": len(gap),
        "gap_by_category": dict(sorted(Counter(item["category"] for item in gap).items())),
        "torchlib": torchlib,
        "gap": gap,
    }


def render_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {OUTPUT.name} is stale")
    options = parser.parse_args(argv)
    data = measure()
    text = render_json(data)
    if options.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            sys.stderr.write(f"{OUTPUT.relative_to(ROOT)} is stale: run python tools/torchlib_gap.py\n")
            return 1
        return 0
    OUTPUT.write_text(text)
    sys.stdout.write(
        f"torch_lib {data['torchlib_overloads']} ATen overloads, ours {data['our_overloads']}, "
        f"both {data['both']}, gap {data['gap_count']}: {data['gap_by_category']}\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
