"""One case in its own process: `python -m harness.cli.worker JOB.json`.

The job names the case (a sources.Task), the run's options and where to write the result: the
case's report entry as JSON. The worker verifies the case at its traced size and at the other
size, writes reproducers of its failing ops under the report directory, and exits 0 whatever
the verdict. Its stdout and stderr are the case's log (torch's warnings land there, not on the
user's screen). A worker that dies before writing its result is recorded as crashed by the
parent, from its exit status and the end of its log.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from typing import Any

from exporter.contract.fileio import safe_filename
from harness.cli.sources import Built, build
from harness.report.document import case_from_verification, error_case
from harness.report.files import fix_directory_mode, write_text

logger = logging.getLogger("roundtrip.worker")

MAX_REPRODUCERS = 10  # per case: the failing ops with the largest errors
ORPHAN_CHECK_S = 1.0


def exit_with_parent(parent_pid: int) -> None:
    """End this worker when the run that started it is gone (killed with SIGKILL, say): a
    daemon thread watches the parent process id."""
    import threading

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(ORPHAN_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _export(built: Built, options: dict[str, Any]) -> Any:
    from harness.exporters import export_for_verification

    return export_for_verification(
        options["exporter"], built.module, built.args, opset_version=options.get("opset"),
        dynamic_axes=_dynamic_axes(built, options), input_names=built.options.get("input_names"),
        optimize=options.get("optimize", True),
    )


def _dynamic_axes(built: Built, options: dict[str, Any]) -> Any:
    """The axes exported dynamic: with a shape sweep, the case's swept axes (image sides too)."""
    if options.get("shapes") and built.sweep_axes is not None:
        return built.sweep_axes
    return built.options.get("dynamic_axes")


def _verify(built: Built, exported: Any, options: dict[str, Any], name: str) -> tuple[Any, Any]:
    """The traced-size verification (per op) and the other size's (outputs only, where the
    verification computes rows itself when outputs alone cannot judge them); a case with given
    sizes has them verified on the traced verification's shape sweep instead."""
    from harness.verification import verify, verify_exported

    judged = {k: v for k, v in built.options.items() if k not in ("dynamic_axes", "input_names")}
    common = dict(device=options["device"], tolerances=options.get("tolerances"), strict=True,
                  session_options=_ort_config(options), **judged)
    backends = options.get("backends") or ["onnxruntime"]
    verification = verify_exported(exported, built.args, module=built.module, per_op=options["per_op"],
                                   model_name=name, backends=backends, **common)
    if options.get("shapes"):  # the sweep replaces the one other size
        from harness.verification import sweep_shapes

        sweep_shapes(verification, exported, built.module, built.args, options["shapes"],
                     dynamic_axes=_dynamic_axes(built, options), axis_ranges=built.axis_ranges,
                     backends=tuple(backends), **common)
        return verification, None
    other = None
    if built.other_sizes:  # the same ONNX model at the case's sizes, in one session
        from harness.verification import sweep_shapes

        sweep_shapes(verification, exported, built.module, built.args, built.other_sizes,
                     dynamic_axes=built.options.get("dynamic_axes"),
                     make_inputs=lambda sizes, axes: built.sized_inputs(dict(sizes)), backends=tuple(backends),
                     **common)
        return verification, None
    fixed = _static_axes_hit(verification.onnx_model, built.other_args)
    if fixed:  # the export fixed an axis the other size changes: not a failure of the model
        verification.notes.extend(f"{line}; the other size is not run" for line in fixed)
    elif built.other_args is not None:
        other = verify(built.module, built.other_args, per_op=False,
                       onnx_model=verification.onnx_model,
                       exporter=options["exporter"], model_name=name, dynamic_axes=built.options.get("dynamic_axes"),
                       input_names=built.options.get("input_names"), optimize=options.get("optimize", True),
                       backends=backends[:1], **common)
    return verification, other


def in_dtype(built: Built, dtype: str | None) -> Built:
    """`built` with its module and inputs cast to `dtype` (None: as built). A zoo case is
    calibrated in float32 and then cast, as `ModelCase.module(seed, dtype)` does."""
    if dtype is None or built.module is None:
        return built
    from dataclasses import replace

    from harness.runtime.dtypes import cast_for_dtype, cast_inputs

    module, args, _ = cast_for_dtype(built.module, built.args, None, dtype)
    other = None if built.other_args is None else cast_inputs(built.other_args, dtype)
    options = dict(built.options)
    if dtype != "float32":  # a zoo case's output tolerance was measured in float32: the rule judges the rest
        options.pop("output_atol", None)
        options.pop("output_rtol", None)
    return replace(built, module=module, args=args, other_args=other, options=options)


def _static_axes_hit(onnx_model: Any, other_args: Any) -> list[str]:
    """The declared dynamic axes the export made static that `other_args` resize (exporter.capturing.specialise)."""
    if other_args is None or onnx_model is None:
        return []
    import torch.utils._pytree as pytree

    from exporter.contract.static_axes import static_axes_hit

    return static_axes_hit(onnx_model, [leaf for leaf in pytree.tree_leaves(other_args) if hasattr(leaf, "shape")])


def _ort_config(options: dict[str, Any]) -> Any:
    """The run's onnxruntime configuration (runtime.OrtConfig), as the parent recorded it."""
    from harness.runtime import OrtConfig

    record = options.get("ort_config")
    return OrtConfig.from_record(record) if record else None


