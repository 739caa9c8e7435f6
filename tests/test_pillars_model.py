"""PointPillars.from_onnx on test-built CUDA-PointPillars models, layout errors, the graph op and
configs/lidar_pillars.yaml end to end."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from cuvil_perception.errors import ModelError
from cuvil_perception.graph import load_pipeline
from cuvil_perception.ops.pillars import PillarConfig, PointPillars, reference
from cuvil_perception.ops.pillars.op import RANDOM_MODEL
from cuvil_perception.testing.pillars_onnx import build_pointpillars_onnx, write_pointpillars_onnx

SMALL = PillarConfig((0.0, -10.24, -3.0, 20.48, 10.24, 1.0), (0.16, 0.16, 4.0), max_pillars=4000)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("pp") / "small.onnx"
    return write_pointpillars_onnx(path, SMALL, max_voxels=4000, cls_bias=-3.0, seed=3)


def cloud(seed: int, n: int = 6000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    xyz = rng.uniform([-1, -11, -3.5], [21, 11, 1.5], (n, 3))
    return np.hstack([xyz, rng.uniform(0, 1, (n, 1))]).astype(np.float32)


def test_bev_equals_reference_pfn_and_scatter(small_model, kitti_frames):
    model = PointPillars.from_onnx(small_model, SMALL, sparse=False).open()
    for points in [cloud(0), cloud(1), np.fromfile(kitti_frames[0], np.float32).reshape(-1, 4)]:
        got = model.bev(points)
        pillars = reference.pillarize(points, SMALL)
        want = reference.scatter(reference.pfn(pillars, model.split.pfn, SMALL), pillars.coords,
                                 pillars.count, SMALL)
        assert got.shape == (64, SMALL.ny, SMALL.nx)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


def test_pfn_weights_come_from_the_onnx_nodes(small_model):
    model = PointPillars.from_onnx(small_model, SMALL)
    graph = onnx.load(small_model).graph
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    np.testing.assert_array_equal(model.split.pfn.linear, inits["pfn.linear.weight"])
    np.testing.assert_array_equal(model.split.pfn.var, inits["pfn.norm.running_var"])
    assert model.split.pfn.eps == pytest.approx(1e-3)


@pytest.mark.parametrize("runtime", ["opencv", "onnxruntime"])
def test_detect_equals_reference_path(small_model, runtime):
    if runtime == "onnxruntime":
        pytest.importorskip("onnxruntime")
    # The dense path: native and numpy pre/post around the very same network input, so the
    # random model's many near-tied scores come out bitwise alike (the sparse path's twins
    # are compared on real frames in test_pillars_sparse).
    model = PointPillars.from_onnx(small_model, SMALL, runtime=runtime, sparse=False).open()
    for seed in (2, 3):
        boxes, scores, labels = model.detect(cloud(seed))
        ref_boxes, ref_scores, ref_labels = model.detect_reference(cloud(seed))
        assert len(boxes) > 0 and boxes.dtype == np.float32 and labels.dtype == np.int32
        np.testing.assert_array_equal(labels, ref_labels)
        np.testing.assert_allclose(scores, ref_scores, rtol=1e-5)
        np.testing.assert_allclose(boxes, ref_boxes, rtol=1e-5, atol=1e-5)
        assert np.all(np.diff(scores) <= 0)


def _edit(model: onnx.ModelProto, edit) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    edit(copy.graph)
    return copy


def _drop_node(op_type):
    def edit(graph):
        node = next(n for n in graph.node if n.op_type == op_type)
        for other in graph.node:
            for k, name in enumerate(other.input):
                if name == node.output[0]:
                    other.input[k] = node.input[0]
        graph.node.remove(node)
    return edit


def _rename_op(old, new):
    def edit(graph):
        next(n for n in graph.node if n.op_type == old).op_type = new
    return edit


def _drop_input(name):
    def edit(graph):
        graph.input.remove(next(i for i in graph.input if i.name == name))
    return edit


@pytest.mark.parametrize("edit, words", [
    (_drop_node("BatchNormalization"), "'Relu_0' (Relu) in the PFN part; expected "
                                       "BatchNormalization"),
    (_rename_op("Relu", "Sigmoid"), "'Relu_0' (Sigmoid) in the PFN part; expected Relu"),
    (_rename_op("PPScatterPlugin", "Identity"), "exactly one PPScatterPlugin node, found 0"),
    (_drop_input("voxel_idxs"), "no input 'voxel_idxs'"),
    (_rename_op("ReduceMax", "ReduceMean"), "'ReduceMax_0' (ReduceMean)"),
])
def test_layout_errors_name_the_node(tmp_path, edit, words):
    path = tmp_path / "bad.onnx"
    onnx.save(_edit(build_pointpillars_onnx(SMALL, max_voxels=100), edit), str(path))
    with pytest.raises(ModelError, match=words.replace("(", r"\(").replace(")", r"\)")):
        PointPillars.from_onnx(path, SMALL)


def _reduce_axes_as_input(graph):
    """Opset 18+: ReduceMax takes ``axes`` as an input tensor instead of an attribute."""
    node = next(n for n in graph.node if n.op_type == "ReduceMax")
    del node.attribute[:]
    node.attribute.append(onnx.helper.make_attribute("keepdims", 0))
    graph.initializer.append(onnx.numpy_helper.from_array(np.array([1], np.int64), "rm_axes"))
    node.input.append("rm_axes")


def _keepdims_as_list(graph):
    """What CUDA-PointPillars' modify_onnx.py writes: ``keepdims = [0]`` (an INTS attribute)."""
    node = next(n for n in graph.node if n.op_type == "ReduceMax")
    kept = [a for a in node.attribute if a.name != "keepdims"]
    del node.attribute[:]
    node.attribute.extend(kept + [onnx.helper.make_attribute("keepdims", [0])])


