"""Run ONNX Runtime as an AVX2-only CPU would: this file, run as a script under
``qemu-x86_64 -cpu EPYC-Milan`` (AMD Zen 3: AVX2 + FMA, no AVX-512, no VNNI), so that ONNX
Runtime picks its AVX2 kernels (u8 x s8 products added in pairs into a saturating int16, the
``vpmaddubsw`` path) whatever CPU runs the tests.

    qemu-x86_64 -cpu EPYC-Milan PYTHON tests/int8_cpu_support.py IN.npz OUT.npz

IN.npz holds, per job k, ``model{k}`` (an ONNX file's bytes, uint8), ``feed{k}`` (its input,
float32) and ``outputs{k}`` (the tensor names to return); OUT.npz gets ``job{k}_{i}``, those
tensors as ONNX Runtime computed them with the session options of the detector ops'
``OnnxRunner`` (one thread, sequential, no spin-wait; they do not change which kernels run).
Only numpy and onnxruntime are imported under qemu: importing the package there takes ~1 min,
and the native kernels (llvmlite's JIT) do not load under qemu-user at all (a relocation
overflow), so the caller runs everything else natively on the returned tensors.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

AVX2_ONLY_CPU = "EPYC-Milan"


def qemu_x86_64() -> str | None:
    """The qemu-user x86-64 emulator's path (``make setup`` installs qemu-user), or None."""
    return shutil.which("qemu-x86_64")


def run_as_avx2_cpu(jobs: list[tuple[bytes, np.ndarray, list[str]]], tmp: Path) -> list:
    """For each job (model bytes, input, output names): the outputs as ONNX Runtime computes
    them on the emulated AVX2 CPU, one qemu process for all the jobs."""
    source, result = tmp / "in.npz", tmp / "out.npz"
    arrays = {}
    for k, (model, feed, outputs) in enumerate(jobs):
        arrays.update({f"model{k}": np.frombuffer(model, np.uint8), f"feed{k}": feed,
                       f"outputs{k}": np.array(outputs)})
    np.savez(source, **arrays)
    done = subprocess.run([qemu_x86_64(), "-cpu", AVX2_ONLY_CPU, sys.executable, __file__,
                           str(source), str(result)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    with np.load(result) as out:
        return [[out[f"job{k}_{i}"] for i in range(len(names))]
                for k, (_, _, names) in enumerate(jobs)]


def run_natively(model: bytes, feed: np.ndarray, outputs: list[str]) -> list:
    """The same computation on this CPU."""
    import onnxruntime as ort

    options = ort.SessionOptions()  # as cuvil_perception.ops.onnx_runner, with one thread
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return session.run(outputs, {session.get_inputs()[0].name: feed})


def main(source: str, result: str) -> None:
    values = {}
    with np.load(source) as arrays:
        for k in range(sum(1 for name in arrays.files if name.startswith("model"))):
            outputs = [str(name) for name in arrays[f"outputs{k}"]]
            found = run_natively(arrays[f"model{k}"].tobytes(), arrays[f"feed{k}"], outputs)
            values.update({f"job{k}_{i}": value for i, value in enumerate(found)})
    np.savez(result, **values)


if __name__ == "__main__":
    main(*sys.argv[1:3])
