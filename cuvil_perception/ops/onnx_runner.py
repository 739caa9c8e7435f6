"""Run an ONNX graph (a detector's trunk or backbone) in OpenCV DNN or ONNX Runtime.

``runtime="opencv"`` uses ``cv2.dnn.readNetFromONNX`` (always installed); ``"onnxruntime"`` uses
ONNX Runtime's CPU provider (the ``ort`` extra); ``"auto"`` takes ONNX Runtime when it is
installed — about twice as fast as OpenCV 5's DNN on the demo backbones here — and OpenCV
otherwise. ``OnnxRunner.runtime`` says which one was chosen. Inputs and outputs are float32.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import onnx

from ..errors import ModelError

RUNTIMES = ("auto", "opencv", "onnxruntime")


def resolve_runtime(runtime: str) -> str:
    """``auto`` -> ``onnxruntime`` when importable, else ``opencv``; others unchanged."""
    if runtime == "auto":
        return "onnxruntime" if importlib.util.find_spec("onnxruntime") else "opencv"
    return runtime


class OnnxRunner:
    """One loaded network. ``where`` names the model file in error messages; ``threads`` caps the
    runtime's intra-op threads (None: the runtime's default)."""

    def __init__(self, model: onnx.ModelProto, outputs: list[str], runtime: str = "auto",
                 where: str = "<model>", threads: int | None = None):
        if runtime not in RUNTIMES:
            raise ModelError(f"{where}: unknown runtime {runtime!r}; use one of {RUNTIMES}")
        self.runtime = resolve_runtime(runtime)
        self.outputs = list(outputs)
        self.input_name = model.graph.input[0].name
        data = model.SerializeToString()
        try:
            if self.runtime == "opencv":
                self._net = _opencv_net(data, threads)
            else:
                self._session = _ort_session(data, where, threads)
        except ModelError:
            raise
        except Exception as exc:  # the runtime rejected the graph: say which and why
            detail = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
            raise ModelError(f"{where}: {self.runtime} cannot load the model ({detail})") \
                from None

    def run(self, blob: np.ndarray) -> list[np.ndarray]:
        """float32 input (e.g. [1, 3, H, W]) -> the outputs, in the order given at construction."""
        if self.runtime == "opencv":
            self._net.setInput(blob, self.input_name)
            outs = self._net.forward(self.outputs)
            return [np.asarray(o, dtype=np.float32) for o in outs]
        return self._session.run(self.outputs, {self.input_name: blob})


def _opencv_net(data: bytes, threads: int | None):
    import cv2

    if threads is not None:
        cv2.setNumThreads(threads)
    return cv2.dnn.readNetFromONNX(np.frombuffer(data, dtype=np.uint8))


def _ort_session(data: bytes, where: str, threads: int | None):
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ModelError(f"{where}: runtime 'onnxruntime' requested but onnxruntime is not "
                         f"installed (pip install 'cuvil-perception[ort]')") from exc
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    # Idle worker threads would otherwise spin and steal the cores the other stages run on.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