def _weights_in_constant_nodes(graph):
    """An unsimplified export keeps the PFN weights in Constant nodes, not initializers."""
    for name in ("pfn.linear.weight", "pfn.norm.running_var"):
        tensor = next(t for t in graph.initializer if t.name == name)
        graph.initializer.remove(tensor)
        graph.node.insert(0, onnx.helper.make_node("Constant", [], [name], value=tensor))


@pytest.mark.parametrize("edit", [_reduce_axes_as_input, _keepdims_as_list,
                                  _weights_in_constant_nodes])
def test_export_variants_split_to_the_same_pfn(tmp_path, edit):
    plain = PointPillars.from_onnx(_save(tmp_path / "a.onnx", build_pointpillars_onnx(
        SMALL, max_voxels=100, seed=5)), SMALL)
    variant = PointPillars.from_onnx(_save(tmp_path / "b.onnx", _edit(build_pointpillars_onnx(
        SMALL, max_voxels=100, seed=5), edit)), SMALL)
    for field in ("linear", "gamma", "beta", "mean", "var"):
        np.testing.assert_array_equal(getattr(variant.split.pfn, field),
                                      getattr(plain.split.pfn, field))


def _save(path, model):
    onnx.save(model, str(path))
    return path


def test_grid_mismatch_and_bad_files_are_model_errors(tmp_path, small_model):
    with pytest.raises(ModelError, match=r"dense_shape \[128, 128\] does not match .*"
                                         r"\[496, 432\]"):
        PointPillars.from_onnx(small_model)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="garbage.onnx"):
        PointPillars.from_onnx(garbage, SMALL)
    with pytest.raises(ModelError, match="not found"):
        PointPillars.from_onnx(tmp_path / "missing.onnx", SMALL)


def test_lidar_pillars_config_runs_end_to_end(repo_root, tmp_path, monkeypatch):
    from cuvil_perception.compile import registry
    from cuvil_perception.rt import RunOptions, run_pipeline

    # Nothing memoised or on disk: a kernel open() binds without declaring it would compile there.
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    registry.clear_memory()

    # A copy in tmp_path with the file-relative paths made absolute and the output redirected.
    text = (repo_root / "configs" / "lidar_pillars.yaml").read_text()
    text = text.replace("../runs/lidar_pillars/detections.jsonl", str(tmp_path / "out.jsonl"))
    text = text.replace("../", f"{repo_root}/")
    config = tmp_path / "lidar_pillars.yaml"
    config.write_text(text)
    result = run_pipeline(load_pipeline(config), RunOptions(frames=2, write_record=False,
                                                           workers=1))
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(lines) == 2
    outputs = lines[0]["outputs"]
    assert outputs["boxes"]["shape"][1] == 7 and outputs["stats"]["shape"] == [8]
    assert outputs["stats"]["data"][0] > 1000  # pillars in a real scan
    assert result.compiles_after_frame0 == 0  # counted from prewarm on: open() included
    assert [r["status"] for r in result.prewarm] == ["miss"] * 6  # with the sparse kernels


def test_op_ports_are_static_and_params_validated():
    from cuvil_perception.graph import lookup

    cls = lookup("pillars.detect")
    op = cls({**{p.name: p.default for p in cls.params}, "model": RANDOM_MODEL}, {})
    assert [p.name for p in op.output_ports()] == ["boxes", "scores", "labels", "stats"]
    assert [k.name for k in op.kernels()] == [
        "pillars.pillarize", "pillars.pfn", "pillars.conv_scatter", "pillars.decode",
        "pillars.nms", "pillars.head_cells"]
    bad = cls({**{p.name: p.default for p in cls.params}, "voxel_size": [0.3, 0.16, 4.0]}, {})
    with pytest.raises(ValueError, match="does not divide"):
        bad.check()


@pytest.mark.parametrize("name, value, blamed", [
    ("nms_post", 0, "nms_post"), ("nms_pre", 0, "nms_pre"), ("max_pillars", 0, "max_pillars"),
    ("anchor_rotations", [], "anchor_rotations"), ("score_threshold", 1.5, "score_threshold"),
    ("voxel_size", [0.3, 0.16, 4.0], "voxel_size"),
    ("point_cloud_range", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "point_cloud_range"),
    ("point_cloud_range", [0.0, -39.68, -3.0, 69.12, 39.52, 1.0], "voxel_size"),  # 495 rows, stride 2
])
def test_config_errors_blame_the_param_they_are_about(name, value, blamed):
    """Check() past the param ranges (a Python caller): the config's field names the param."""
    from cuvil_perception.graph import ParamProblem, lookup

    cls = lookup("pillars.detect")
    bad = cls({**{p.name: p.default for p in cls.params}, name: value}, {})
    with pytest.raises(ParamProblem) as caught:
        bad.check()
    assert caught.value.param == blamed and not caught.value.reason.startswith(("Pillar", "Head"))
