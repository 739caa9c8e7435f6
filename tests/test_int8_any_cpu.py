"""INT8 that is right on every CPU: the int8 files compute the same with and without VNNI.

ONNX Runtime's u8 x s8 convolution on x86 CPUs without VNNI (AVX2-only, e.g. AMD Zen 3) adds the
products in pairs into a saturating int16 (``vpmaddubsw``), so a pair of 8-bit weights times
large activations clips (2 x 255 x 127 > 32 767); with weights in the signed 7-bit range
[-64, 63] a pair stays within 2 x 255 x 64 = 32 640 and every CPU gives the same integers
(``quantize.int8``). Tested two ways that hold on any x86-64 CPU:

* the property that guarantees it: every int8 weight of the shipped files and of a file
  ``quantize_model`` writes lies in [-64, 63] (and uses that range: a channel's extreme weight
  quantises to -64 or 63, so no precision is thrown away);
* the consequence, on an AVX2-only CPU emulated by ``qemu-x86_64 -cpu EPYC-Milan``
  (``int8_cpu_support``): a conv with 8-bit weights does saturate there (the emulation reaches
  the int16 path), one with 7-bit weights does not, and the shipped int8 YOLO's trunk gives the
  same bytes as on this CPU, hence the same detections.
"""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cuvil_perception.drives import Drive
from cuvil_perception.graph import builtin_models_dir
from cuvil_perception.ops.yolo import reference
from cuvil_perception.ops.yolo.model import YoloV8
from cuvil_perception.ops.yolo.surgery import cut_model, find_head, inspect_interface, load_model
from cuvil_perception.quantize import quantize_model

from int8_cpu_support import qemu_x86_64, run_as_avx2_cpu, run_natively

REPO = Path(__file__).resolve().parents[1]
DRIVE = REPO / "datasets" / "sample_drive"
SHIPPED = ["yolov8_cuvil_demo.int8.onnx", "pointpillars_cuvil_demo.int8.onnx"]
FLOAT = {"yolo": "yolov8_cuvil_demo.onnx", "pillars": "pointpillars_cuvil_demo.onnx"}


def int8_weights(model: onnx.ModelProto) -> dict:
    """{name: (int8 array, its DequantizeLinear's axis)} of every int8 initializer a
    DequantizeLinear reads."""
    inits = {t.name: t for t in model.graph.initializer}
    found = {}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] in inits:
            tensor = inits[node.input[0]]
            if tensor.data_type == TensorProto.INT8:
                axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
                found[tensor.name] = (numpy_helper.to_array(tensor), axis)
    return found


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> dict:
    """Both demo models quantised now, on 1 frame of the sample drive."""
    return {kind: onnx.load_from_string(quantize_model(builtin_models_dir() / name, DRIVE,
                                                       frames=1)[0])
            for kind, name in FLOAT.items()}


def _models(fresh) -> dict:
    shipped = {name: onnx.load(str(builtin_models_dir() / name)) for name in SHIPPED}
    return {**shipped, **{f"fresh {kind}": model for kind, model in fresh.items()}}


@pytest.mark.parametrize("which", SHIPPED + ["fresh yolo", "fresh pillars"])
def test_every_int8_weight_is_7_bit_and_uses_the_range(fresh, which):
    weights = int8_weights(_models(fresh)[which])
    assert len(weights) >= 8  # every quantised conv (YOLO 29, PointPillars 8)
    for name, (weight, axis) in weights.items():
        assert weight.min() >= -64 and weight.max() <= 63, (name, weight.min(), weight.max())
        if weight.ndim < 2:
            continue
        channels = np.moveaxis(weight, axis, 0).reshape(weight.shape[axis], -1)
        used = (channels.min(axis=1) == -64) | (channels.max(axis=1) == 63) | \
            ~channels.any(axis=1)
        assert used.all(), (name, np.flatnonzero(~used)[:5])


def _one_conv(weight: int) -> bytes:
    """A QDQ 1x1 conv, 16 -> 1 channels, every weight ``weight`` (int8, scale 1 / weight),
    input quantised at scale 1 / 255 (1.0 -> uint8 255); ORT fuses it into a u8 x s8 conv."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"])]
    inits = [numpy_helper.from_array(np.array(v, dtype), name) for name, v, dtype in (
        ("xs", 1 / 255, np.float32), ("xz", 0, np.uint8), ("ws", 1 / weight, np.float32),
        ("wz", 0, np.int8), ("ys", 16 / 255, np.float32), ("yz", 0, np.uint8))]
    inits.append(numpy_helper.from_array(np.full((1, 16, 1, 1), weight, np.int8), "wq"))
    graph = helper.make_graph(nodes, "one_conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [1, 16, 4, 4])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]) \
        .SerializeToString()


@pytest.fixture
def emulator():
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"emulates an x86-64 CPU for this x86-64 Python; this is {platform.machine()}")
    if qemu_x86_64() is None:
        pytest.skip("qemu-x86_64 (Debian qemu-user) is not installed: make setup installs it")


def test_8_bit_weights_saturate_on_the_emulated_avx2_cpu_and_7_bit_ones_do_not(emulator,
                                                                              tmp_path):
    ones = np.ones((1, 16, 4, 4), np.float32)  # uint8 255 everywhere: the worst case
    models = {127: _one_conv(127), 63: _one_conv(63)}
    emulated = run_as_avx2_cpu([(model, ones, ["out"]) for model in models.values()], tmp_path)
    for (weight, model), (avx2,) in zip(models.items(), emulated):
        native, = run_natively(model, ones, ["out"])
        np.testing.assert_allclose(native, 16.0, atol=0.04)  # exact: 16 x 1.0 x 1.0
        saturates = weight > 64  # a pair 2 x 255 x 127 clips at 32 767: about half the sum
        assert (not np.array_equal(avx2, native)) == saturates, (weight, avx2.ravel()[:2])


def test_shipped_int8_yolo_gives_the_same_detections_on_an_avx2_only_cpu(emulator, tmp_path):
    path = builtin_models_dir() / "yolov8_cuvil_demo.int8.onnx"
    model = load_model(path)
    layout = find_head(model, inspect_interface(model, str(path)))
    trunk = cut_model(model, layout).SerializeToString()
    outputs = [t for i in range(len(layout.grids)) for t in (f"box{i}", f"cls{i}")]
    yolo = YoloV8.from_onnx(path, runtime="onnxruntime", threads=1)
    image = Drive(DRIVE).read(4).image
    blob = reference.letterbox(image, yolo.input_hw)
    native = run_natively(trunk, blob, outputs)
    avx2, = run_as_avx2_cpu([(trunk, blob, outputs)], tmp_path)
    for name, a, b in zip(outputs, native, avx2):
        np.testing.assert_array_equal(a, b, err_msg=name)  # the integers are exact on both
    detections = [yolo.infer_head(maps).copy() for maps in (native, avx2)]
    assert len(detections[0]) >= 3
    np.testing.assert_array_equal(*detections)
    np.testing.assert_array_equal(detections[0], yolo.infer_head(yolo.runner.run(blob)))
