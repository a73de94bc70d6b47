"""Shape sweeps: verify one ONNX model at many sizes inside its dynamic axes' ranges.

    selection   which sizes, most informative first (plain data)
    axes        the axes, their ranges and guards, read from the captured program (or the ONNX model)
    resize      the example inputs at another size
    sweep       the run: outputs judged at every size, per-op rows at the first failing one
"""
