"""Native head == numpy reference head (same kept rows; boxes, scores within float32 rounding)."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from cuvil_perception.compile import get_kernel
from cuvil_perception.ops.yolo import NativeHead, reference
from cuvil_perception.ops.yolo.kernel_nms import nms_spec
from cuvil_perception.testing.yolo_onnx import random_head_outputs

GRIDS = [(80, 80), (40, 40), (20, 20)]
STRIDES = [8.0, 16.0, 32.0]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "yolov8"


def assert_same_rows(native: np.ndarray, ref: np.ndarray) -> None:
    """Same rows in the same order; boxes within 1e-4 px plus 2 float32 ulps (the DFL exp differs
    between irutil.vexp and numpy by <= 2 ulp), scores within 1e-6."""
    assert native.shape == ref.shape
    np.testing.assert_array_equal(native[:, 5], ref[:, 5])
    np.testing.assert_allclose(native[:, :4], ref[:, :4], rtol=2.5e-7, atol=1e-4)
    np.testing.assert_allclose(native[:, 4], ref[:, 4], rtol=0, atol=1e-6)


def run_both(box, cls, nc, grids=GRIDS, strides=STRIDES, **options):
    head = NativeHead(grids, strides, nc, **options)
    native = head.run(box, cls).copy()
    return native, reference.head(box, cls, strides, **options), head


@pytest.mark.parametrize("n", [0, 1, 200, 5000])
def test_native_equals_reference_random(n):
    box, cls = random_head_outputs(GRIDS, 80, n, seed=n)
    native, ref, head = run_both(box, cls, 80)
    assert head.last_candidates == n
    assert_same_rows(native, ref)
    assert len(native) == min(len(ref), 300)


def test_native_ties_in_scores_and_classes():
    box, cls = random_head_outputs(GRIDS, 80, 400, seed=7, ties=True)
    native, ref, _ = run_both(box, cls, 80, max_det=1000)
    assert len(np.unique(ref[:, 4])) <= 4  # really tied
    assert_same_rows(native, ref)


@pytest.mark.parametrize("options", [
    dict(classes=[3, 5, 7]),
    dict(classes=[]),                       # every class filtered
    dict(agnostic=True, iou=0.45),
    dict(conf=0.6, max_det=20),
    dict(max_nms=50),
    dict(conf=0.0, iou=0.5),                # every anchor is a candidate
    dict(conf=1.0),                         # none can be
])
def test_native_equals_reference_options(options):
    box, cls = random_head_outputs(GRIDS, 80, 600, seed=11)
    native, ref, _ = run_both(box, cls, 80, **options)
    assert_same_rows(native, ref)


def test_native_small_grid_three_classes():
    grids, strides = [(12, 8), (6, 4), (3, 2)], [8.0, 16.0, 32.0]
    box, cls = random_head_outputs(grids, 3, 40, seed=3)
    native, ref, _ = run_both(box, cls, 3, grids=grids, strides=strides, iou=0.3)
    assert len(ref) > 5
    assert_same_rows(native, ref)


def test_nms_kernel_rules():
    kernel = get_kernel(nms_spec())

    def run(boxes, classes, iou, offset=7680.0, max_det=10):
        boxes = np.asarray(boxes, np.float32)
        classes = np.asarray(classes, np.float32)
        n = len(boxes)
        work, supp = np.empty(5 * n, np.float32), np.empty(n, np.uint8)
        keep = np.empty(10, np.int64)
        k = kernel(boxes.ctypes.data, classes.ctypes.data, n, offset, iou, max_det,
                   work.ctypes.data, supp.ctypes.data, keep.ctypes.data)
        return list(keep[:k])

    assert run([[0, 0, 3, 1], [1, 0, 4, 1]], [0, 0], 0.5) == [0, 1]      # IoU 0.5 is not > 0.5
    assert run([[0, 0, 3, 1], [1, 0, 4, 1]], [0, 0], 0.4999) == [0]
    assert run([[0, 0, 10, 10], [0, 0, 10, 10]], [0, 1], 0.5) == [0, 1]   # class offset
    assert run([[0, 0, 10, 10], [0, 0, 10, 10]], [0, 1], 0.5, offset=0.0) == [0]
    assert run([[20 * i, 0, 20 * i + 10, 10] for i in range(5)], [0] * 5, 0.5, max_det=3) == \
        [0, 1, 2]


@pytest.mark.skipif(not (DATA / "yolov8n_random.onnx").is_file(), reason="no shared data")
def test_native_equals_reference_on_real_trunk_outputs():
    from cuvil_perception.ops.yolo import cut_model, find_head, inspect_interface
    from cuvil_perception.ops.yolo.surgery import load_model
    from cuvil_perception.ops.onnx_runner import OnnxRunner

    model = load_model(DATA / "yolov8n_random.onnx")
    layout = find_head(model, inspect_interface(model, "real"))
    names = [t for i in range(3) for t in (f"box{i}", f"cls{i}")]
    runner = OnnxRunner(cut_model(model, layout), names, "opencv")
    blob = reference.letterbox(cv2.imread(str(DATA / "bus.jpg")), 640)
    outs = runner.run(blob)
    for options in (dict(), dict(conf=0.1, iou=0.5, max_det=1000)):
        native, ref, head = run_both(outs[0::2], outs[1::2], 80, layout.grids, layout.strides,
                                     **options)
        assert head.last_candidates > 300
        assert_same_rows(native, ref)
