"""``quantize_model``: a detector's ONNX file -> the same file with its network in static INT8
(QDQ), calibrated on frames of a drive.

What is quantised is the part ONNX Runtime runs for the op, nothing else:

* YOLOv8 export: the trunk up to the raw per-level box / class convolutions (the part
  ``surgery.cut_model`` keeps). The head after it (DFL, anchors, concat) stays in float — the
  native head replaces it at run time anyway, and ``find_head`` still recognises it.
* CUDA-PointPillars model: the BEV part after the scatter (``onnx_split``) as the sparse path
  runs it (``quantize.pillars``). The PFN and the ``PPScatterPlugin`` node are untouched (the
  native kernels run them from the float weights); layers the sparse path computes natively
  (``onnx_sparse``: the first Conv + BN + ReLU, the box / direction heads) stay in float, so
  the int8 file keeps the sparse path.

The result is a file of the same layout, loaded by the same op (``model: X.int8.onnx``); ONNX
Runtime fuses each DequantizeLinear -> Conv -> QuantizeLinear group into an integer convolution.
Settings: per-channel symmetric int8 weights, uint8 activations (ONNX Runtime's recommended
"U8S8" for x86), min/max calibration, ``Conv`` and ``MatMul`` quantised, and ``Relu``: a Relu
right after a quantised Conv is removed and the conv's output quantised on the Relu's range
[0, max] (the quantiser's "removable activation"). Left float, the Relu cost a dequantise /
quantise pair per layer and the conv output was quantised on its signed range, half of the
uint8 steps spent on values the Relu zeroes. On PointPillars that coarser step shifted the
class logits of whole regions (the empty ~97 % of the BEV map is one constant per channel, so
its rounding error does not average out): the demo model's candidate cells went from ~200 to
~17 000 per frame, and the candidate heads and NMS cost more than int8 saved. Other element-wise
ops (YOLO's SiLU: Sigmoid * Mul) stay float.

Weights are 7-bit: every int8 weight lies in the signed 7-bit range [-64, 63], so the file
computes the same on every CPU. Why: on x86 without VNNI (AVX2-only, e.g. AMD Zen 3) ONNX
Runtime's u8 x s8 convolution multiplies with ``vpmaddubsw``, which adds two u8 x s8 products
into a saturating int16 (``machine_info.Cpu.int8_saturates``). With 8-bit weights two products
reach 2 x 255 x 127 = 64 770 > 32 767: large activations were clipped, and the 8-bit YOLO lost
0.23 mAP there (0.846 -> 0.620 on the model card's seed-3000 drive) while scoring like fp32 on
AVX-512 VNNI. With |w| <= 64 a pair is at most 2 x 255 x 64 = 32 640: exact, so AVX2 and VNNI
give the same integers. How: symmetric per-channel int8 weights use [-127, 127]; ORT's
``reduce_range`` maps them onto [-64, 64] instead (in QDQ it narrows only the weights:
activations keep the full uint8 range; +64 is still exact). ``seven_bit_overrides`` goes with
it and pins each output channel's range (``TensorQuantOverrides``) so that the step is
max(-min(w) / 64, max(w) / 63): the weights fit the signed 7-bit range [-64, 63] (the property
the tests check, a bound that names the bits), the most negative weight may still use -64.
Activations stay full-range uint8 (U8S8, ORT's fast x86 path). Measured on the demo YOLO
(MODEL_CARD.md, AVX-512 VNNI): within 0.01 of fp32's mAP on two held-out drives, as plain
``reduce_range``; S8S8 activations were 3x slower, and percentile or entropy calibration, 40
frames or a float first conv changed nothing beyond the drives' noise.
"""

from __future__ import annotations

import logging
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import version_converter

from ..drives import Drive
from ..errors import ModelError, UsageError
from .calibration import DriveFrames, frame_indices
from .pillars import into_layout, pillars_part

OP_TYPES = ("Conv", "MatMul", "Relu")
QDQ_OPSET = 13