def _reproducers(verification: Any, case_dir: str, report_dir: str) -> dict[str, str]:
    """Reproducers of the failing ops (worst first), as {fx_node: path relative to the report}.
    One that cannot be written is the harness's error: raised in strict mode, else a note on
    the case (harness.analysis.strictness), the verdict kept."""
    from harness.analysis.strictness import harness_errors
    from harness.reproducer import write_reproducer

    failing = sorted((op for op in verification.ops if op.passed is False and op.artifacts is not None),
                     key=lambda op: op.error_ratio, reverse=True)[:MAX_REPRODUCERS]
    written = {}
    for op in failing:
        with harness_errors(f"writing the reproducer of {op.name}", notes=verification.notes) as failed:
            folder = write_reproducer(op, case_dir)
        if failed:
            continue
        fix_directory_mode(folder)
        written[op.name] = os.path.relpath(folder, report_dir)
    if written:
        fix_directory_mode(case_dir)
    return written


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """The report entry of the job's case.

    Verifications run strict: an error of the harness's own code is raised, never recorded as
    a note or blamed on the backend. A failure while building the case or exporting it, an
    ExportError, a backend that cannot be used, or an ONNX file that cannot be read are findings
    about the case (status "error"); any other exception is a fault of the harness (status
    "error", internal: the run exits 3), a reproducer or Model Explorer file that cannot be
    written too in strict mode (ROUNDTRIP_STRICT; else a note on the case).
    """
    from exporter.errors import ExportError
    from harness.runtime import BackendUnavailableError, ModelFileError

    task, options = job["task"], job["options"]
    name = task["name"]
    started = time.perf_counter()
    phase = "build"
    try:
        built = in_dtype(build(task["origin"], options["seed"]), options.get("dtype"))
        if built.onnx_path is not None:
            from harness.onnx_verification import verify_onnx

            phase = "verify the ONNX file"
            verification = verify_onnx(built.onnx_path, built.inputs, built.expected, device=options["device"],
                                       tolerances=options.get("tolerances"), per_op=options["per_op"],
                                       model_name=name, strict=True, session_options=_ort_config(options),
                                       backend=(options.get("backends") or ["onnxruntime"])[0])
            other = None
            program = None
        else:
            phase = "export"
            export_started = time.perf_counter()
            exported = _export(built, options)
            export_s = time.perf_counter() - export_started
            phase = "verify"
            verification, other = _verify(built, exported, options, name)
            program = exported.program
            verification.timings = {"export_s": export_s, **verification.timings}
            if built.float_module is not None:
                phase = "measure the quantization cost"
                from harness.analysis.quant_cost import quantization_cost

                verification.quantization = quantization_cost(built.float_module, built.module, built.args).to_dict()
        phase = "write the reproducers"
        case_dir = os.path.join(job["report_dir"], "reproducers", safe_filename(name, "case"))
        reproducers = _reproducers(verification, case_dir, job["report_dir"])
        case = case_from_verification(verification, name=name, other=other, seconds=time.perf_counter() - started,
                                      reproducer=reproducers, family=task.get("family"),
                                      sizes=built.sizes[:1] if verification.shape_sweep is not None else built.sizes,
                                      origin=task["origin"])
        if options.get("model_explorer"):
            phase = "write the Model Explorer files"
            _model_explorer(case, verification, program, job["report_dir"])
    except Exception as error:
        logger.error("%s failed:\n%s", phase, traceback.format_exc())
        refused = phase in ("build", "export") or isinstance(error, (ExportError, BackendUnavailableError)) or (
            phase == "verify the ONNX file" and isinstance(error, ModelFileError))
        message = f"{phase}: {type(error).__name__}: {error}".splitlines()[0][:500]
        return error_case(name, error=message, internal=not refused, seconds=time.perf_counter() - started)
    return case


def _model_explorer(case: dict[str, Any], verification: Any, program: Any, report_dir: str) -> None:
    """Add the case's Model Explorer files (harness.report.explorer_files) to the report; a
    failure to write them is the harness's error: raised in strict mode, else noted on the case,
    never a change of its verdict."""
    from harness.analysis.strictness import harness_errors
    from harness.report.explorer_files import write_case_files

    if verification.onnx_model is None:
        return
    full = verification.to_dict()["ops"]
    rows = [{**row, "onnx_nodes": list(source.get("onnx_nodes", []))}
            for row, source in zip(case["verification"]["ops"], full)]
    with harness_errors("writing the Model Explorer files", notes=case["verification"]["notes"]):
        case["model_explorer"] = write_case_files(report_dir, safe_filename(case["name"], "case"), case=case["name"],
                                                  rows=rows, onnx_model=verification.onnx_model, program=program)



def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as handle:
        job = json.load(handle)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    logging.captureWarnings(True)
    threads = job["options"].get("threads")
    if threads:
        import torch

        torch.set_num_threads(threads)
    if job.get("parent_pid"):
        exit_with_parent(job["parent_pid"])
    logger.info("case %s (worker pid %d): %s", job["task"]["name"], os.getpid(), json.dumps(job["task"]["origin"]))
    entry = run_job(job)
    entry["position"] = job["task"]["position"]
    entry["log"] = job.get("log")
    write_text(job["result"], json.dumps(entry))
    logger.info("case %s: %s", entry["name"], entry["status"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
