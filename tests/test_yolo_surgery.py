"""Head surgery on Detect-pattern models: cut model + native head == uncut model + postprocess."""

import itertools
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from cuvil_perception.errors import ModelError
from cuvil_perception.ops.yolo import (NativeHead, YoloV8, cut_model, find_head,
                                       inspect_interface, reference)
from cuvil_perception.ops.yolo.surgery import HeadNotCuttable
from cuvil_perception.ops.onnx_runner import OnnxRunner
from cuvil_perception.testing.yolo_onnx import build_yolov8_onnx

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "yolov8"
VARIANTS = list(itertools.product(["split", "fused"], [False, True], [12, 17]))


def save(model: onnx.ModelProto, tmp_path: Path, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def blob(hw, seed=0):
    return np.random.default_rng(seed).random((1, 3, *hw), dtype=np.float32)


@pytest.mark.parametrize("style,simplify,opset", VARIANTS)
def test_cut_plus_native_equals_uncut_plus_postprocess(style, simplify, opset):
    hw = (96, 64)
    model = build_yolov8_onnx(hw, 3, style=style, simplify=simplify, opset=opset, seed=opset,
                              class_bias=-0.5)
    info = inspect_interface(model, "test")
    layout = find_head(model, info)
    assert layout.style == style and layout.grids == ((12, 8), (6, 4), (3, 2))
    assert layout.strides == (8.0, 16.0, 32.0) and layout.nc == 3
    cut = cut_model(model, layout)
    onnx.checker.check_model(cut)
    kept_ops = {n.op_type for n in cut.graph.node}
    assert not kept_ops & {"Softmax", "Split", "Slice", "Reshape"}  # only the trunk remains
    names = [f"{k}{i}" for i in range(3) for k in ("box", "cls")]
    assert [o.name for o in cut.graph.output] == names
    for runtime in ("onnxruntime", "opencv"):
        x = blob(hw, seed=1)
        full = OnnxRunner(model, ["output0"], runtime).run(x)[0]
        want = reference.postprocess(full, iou=0.5)
        assert len(want) >= 3  # the test model does produce detections
        outs = OnnxRunner(cut, names, runtime).run(x)
        got = NativeHead(layout.grids, layout.strides, 3, iou=0.5).run(outs[0::2], outs[1::2])
        assert got.shape == want.shape
        np.testing.assert_array_equal(got[:, 5], want[:, 5])
        np.testing.assert_allclose(got[:, :4], want[:, :4], atol=2e-4)
        np.testing.assert_allclose(got[:, 4], want[:, 4], atol=1e-6)


@pytest.mark.parametrize("imgsz", [64, (32, 96), (160, 128)])
def test_input_sizes(imgsz, tmp_path):
    model = build_yolov8_onnx(imgsz, 5, seed=2, class_bias=-0.5)
    det = YoloV8.from_onnx(save(model, tmp_path), runtime="onnxruntime")
    assert det.cut and det.nc == 5
    h, w = (imgsz, imgsz) if isinstance(imgsz, int) else imgsz
    assert det.layout.grids == tuple((h // s, w // s) for s in (8, 16, 32))
    image = np.random.default_rng(0).integers(0, 255, (50, 70, 3), dtype=np.uint8)
    rows = det.detect(image)
    assert rows.dtype == np.float32 and rows.shape[1] == 6
    assert (rows[:, [0, 2]] <= 70).all() and (rows[:, [1, 3]] <= 50).all()


def test_not_a_yolo_model_gives_model_error(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                                [x], [y]))
    with pytest.raises(ModelError, match="expected an ultralytics YOLOv8 detect export"):
        YoloV8.from_onnx(save(model, tmp_path))
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ModelError, match="junk.onnx"):
        YoloV8.from_onnx(tmp_path / "junk.onnx")
    with pytest.raises(ModelError, match="no such ONNX file"):
        YoloV8.from_onnx(tmp_path / "missing.onnx")


def test_wrong_task_and_anchor_count(tmp_path):
    model = build_yolov8_onnx(64, 3)
    for prop in model.metadata_props:
        if prop.key == "task":
            prop.value = "segment"
    with pytest.raises(ModelError, match="task is 'segment'"):
        YoloV8.from_onnx(save(model, tmp_path))
    model = build_yolov8_onnx(64, 3)
    model.graph.output[0].type.tensor_type.shape.dim[2].dim_value = 99
    with pytest.raises(ModelError, match=r"expected \[1, 4 \+ nc, 84\]"):
        YoloV8.from_onnx(save(model, tmp_path, "b.onnx"))


def test_uncuttable_head_falls_back_to_full_output(tmp_path):
    model = build_yolov8_onnx(64, 3, class_bias=-0.5)
    # hide the Sigmoid behind an Identity: the interface is right, the head pattern is not
    final = next(n for n in model.graph.node if "output0" in n.output)
    model.graph.node.append(helper.make_node("Identity", [final.input[1]], ["hidden"]))
    final.input[1] = "hidden"
    with pytest.raises(HeadNotCuttable):
        find_head(model, inspect_interface(model, "t"))
    det = YoloV8.from_onnx(save(model, tmp_path), runtime="onnxruntime", iou=0.5)
    assert not det.cut and "head not cut" in det.fallback_reason
    x = blob((64, 64))
    full = OnnxRunner(model, ["output0"], "onnxruntime").run(x)[0]
    np.testing.assert_array_equal(det.infer_head([full]), reference.postprocess(full, iou=0.5))


@pytest.mark.skipif(not (DATA / "yolov8n_random.onnx").is_file(), reason="no shared data")
def test_real_export_is_cut_at_the_raw_convs():
    model = onnx.load(str(DATA / "yolov8n_random.onnx"))
    layout = find_head(model, inspect_interface(model, "real"))
    assert layout.style == "split" and layout.nc == 80
    assert layout.grids == ((80, 80), (40, 40), (20, 20))
    assert all(t.startswith("/model.22/cv2.") for t in layout.box_tensors)
    assert all(t.startswith("/model.22/cv3.") for t in layout.cls_tensors)


@pytest.mark.skipif(not (DATA / "yolov8n_random.onnx").is_file(), reason="no shared data")
def test_real_export_constant_folded_still_cuts(tmp_path):
    """The real export after ONNX Runtime's constant folding (the Shape/Gather/Slice chunk and
    Constant nodes folded, as ``simplify=True`` does) is found and reproduces ultralytics' NMS."""
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(tmp_path / "folded.onnx")
    ort.InferenceSession(str(DATA / "yolov8n_random.onnx"), options,
                         providers=["CPUExecutionProvider"])
    model = onnx.load(str(tmp_path / "folded.onnx"))
    assert "Shape" not in {n.op_type for n in model.graph.node}
    layout = find_head(model, inspect_interface(model, "folded"))
    names = [f"{k}{i}" for i in range(3) for k in ("box", "cls")]
    expected = np.load(DATA / "expected_ultralytics.npz")
    outs = OnnxRunner(cut_model(model, layout), names, "onnxruntime").run(
        expected["bus_letterboxed"])
    got = NativeHead(layout.grids, layout.strides, 80).run(outs[0::2], outs[1::2])
    want = expected["bus_nms"]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got[:, 5], want[:, 5])
    box_tol, score_tol = _trunk_noise(expected["bus_letterboxed"], expected["bus_output0"])
    np.testing.assert_allclose(got[:, :4], want[:, :4], rtol=0, atol=box_tol)
    np.testing.assert_allclose(got[:, 4], want[:, 4], rtol=0, atol=score_tol)