@dataclass
class QuantizeSummary:
    """What ``quantize_model`` did: model kind, calibration frames, node counts, sizes (bytes),
    the (lowest, highest) int8 weight (``int8_weights``)."""

    kind: str
    frames: int
    quantized_nodes: int
    float_nodes: int
    bytes_in: int
    bytes_out: int
    out: Path
    weight_range: tuple[int, int] = (0, 0)


def model_kind(model: onnx.ModelProto, where: str) -> str:
    """``"pillars"`` (CUDA-PointPillars layout) or ``"yolo"`` (YOLOv8 detect export)."""
    if any(node.op_type == "PPScatterPlugin" for node in model.graph.node):
        return "pillars"
    from ..ops.yolo.surgery import inspect_interface

    try:
        inspect_interface(model, where)
    except ModelError as exc:
        raise ModelError(f"{where}: neither a CUDA-PointPillars model (no PPScatterPlugin node) "
                         f"nor a YOLOv8 detect export ({str(exc).split(': ', 1)[-1]})") from None
    return "yolo"


def quantize_model(model_path: Path, drive_path: Path, frames: int = 32,
                   progress=None) -> tuple[bytes, QuantizeSummary]:
    """The int8 model (serialized) and a summary; the caller writes it (output-path policy)."""
    from ..ops.yolo.surgery import load_model

    if frames < 1:
        raise UsageError(f"--frames must be at least 1, got {frames}")
    model = load_model(Path(model_path))
    where = str(model_path)
    kind = model_kind(model, where)
    drive = Drive(Path(drive_path))
    indices = frame_indices(len(drive), frames)
    if kind == "yolo":
        target, excluded, keep_float, inputs_of = _yolo_part(model, model_path)
        reader = DriveFrames(drive, indices, inputs_of, progress)
        result = float_tensors(_quantize(target, reader, excluded), keep_float)
        float_nodes = len(excluded)
    else:
        target, detector, inputs_of = pillars_part(model_path)
        reader = DriveFrames(drive, indices, inputs_of, progress)
        result, float_nodes = into_layout(model, detector, _quantize(target, reader, []), where)
    data = result.SerializeToString()
    qdq = sum(1 for n in result.graph.node if n.op_type == "DequantizeLinear")
    weights = list(int8_weights(result).values())
    span = (min(int(w.min()) for w in weights), max(int(w.max()) for w in weights)) \
        if weights else (0, 0)
    summary = QuantizeSummary(kind, len(indices), qdq, float_nodes,
                              len(model.SerializeToString()), len(data), Path(model_path), span)
    return data, summary


def int8_weights(model: onnx.ModelProto) -> dict:
    """{initializer name: int8 array} of the int8 initializers DequantizeLinear nodes read (the
    quantised weights; biases are int32)."""
    from onnx import numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    return {node.input[0]: numpy_helper.to_array(inits[node.input[0]])
            for node in model.graph.node
            if node.op_type == "DequantizeLinear" and node.input[0] in inits
            and inits[node.input[0]].data_type == onnx.TensorProto.INT8}


def _yolo_part(model: onnx.ModelProto, path: Path):
    """The whole export, its head nodes excluded; inputs: the letterboxed image."""
    from ..ops.yolo.model import YoloV8
    from ..ops.yolo.surgery import HeadNotCuttable, cut_model, find_head, inspect_interface

    info = inspect_interface(model, str(path))
    try:
        layout = find_head(model, info)
        trunk = {n.name for n in cut_model(model, layout).graph.node}
        level_outputs = list(layout.box_tensors) + list(layout.cls_tensors)
    except HeadNotCuttable:  # the runtime runs the whole graph
        trunk, level_outputs = {n.name for n in model.graph.node}, []
    excluded = [n.name for n in model.graph.node if n.name not in trunk]
    detector = YoloV8.from_onnx(path, runtime="onnxruntime", threads=1)
    return model, excluded, level_outputs, lambda frame: detector.ort_inputs(frame.image)


