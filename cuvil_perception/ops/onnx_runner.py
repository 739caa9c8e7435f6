"""Run an ONNX graph (a detector's trunk or backbone) in OpenCV DNN or ONNX Runtime.

``runtime="opencv"`` uses ``cv2.dnn.readNetFromONNX`` (always installed); ``"onnxruntime"`` uses
ONNX Runtime's CPU provider (the ``ort`` extra); ``"auto"`` takes ONNX Runtime when it is
installed — about twice as fast as OpenCV 5's DNN on the demo backbones here — and OpenCV
otherwise. ``OnnxRunner.runtime`` says which one was chosen. Inputs and outputs are float32.

Execution providers (ONNX Runtime only): ``cpu`` (always there), ``cuda``, ``tensorrt``,
``openvino`` — each needs the onnxruntime build that has it (``onnxruntime-gpu``,
``onnxruntime-openvino``); ``provider_problem`` says in one line what is missing. A session is
placed for a pipeline that runs several stages at once: ``threads`` intra-op threads (the
executor gives each network its share of the cores, ``rt.placement``), one inter-op thread, and
no spin-waiting, so an idle network does not burn the core another stage is computing on.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from pathlib import Path

import numpy as np
import onnx

from ..errors import ModelError
from ..os_threads import name_this_thread

RUNTIMES = ("auto", "opencv", "onnxruntime")
# execution_provider param value -> ONNX Runtime provider name; what provides it
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider",
             "tensorrt": "TensorrtExecutionProvider", "openvino": "OpenVINOExecutionProvider"}
_PACKAGES = {"cuda": "onnxruntime-gpu (with CUDA and cuDNN)",
             "tensorrt": "onnxruntime-gpu with TensorRT", "openvino": "onnxruntime-openvino"}


def resolve_runtime(runtime: str) -> str:
    """``auto`` -> ``onnxruntime`` when importable, else ``opencv``; others unchanged."""
    if runtime == "auto":
        return "onnxruntime" if importlib.util.find_spec("onnxruntime") else "opencv"
    return runtime


def available_providers() -> list[str]:
    """The ``execution_provider`` values this machine's onnxruntime offers ([] without it)."""
    if importlib.util.find_spec("onnxruntime") is None:
        return []
    import onnxruntime as ort

    names = set(ort.get_available_providers())
    return [key for key, name in PROVIDERS.items() if name in names]


def provider_problem(runtime: str, provider: str) -> str | None:
    """Why ``provider`` cannot run here (one line), or None. ``cpu`` is always fine."""
    if provider not in PROVIDERS:
        return f"must be one of {', '.join(repr(k) for k in PROVIDERS)}, got {provider!r}"
    if provider == "cpu":
        return None
    chosen = resolve_runtime(runtime)
    if chosen != "onnxruntime":
        return (f"execution provider '{provider}' needs runtime onnxruntime (runtime is "
                f"{runtime!r}{' -> opencv' if runtime == 'auto' else ''})")
    available = available_providers()
    if provider not in available:
        return (f"execution provider '{provider}' ({PROVIDERS[provider]}) is not in this "
                f"onnxruntime (available: {', '.join(available) or 'none'}); install "
                f"{_PACKAGES[provider]}")
    return None


class OnnxRunner:
    """One loaded network. ``where`` names the model file in error messages; ``threads`` caps the
    runtime's intra-op threads (None: the runtime's default); ``provider`` is an
    ``execution_provider`` value (ONNX Runtime only)."""

    def __init__(self, model: onnx.ModelProto, outputs: list[str], runtime: str = "auto",
                 where: str = "<model>", threads: int | None = None, provider: str = "cpu"):
        if runtime not in RUNTIMES:
            raise ModelError(f"{where}: unknown runtime {runtime!r}; use one of {RUNTIMES}")
        problem = provider_problem(runtime, provider)
        if problem is not None:
            raise ModelError(f"{where}: {problem}")
        self.runtime = resolve_runtime(runtime)
        self.threads = threads
        self.outputs = list(outputs)
        self.input_name = model.graph.input[0].name
        data = model.SerializeToString()
        try:
            if self.runtime == "opencv":
                self._net = _opencv_net(data, threads)
            else:
                self._session = _ort_session(data, where, threads, PROVIDERS[provider])
        except ModelError:
            raise
        except Exception as exc:  # the runtime rejected the graph: say which and why
            detail = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
            raise ModelError(f"{where}: {self.runtime} cannot load the model ({detail})") \
                from None

    def describe(self) -> str:
        """Where the network runs, for ``run``'s placement lines."""
        if self.runtime == "opencv":
            threads = "default threads" if self.threads is None else f"{self.threads} thread(s)"
            return f"OpenCV DNN, {threads}"
        providers = [p.replace("ExecutionProvider", "") for p in self._session.get_providers()]
        threads = "default" if self.threads is None else str(self.threads)
        return (f"onnxruntime {'+'.join(providers)}, intra-op threads {threads}, inter-op 1, "
                "no spin-wait")

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


def _ort_session(data: bytes, where: str, threads: int | None, provider: str):
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ModelError(f"{where}: runtime 'onnxruntime' requested but onnxruntime is not "
                         f"installed (pip install 'cuvil-perception[ort]')") from exc
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Idle worker threads would otherwise spin and steal the cores the other stages run on.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    providers = [provider] + (["CPUExecutionProvider"] if provider != "CPUExecutionProvider"
                              else [])
    return _on_named_thread(_thread_name(where),
                            lambda: ort.InferenceSession(data, options, providers=providers))


def _thread_name(where: str) -> str:
    """``cuvil-ort-`` and the first letters of the model file's name (``cuvil-ort-yolov``,
    ``cuvil-ort-point``): 15 bytes, the kernel's limit for a thread name."""
    stem = re.sub(r"[^A-Za-z0-9]", "", Path(where.split()[0].rpartition(":")[2]).stem)
    return "cuvil-ort-" + (stem[:5] or "model")


def _on_named_thread(name: str, make):
    """``make()`` on a short-lived thread whose OS name is ``name``: the intra-op threads ONNX
    Runtime starts for a session inherit their creator's name (Linux copies it), so ``top -H``
    shows ``cuvil-ort-yolov`` instead of the process's name. Exceptions pass through."""
    box: dict = {}

    def body() -> None:
        name_this_thread(name)
        try:
            box["value"] = make()
        except BaseException as exc:  # re-raised on the caller's thread below
            box["error"] = exc

    thread = threading.Thread(target=body, name=name)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