# float32 rounding of the head itself: a few ulps of the largest coordinate (640 px) or score.
HEAD_ULPS = 8
# More trunk noise than this is not CPU rounding: the runtime computes something else.
MAX_TRUNK_NOISE_PX = 0.05


def _trunk_noise(image: np.ndarray, recorded: np.ndarray, conf: float = 0.25):
    """(box, score) tolerances for comparing with outputs recorded on another machine.

    The recorded NMS rows came from ONNX Runtime on the machine that made the data; here the
    trunk's float32 convolutions accumulate in another order (SIMD width, FMA, thread split),
    which moves its outputs by an amount that depends on the CPU (up to ~0.009 px seen). That
    amount is measured, not guessed: the uncut model runs here on the same input and is compared
    with the recorded ``output0`` over the anchors that pass ``conf``. A box corner is x +- w/2,
    so its noise is |dx| + |dw| / 2. The native head may add its own float32 rounding
    (HEAD_ULPS ulps of 640 px, of a score near 1) but nothing more; the trunk noise itself must
    stay below MAX_TRUNK_NOISE_PX, so a wrong runtime cannot widen the tolerance.
    """
    here = OnnxRunner(onnx.load(str(DATA / "yolov8n_random.onnx")), ["output0"],
                      "onnxruntime").run(image)[0][0]
    there = recorded[0]
    candidates = there[4:].max(axis=0) > conf
    delta = np.abs(here[:, candidates] - there[:, candidates]).astype(np.float64)
    corner = max((delta[0] + delta[2] / 2).max(), (delta[1] + delta[3] / 2).max())
    score = (np.abs(here[4:, candidates].max(axis=0) - there[4:, candidates].max(axis=0))).max()
    assert corner < MAX_TRUNK_NOISE_PX, f"trunk differs by {corner} px from the recorded output"
    return (corner + HEAD_ULPS * np.spacing(np.float32(640.0)),
            score + HEAD_ULPS * np.spacing(np.float32(1.0)))