def float_tensors(model: onnx.ModelProto, tensors: list[str]) -> onnx.ModelProto:
    """Remove the QuantizeLinear -> DequantizeLinear pair the quantiser put on each of
    ``tensors`` (their readers get the float tensor again). The YOLO head's per-level conv
    outputs stay float this way, so ``find_head`` finds them as Conv outputs."""
    graph = model.graph
    drop, rename = set(), {}
    for tensor in tensors:
        for q in (n for n in graph.node if n.op_type == "QuantizeLinear" and n.input[0] == tensor):
            for dq in (n for n in graph.node if n.op_type == "DequantizeLinear"
                       and n.input[0] == q.output[0]):
                rename[dq.output[0]] = tensor
                drop.add(dq.name)
            drop.add(q.name)
    nodes = [n for n in graph.node if n.name not in drop]
    for node in nodes:
        for i, name in enumerate(node.input):
            node.input[i] = rename.get(name, name)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def _quantize(model: onnx.ModelProto, reader: DriveFrames, excluded: list[str]):
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, \
        quantize_static

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < QDQ_OPSET:  # per-channel DequantizeLinear (its axis) needs opset 13
        model = version_converter.convert_version(model, QDQ_OPSET)
    with tempfile.TemporaryDirectory(prefix="cuvil-quantize-") as tmp, _quiet_root_logger():
        source, target = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(source))
        quantize_static(str(source), str(target), reader, quant_format=QuantFormat.QDQ,
                        op_types_to_quantize=list(OP_TYPES), per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        nodes_to_exclude=list(excluded),
                        calibrate_method=CalibrationMethod.MinMax,
                        reduce_range=True,
                        extra_options={"WeightSymmetric": True, "ActivationSymmetric": False,
                                       "TensorQuantOverrides": seven_bit_overrides(
                                           model, excluded)})
        return onnx.load(str(target))


# Where each quantised op keeps its output channels in its weight (ORT's per-channel axis).
WEIGHT_AXIS = {"Conv": 0, "MatMul": -1}
# With ``reduce_range`` ORT quantises a symmetric range [-r, r] onto [-64, 64] (step r / 64); a
# channel's largest positive weight w must map to 63 at most: r >= w x 64 / 63.
SEVEN_BIT_WIDENING = 64.0 / 63.0


def seven_bit_overrides(model: onnx.ModelProto, excluded: list[str]) -> dict:
    """ORT ``TensorQuantOverrides`` that put every quantised weight of ``model`` (Conv / MatMul
    initializers, nodes in ``excluded`` left out) in [-64, 63]: {initializer name: [per output
    channel {"rmin": -r, "rmax": r} (float32, r = max(-min(w), max(w) x 64 / 63)), the first
    also {"axis", "symmetric", "reduce_range"}]}."""
    from onnx import numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    skip = set(excluded)
    overrides = {}
    for node in model.graph.node:
        axis = WEIGHT_AXIS.get(node.op_type)
        if axis is None or node.name in skip or len(node.input) < 2:
            continue
        name = node.input[1]
        if name not in inits or name in overrides:
            continue
        weight = numpy_helper.to_array(inits[name]).astype(np.float32)
        if weight.ndim < 2:
            continue
        channels = np.moveaxis(weight, axis, 0).reshape(weight.shape[axis], -1)
        bounds = np.maximum(-channels.min(axis=1),
                            channels.max(axis=1) * np.float32(SEVEN_BIT_WIDENING))
        rows = [{"rmin": np.float32(-b), "rmax": np.float32(b)} for b in bounds]
        rows[0].update(axis=axis, symmetric=True, reduce_range=True)
        overrides[name] = rows
    return overrides


@contextmanager
def _quiet_root_logger():
    """onnxruntime.quantization logs advice ("consider pre-processing") on the root logger; the
    pre-processing would rename nodes this module selects by name, so it is not wanted here."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
