"""The sparse PointPillars path: scatter fused into the first conv, box / direction heads at
candidate cells. Native kernels against their numpy twins (random layer shapes, real KITTI frames
with the random-weight KITTI-grid model, the sample drive with the demo model), and the whole
detector against the dense path (``sparse: off``)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from cuvil_perception.errors import ConfigError, PipelineError
from cuvil_perception.graph import builtin_models_dir, load_pipeline, lookup
from cuvil_perception.ops.pillars import PillarConfig, PointPillars, reference
from cuvil_perception.ops.pillars.native import ScatterKernel
from cuvil_perception.ops.pillars.native_sparse import (ConvScatterKernel, HeadCellsKernel,
                                                        conv_scatter, head_cells)
from cuvil_perception.ops.pillars.op import RANDOM_MODEL
from cuvil_perception.ops.pillars.types import CellHeadWeights, ConvLayer
from cuvil_perception.ops.pillars import HeadConfig
from cuvil_perception.testing.pillars_onnx import build_pointpillars_onnx

SMALL = PillarConfig((0.0, -10.24, -3.0, 20.48, 10.24, 1.0), (0.16, 0.16, 4.0), max_pillars=900)
DEMO = builtin_models_dir() / "pointpillars_cuvil_demo.onnx"
DRIVE_SCANS = "datasets/sample_drive/velodyne_points/data"
# float32 sums in another order than the dense conv: compare relative to the map's magnitude
RTOL = 1e-4


def random_layer(cin: int, cout: int, k: int, stride: int, pads: tuple, seed: int) -> ConvLayer:
    rng = np.random.default_rng(seed)
    weight = rng.normal(0, 1 / np.sqrt(cin * k * k), (cout, cin, k, k)).astype(np.float32)
    return ConvLayer(weight, rng.normal(0, 0.3, cout).astype(np.float32), (stride, stride), pads)


def random_frame(config: PillarConfig, count: int, seed: int):
    """features [P, C] and coords [P, 3] of ``count`` distinct cells, the four corners first."""
    rng = np.random.default_rng(seed)
    corners = np.array([0, config.nx - 1, (config.ny - 1) * config.nx, config.num_cells - 1])
    rest = rng.choice(np.setdiff1d(np.arange(config.num_cells), corners), count, replace=False)
    cells = np.concatenate([corners, rest])[:count]
    coords = np.zeros((config.max_pillars, 3), np.int32)
    coords[:count, 1], coords[:count, 2] = cells // config.nx, cells % config.nx
    features = rng.normal(0, 1, (config.max_pillars, config.num_features)).astype(np.float32)
    return features, coords, count


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = RTOL) -> None:
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("k, stride, pads, cout", [
    (1, 1, (0, 0, 0, 0), 16), (3, 1, (1, 1, 1, 1), 16), (3, 2, (1, 1, 1, 1), 16),
    (1, 2, (0, 0, 0, 0), 20), (3, 2, (0, 0, 0, 0), 20), (3, 1, (0, 1, 1, 0), 8)])
def test_conv_scatter_equals_the_dense_conv_on_random_layers(k, stride, pads, cout):
    config = PillarConfig(SMALL.point_cloud_range, SMALL.voxel_size, max_pillars=900,
                          num_features=32)
    layer = random_layer(32, cout, k, stride, pads, seed=k * 10 + stride)
    kernel = ConvScatterKernel(config, layer).open()
    # A sequence of frames: the persistent map must forget the cells of the frame before.
    for seed, count in ((0, 900), (1, 300), (2, 0), (3, 650)):
        frame = random_frame(config, count, seed)
        want = reference.conv_scatter(*frame, layer, config)
        got = kernel(*frame)
        assert got.shape == want.shape == (*layer.out_size(config.ny, config.nx), cout)
        assert_close(got, want)


def test_conv_scatter_is_deterministic_and_restores_the_constant():
    layer = random_layer(64, 16, 3, 2, (1, 1, 1, 1), seed=4)
    kernel = ConvScatterKernel(SMALL, layer).open()
    first = kernel(*random_frame(SMALL, 700, 5)).copy()
    kernel(*random_frame(SMALL, 400, 6))
    np.testing.assert_array_equal(kernel(*random_frame(SMALL, 700, 5)), first)
    empty = kernel(*random_frame(SMALL, 0, 7))
    np.testing.assert_array_equal(empty, np.broadcast_to(np.maximum(layer.bias, 0), empty.shape))
    assert kernel.reached == 0


def test_native_twin_signatures_match_the_reference():
    layer = random_layer(64, 16, 3, 2, (1, 1, 1, 1), seed=8)
    frame = random_frame(SMALL, 500, 9)
    assert_close(conv_scatter(*frame, layer, SMALL), reference.conv_scatter(*frame, layer, SMALL))
    rng = np.random.default_rng(10)
    head = HeadConfig()
    heads = CellHeadWeights(*(rng.normal(0, 0.2, s).astype(np.float32)
                              for s in ((42, 24), 42, (12, 24), 12)))
    cls_map = rng.normal(-4, 1.5, (1, 20, 30, 18)).astype(np.float32)
    cls_map[0, 0, 0, :4] = [np.nan, -9, -9, 5]  # anchor 0 NaN first, anchor 1 passes
    cls_map[0, 0, 1, :] = -9
    cls_map[0, 0, 1, 1] = np.nan  # a NaN after the first logit is passed over
    feat = rng.normal(0, 1, (1, 24, 20, 30)).astype(np.float32)
    want = reference.head_cells(cls_map, feat, heads, head)
    assert 0 < want.count < 600 and want.cells[0] == 0 and 1 not in want.cells
    # F whole, and F in channel parts (what the network gives after onnx_rewrite.split_concat)
    for parts in (feat, [feat[:, :16], feat[:, 16:20], feat[:, 20:]]):
        got = head_cells(cls_map, parts, heads, head)
        assert got.count == want.count
        np.testing.assert_array_equal(got.cells[:got.count], want.cells)
        for name in ("box", "dir"):
            np.testing.assert_allclose(getattr(got, name)[want.cells],
                                       getattr(want, name)[want.cells], rtol=1e-5, atol=1e-5)


def _scans(paths, count: int) -> list:
    return [np.fromfile(p, np.float32).reshape(-1, 4) for p in sorted(paths)[:count]]


def _real_cases(kitti_frames, repo_root):
    return [(RANDOM_MODEL, PillarConfig(), _scans(kitti_frames, 2)),
            (DEMO, PillarConfig(max_pillars=16000),
             _scans((repo_root / DRIVE_SCANS).glob("*.bin"), 2))]


def test_sparse_kernels_equal_their_twins_on_real_frames(kitti_frames, repo_root):
    for path, config, clouds in _real_cases(kitti_frames, repo_root):
        model = PointPillars.from_onnx(path, config).open()
        assert isinstance(model.scatter, ConvScatterKernel) and model.heads is not None
        for points in clouds:
            pillars = model.pillarize(points)
            features = model.pfn(pillars)
            got = model.scatter(features, pillars.coords, pillars.count)
            assert_close(got, reference.conv_scatter(features, pillars.coords, pillars.count,
                                                     model.plan.conv, config))
            cls_map, *feat = model.runner.network(got)
            cells = model.heads(cls_map, feat)
            want = reference.head_cells(cls_map, feat, model.plan.heads, model.head)
            assert cells.count == want.count > 0
            np.testing.assert_array_equal(cells.cells[:cells.count], want.cells)
            assert_close(cells.box[want.cells], want.box[want.cells], 1e-5)
            assert_close(cells.dir[want.cells], want.dir[want.cells], 1e-5)
        boxes, scores, labels = model.detect(clouds[0])
        ref_boxes, ref_scores, ref_labels = model.detect_reference(clouds[0])
        np.testing.assert_array_equal(labels, ref_labels)
        np.testing.assert_allclose(scores, ref_scores, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(boxes, ref_boxes, rtol=1e-4, atol=1e-4)


def _detections(model: PointPillars, points: np.ndarray):
    """(anchor indices after NMS, scores, boxes) of one frame."""
    cand = model.decode(*model.runner(model.bev(points)))
    kept = model.nms(cand.boxes, cand.scores, cand.count)
    return cand.anchor[kept].copy(), cand.scores[kept].copy(), cand.boxes[kept].copy()


def test_sparse_detections_equal_the_dense_path_on_real_frames(kitti_frames, repo_root):
    for path, config, clouds in _real_cases(kitti_frames, repo_root):
        sparse = PointPillars.from_onnx(path, config, sparse=True).open()
        dense = PointPillars.from_onnx(path, config, sparse=False).open()
        assert isinstance(dense.scatter, ScatterKernel) and dense.heads is None
        if path == DEMO:  # its deblock and concat are rewritten too; the detections still agree
            assert [n.split(" ")[1] for n in sparse.notes if n.startswith("rewritten")] == [
                "ConvTranspose", "Concat"]
        for points in clouds:
            anchors, scores, boxes = _detections(sparse, points)
            want_anchors, want_scores, want_boxes = _detections(dense, points)
            assert len(anchors) > 0
            np.testing.assert_array_equal(anchors, want_anchors)
            np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(boxes, want_boxes, rtol=1e-4, atol=1e-4)


def _edit(model: onnx.ModelProto, edit) -> onnx.ModelProto:
    edit(model.graph)
    return model


def _first_relu_to_sigmoid(graph):
    next(n for n in graph.node if n.name == "Relu_b0").op_type = "Sigmoid"


def _identity_before(graph, role: str):
    transpose = next(n for n in graph.node if n.name == f"Transpose_{role}_preds")
    at = list(graph.node).index(transpose)
    graph.node.insert(at, onnx.helper.make_node("Identity", [transpose.input[0]], [f"{role}_id"],
                                                name=f"{role}_identity"))
    transpose.input[0] = f"{role}_id"


def _identity_before_box_transpose(graph):
    _identity_before(graph, "box")


def _identity_before_class_transpose(graph):
    """A class path that is not a Conv but is computed from the heads' map alone (as in an INT8
    file): the heads still peel."""
    _identity_before(graph, "cls")


def _class_conv_reads_an_earlier_map(graph):
    next(n for n in graph.node if n.name == "Conv_cls_preds").input[0] = "backbone.0.out"


@pytest.mark.parametrize("edit, conv_note, head_note", [
    (None, "sparse: scatter fused into Conv 'Conv_0' + BatchNormalization", "sparse: box"),
    (_first_relu_to_sigmoid, "dense first layer: 'Conv_0' is followed by", "sparse: box"),
    (_identity_before_box_transpose, "sparse: scatter fused", "dense heads: the box output"),
    (_identity_before_class_transpose, "sparse: scatter fused", "sparse: box"),
    (_class_conv_reads_an_earlier_map, "sparse: scatter fused", "dense heads: the class conv"),
])
def test_models_that_do_not_fit_keep_the_dense_part(tmp_path, edit, conv_note, head_note):
    model = build_pointpillars_onnx(SMALL, max_voxels=900, seed=11, cls_bias=-2.0,
                                    batch_norm=True)
    path = tmp_path / "m.onnx"
    onnx.save(_edit(model, edit) if edit else model, str(path))
    sparse = PointPillars.from_onnx(path, SMALL).open()
    dense = PointPillars.from_onnx(path, SMALL, sparse=False).open()
    assert sparse.notes[0].startswith(conv_note) and sparse.notes[1].startswith(head_note)
    assert dense.notes == ["dense: sparse is off (the network runs as exported)"]
    rng = np.random.default_rng(12)
    points = np.hstack([rng.uniform([0, -10, -3], [20, 10, 1], (5000, 3)),
                        rng.uniform(0, 1, (5000, 1))]).astype(np.float32)
    anchors, scores, _ = _detections(sparse, points)
    want_anchors, want_scores, _ = _detections(dense, points)
    assert len(anchors) > 0
    np.testing.assert_array_equal(anchors, want_anchors)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)


def _op(**params):
    cls = lookup("pillars.detect")
    return cls({**{p.name: p.default for p in cls.params}, "model": RANDOM_MODEL,
                "max_pillars": 12000, **params}, {})


def test_op_declares_the_kernels_of_the_path_it_takes(tmp_path):
    sparse, dense = _op(), _op(sparse=False)
    names = [k.name for k in sparse.kernels()]
    assert "pillars.conv_scatter" in names and "pillars.head_cells" in names
    assert "pillars.scatter_lines" not in names
    assert [k.name for k in dense.kernels()] == [
        "pillars.pillarize", "pillars.pfn", "pillars.scatter_lines", "pillars.decode",
        "pillars.nms"]
    assert any("fused into Conv 'Conv_0'" in line for line in sparse.describe())
    assert dense.describe() == ["dense: sparse is off (the network runs as exported)"]
    # YAML's `off` is false: the natural spelling forces the dense path
    path = tmp_path / "p.yaml"
    path.write_text("pipeline: p\nstages:\n  - {id: drive, op: replay}\n"
                    "  - id: detect\n    op: pillars.detect\n    inputs: {points: drive/points}\n"
                    f"    params:\n      model: {RANDOM_MODEL}\n      sparse: off\n")
    stage = load_pipeline(path).stage("detect")
    assert stage.resolved_params["sparse"] is False


@pytest.mark.parametrize("value, words", [
    ("auto", "string 'auto'"), ("''", "string ''"), ("1", "integer 1"), (".nan", "number nan"),
    ("1.0e+999", "number inf"), ("[true]", "list"), ("null", "null")])
def test_bad_sparse_values_name_the_line_and_field(tmp_path, value, words):
    path = tmp_path / "p.yaml"
    path.write_text("pipeline: p\nstages:\n  - {id: drive, op: replay}\n"
                    "  - id: detect\n    op: pillars.detect\n    inputs: {points: drive/points}\n"
                    f"    params:\n      model: {RANDOM_MODEL}\n      sparse: {value}\n")
    with pytest.raises(PipelineError) as error:
        load_pipeline(path)
    message = str(error.value)
    assert f"{path}:9" in message and "sparse" in message and words in message, message


def test_sparse_mode_is_checked_in_the_python_api():
    with pytest.raises(ConfigError, match="sparse must be True or False, got 'auto'"):
        PointPillars.from_onnx(RANDOM_MODEL, sparse="auto")


def test_inspect_says_which_path_the_model_takes(repo_root):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "cuvil_perception", "inspect",
                             str(repo_root / "configs" / "lidar_pillars.yaml")],
                            capture_output=True, text=True, timeout=300,
                            env={**__import__("os").environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "detect: sparse: scatter fused into Conv '/block1/block1.0/Conv'" in result.stdout
    assert "detect: sparse: box and direction heads (1x1, 128 -> 42 + 12)" in result.stdout


def test_sparse_detect_is_deterministic(repo_root):
    scans = _scans((repo_root / DRIVE_SCANS).glob("*.bin"), 2)
    model = PointPillars.from_onnx(DEMO, PillarConfig(max_pillars=16000)).open()
    first = [a.copy() for a in model.detect(scans[0])]
    model.detect(scans[1])
    again = model.detect(scans[0])
    for a, b in zip(first, again):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("k, stride, pads", [(3, 2, (1, 1, 1, 1)), (3, 1, (0, 1, 1, 0)),
                                             (1, 2, (0, 0, 0, 0))])
def test_the_reference_is_onnx_conv_semantics(k, stride, pads):
    """reference.conv_scatter against ONNX Runtime's own Conv + Relu on the dense canvas."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    config = PillarConfig(SMALL.point_cloud_range, SMALL.voxel_size, max_pillars=900,
                          num_features=16)
    layer = random_layer(16, 8, k, stride, pads, seed=20 + k)
    frame = random_frame(config, 700, 21)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], pads=list(pads),
                          strides=[stride, stride]),
         helper.make_node("Relu", ["y"], ["z"])], "layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, config.ny, config.nx])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(layer.weight, "w"), numpy_helper.from_array(layer.bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    canvas = reference.scatter(*frame, config)
    want = session.run(None, {"x": canvas[None]})[0][0].transpose(1, 2, 0)
    assert_close(reference.conv_scatter(*frame, layer, config), want)
    assert_close(ConvScatterKernel(config, layer).open()(*frame), want)


def test_heads_wider_than_a_vector_keep_the_dense_path():
    from cuvil_perception.ops.pillars.onnx_sparse import _NoFit, _peel_heads

    with pytest.raises(_NoFit, match="29 anchors per cell give 261 box and direction values"):
        _peel_heads([], {}, {}, 29, None, ())


def test_more_class_logits_than_a_vector_is_a_config_error():
    from cuvil_perception.ops.pillars.config import AnchorClass

    head = HeadConfig(anchors=tuple(AnchorClass(f"c{k}", (1.0, 1.0, 1.0), 0.0)
                                    for k in range(17)), rotations=(0.0,))  # 17 x 17 logits
    weights = CellHeadWeights(*(np.zeros(s, np.float32) for s in ((119, 4), 119, (34, 4), 34)))
    with pytest.raises(ConfigError, match="289 class logits per cell"):
        HeadCellsKernel((4, 4), head, weights)
