"""``runtime: native``: the BEV network lowered by our compiler (native_net) against ONNX Runtime
on the demo model (sample drive scans), the random-weight KITTI model (real KITTI frames) and
random-weight CUDA-PointPillars-layout models with BatchNormalization; its kernels against numpy
convolutions; the sparse skipping against computing every cell; refusals naming the op."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import helper

from cuvil_perception.errors import ModelError
from cuvil_perception.graph import builtin_models_dir
from cuvil_perception.ops.pillars import HeadConfig, PillarConfig, PointPillars
from cuvil_perception.ops.pillars.kernel_bev_conv import bev_conv, bev_conv_spec, padded
from cuvil_perception.ops.pillars.kernel_bev_deconv import bev_deconv_spec
from cuvil_perception.ops.pillars.native_bev import NativeRunner
from cuvil_perception.ops.pillars.op import RANDOM_MODEL
from cuvil_perception.compile import get_kernel
from cuvil_perception.testing.pillars_onnx import build_pointpillars_onnx

DEMO = builtin_models_dir() / "pointpillars_cuvil_demo.onnx"
INT8 = builtin_models_dir() / "pointpillars_cuvil_demo.int8.onnx"
DRIVE_SCANS = "datasets/sample_drive/velodyne_points/data"
SMALL = PillarConfig((0.0, -10.24, -3.0, 20.48, 10.24, 1.0), (0.16, 0.16, 4.0), max_pillars=900)
# The documented tolerance (docs/ops.md, runtime native): native maps vs ONNX Runtime's, float32
# sums in another order: |native - ort| <= ATOL + RTOL * |ort|.
ATOL, RTOL = 1e-4, 1e-5


def _numpy_conv(x, w, b, stride, pads, relu=True):
    """x [H, W, Cin] NHWC, w [Cout, Cin, kh, kw] -> [Ho, Wo, Cout] in float64 (ONNX Conv)."""
    height, width, _ = x.shape
    _, _, kh, kw = w.shape
    top, left, bottom, right = pads
    xp = np.zeros((height + top + bottom, width + left + right, x.shape[2]))
    xp[top:top + height, left:left + width] = x
    ho, wo = (xp.shape[0] - kh) // stride + 1, (xp.shape[1] - kw) // stride + 1
    out = np.zeros((ho, wo, w.shape[0])) + b
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[ky:ky + stride * (ho - 1) + 1:stride, kx:kx + stride * (wo - 1) + 1:stride]
            out += patch @ w[:, :, ky, kx].T.astype(np.float64)
    return np.maximum(out, 0) if relu else out


def _conv_call(x, w, b, stride, pads, sparse, nchw=False, out=None, masks=None):
    height, width, cin = x.shape
    cout, _, k, _ = w.shape
    ho, wo = (height + pads[0] + pads[2] - k) // stride + 1, (width + pads[1] + pads[3] - k) \
        // stride + 1
    inp = np.ascontiguousarray(x.transpose(2, 0, 1)) if nchw else np.ascontiguousarray(x)
    spec = bev_conv_spec(cin=cin, cout=cout, kernel=(k, k), stride=(stride, stride), pads=pads,
                         in_size=(height, width), out_size=(ho, wo),
                         in_layout=(1, height * width, 0) if nchw else (cin, 1, 0),
                         out_layout=(cout, 0), relu=True, sparse=sparse)
    packed = np.zeros((k * k * cin, padded(cout)), np.float32)
    packed[:, :cout] = w.transpose(2, 3, 1, 0).reshape(k * k * cin, cout)
    bias = np.zeros(padded(cout), np.float32)
    bias[:cout] = b
    out = np.zeros(ho * wo * cout + 16, np.float32) if out is None else out
    in_mask, out_mask = masks if masks is not None else (np.ones(height * width, np.uint8),
                                                         np.ones(ho * wo, np.uint8))
    count = get_kernel(spec)(inp.ctypes.data, packed.ctypes.data, bias.ctypes.data,
                             out.ctypes.data, in_mask.ctypes.data, out_mask.ctypes.data)
    return out[:ho * wo * cout].reshape(ho, wo, cout), count, (spec, inp, packed, bias)


@pytest.mark.parametrize("cin,cout,k,stride,pads", [
    (16, 16, 3, 1, (1, 1, 1, 1)), (16, 32, 3, 2, (1, 1, 1, 1)), (8, 18, 1, 1, (0, 0, 0, 0)),
    (5, 42, 3, 2, (0, 1, 2, 0)), (128, 12, 1, 1, (0, 0, 0, 0))])
@pytest.mark.parametrize("nchw", [False, True])
def test_conv_kernel_is_the_onnx_conv(cin, cout, k, stride, pads, nchw):
    rng = np.random.default_rng(cin + cout)
    x = rng.normal(size=(13, 21, cin)).astype(np.float32)
    w = rng.normal(size=(cout, cin, k, k)).astype(np.float32)
    b = rng.normal(size=cout).astype(np.float32)
    got, count, _ = _conv_call(x, w, b, stride, pads, sparse=False, nchw=nchw)
    want = _numpy_conv(x, w, b, stride, pads)
    assert count == got.shape[0] * got.shape[1]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_conv_kernel_uncompiled_gives_the_same_bits():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 11, 4)).astype(np.float32)
    w = rng.normal(size=(18, 4, 3, 3)).astype(np.float32)
    got, _, (spec, inp, packed, bias) = _conv_call(x, w, np.ones(18, np.float32), 2,
                                                   (1, 1, 1, 1), sparse=True)
    out = np.zeros(got.size + 16, np.float32)
    bev_conv.py_func(inp.ravel(), packed, bias, out, np.ones(66, np.uint8),
                     np.ones(got.shape[0] * got.shape[1], np.uint8), **spec.static)
    np.testing.assert_array_equal(out[:got.size].reshape(got.shape), got)


def test_sparse_conv_recomputes_exactly_the_changed_cells_across_frames():
    """Frame by frame, with the marks of what changed, the sparse kernel's persistent map holds
    the bits of a dense kernel run on that frame."""
    rng = np.random.default_rng(5)
    w = rng.normal(size=(16, 16, 3, 3)).astype(np.float32)
    b = rng.normal(size=16).astype(np.float32)
    empty = np.full((30, 40, 16), 0.25, np.float32)
    out = np.zeros(30 * 40 * 16 + 16, np.float32)
    in_mask, out_mask = np.zeros(1200, np.uint8), np.ones(1200, np.uint8)
    for frame in range(4):
        x = empty.copy()
        cells = rng.choice(1200, 40 - 10 * frame, replace=False)
        x.reshape(1200, 16)[cells] = rng.normal(size=(len(cells), 16))
        in_mask[:] = 0
        in_mask[cells] = 1
        got, count, _ = _conv_call(x, w, b, 1, (1, 1, 1, 1), True, out=out,
                                   masks=(in_mask, out_mask))
        want, _, _ = _conv_call(x, w, b, 1, (1, 1, 1, 1), sparse=False)
        np.testing.assert_array_equal(got, want)
        assert 0 < count < 1200 or frame == 0


def test_deconv_kernel_is_the_onnx_conv_transpose():
    rng = np.random.default_rng(7)
    for stride, cin, cout in ((2, 32, 64), (1, 16, 64), (3, 8, 18)):
        x = rng.normal(size=(7, 13, cin)).astype(np.float32)
        w = rng.normal(size=(cin, cout, stride, stride)).astype(np.float32)
        b = rng.normal(size=cout).astype(np.float32)
        want = np.zeros((7 * stride, 13 * stride, cout)) + b
        for ty in range(stride):
            for tx in range(stride):
                want[ty::stride, tx::stride] += x.astype(np.float64) @ w[:, :, ty, tx]
        packed = np.zeros((stride * stride * cin, padded(cout)), np.float32)
        packed[:, :cout] = w.transpose(2, 3, 0, 1).reshape(-1, cout)
        bias = np.zeros(padded(cout), np.float32)
        bias[:cout] = b
        out = np.zeros(want.size + 16, np.float32)
        spec = bev_deconv_spec(cin=cin, cout=cout, stride=stride, in_size=(7, 13),
                               in_layout=(cin, 1, 0), out_layout=(cout, 0), relu=True,
                               sparse=False)
        get_kernel(spec)(x.ctypes.data, packed.ctypes.data, bias.ctypes.data, out.ctypes.data,
                         0, 0)
        np.testing.assert_allclose(out[:want.size].reshape(want.shape), np.maximum(want, 0),
                                   rtol=1e-5, atol=1e-4)


def _scans(paths, count: int) -> list:
    return [np.fromfile(p, np.float32).reshape(-1, 4) for p in sorted(paths)[:count]]


def _assert_maps_close(native: PointPillars, ort: PointPillars, points) -> None:
    """The native head maps against ONNX Runtime's (dense: every cell is valid there); with
    the heads at candidate cells (sparse), box and direction there only."""
    got = native.runner(native.bev(points))
    want = ort.runner(ort.bev(points))
    rows = slice(None)
    if native.heads is not None:
        rows = native.heads.out.cells[:native.heads.out.count]
        assert len(rows) > 0
    for k, (mine, theirs) in enumerate(zip(got, want)):
        mine = mine.reshape(-1, mine.shape[-1])
        theirs = np.asarray(theirs).reshape(mine.shape)
        if k > 0:
            mine, theirs = mine[rows], theirs[rows]
        np.testing.assert_allclose(mine, theirs, rtol=RTOL, atol=ATOL)


def _assert_same_detections(native: PointPillars, ort: PointPillars, points) -> int:
    boxes, scores, labels = native.detect(points)
    want_boxes, want_scores, want_labels = ort.detect(points)
    np.testing.assert_array_equal(labels, want_labels)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(boxes, want_boxes, rtol=1e-4, atol=1e-4)
    return len(boxes)


def _cases(kitti_frames, repo_root):
    return [(DEMO, PillarConfig(max_pillars=16000),
             _scans((repo_root / DRIVE_SCANS).glob("*.bin"), 3)),
            (RANDOM_MODEL, PillarConfig(), _scans(kitti_frames, 3))]


@pytest.mark.parametrize("sparse", [True, False])
def test_native_runtime_equals_onnx_runtime_on_real_frames(kitti_frames, repo_root, sparse):
    for path, config, clouds in _cases(kitti_frames, repo_root):
        native = PointPillars.from_onnx(path, config, runtime="native", sparse=sparse).open()
        ort = PointPillars.from_onnx(path, config, runtime="onnxruntime", sparse=False).open()
        assert isinstance(native.runner, NativeRunner)
        found = 0
        for points in clouds:  # in sequence: the sparse layers keep state between frames
            _assert_maps_close(native, ort, points)
            found += _assert_same_detections(native, ort, points)
        assert found > 0


@pytest.mark.parametrize("seed,batch_norm,channels", [(1, True, (32, 32)), (2, False, (16,)),
                                                      (3, True, (16, 32, 32))])
def test_native_runtime_on_random_cuda_pointpillars_models(tmp_path, seed, batch_norm, channels):
    path = tmp_path / "random.onnx"
    onnx.save(build_pointpillars_onnx(SMALL, HeadConfig(), seed=seed, batch_norm=batch_norm,
                                      channels=channels, cls_bias=-2.0), str(path))
    rng = np.random.default_rng(seed)
    native = PointPillars.from_onnx(path, SMALL, runtime="native").open()
    ort = PointPillars.from_onnx(path, SMALL, runtime="onnxruntime", sparse=False).open()
    for _ in range(3):
        points = np.column_stack([rng.uniform(0, 20.4, 3000), rng.uniform(-10.2, 10.2, 3000),
                                  rng.uniform(-2.5, 0.5, 3000), rng.uniform(0, 1, 3000)])
        points = points.astype(np.float32)
        _assert_maps_close(native, ort, points)
        assert _assert_same_detections(native, ort, points) > 0


def test_sparse_skipping_is_exact_against_computing_every_cell(repo_root):
    """Frames in sequence through the sparse layers give the bits of a full recomputation."""
    model = PointPillars.from_onnx(DEMO, PillarConfig(max_pillars=16000), runtime="native").open()
    net = model.runner.net.net
    assert model.heads is not None and set(net.plan.outputs) == {"cls", "feat"}
    for points in _scans((repo_root / DRIVE_SCANS).glob("*.bin"), 4):
        x = model.bev(points)
        model.runner(x)
        assert 0 < net.computed
        sparse = {role: net.output(role).copy() for role in net.plan.outputs}
        model.runner.network(x)  # every cell
        for role, got in sparse.items():
            np.testing.assert_array_equal(got, net.output(role))


def test_the_model_kernels_include_the_network():
    model = PointPillars.from_onnx(DEMO, PillarConfig(max_pillars=16000), runtime="native")
    names = {spec.name for spec in model.kernels()}
    assert {"pillars.bev_conv", "pillars.bev_deconv", "pillars.bev_mask_union",
            "pillars.bev_marks"} <= names
    plan = model.runner.plan
    assert plan.weights().size == plan.blob_size and plan.blob_size % 16 == 0
    assert [name for name, _, _ in plan.table][:2] == ["/block1/block1.3/Conv.weight",
                                                        "/block1/block1.3/Conv.bias"]
    assert all(offset % 16 == 0 for _, offset, _ in plan.table)
    layout = json.loads(json.dumps(plan.layout()))
    assert layout["blob_floats"] == plan.blob_size and set(layout["outputs"]) == {"cls", "feat"}
    assert [s["kernel"] for s in layout["steps"]].count("pillars.bev_deconv") == 2


def test_an_int8_model_is_refused_naming_the_op():
    with pytest.raises(ModelError, match=r"cannot lower node '.*' \((Dequantize|Quantize)Linear\)"):
        PointPillars.from_onnx(INT8, PillarConfig(max_pillars=16000), runtime="native")


def test_an_op_the_kernels_do_not_take_is_refused_naming_it(tmp_path):
    model = build_pointpillars_onnx(SMALL, HeadConfig(), seed=0)
    relu = next(n for n in model.graph.node if n.name == "Relu_b1")
    relu.op_type = "Sigmoid"
    path = tmp_path / "sigmoid.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelError, match=r"node 'Relu_b1' \(Sigmoid\): the native backbone "
                                         r"lowers only Conv, ConvTranspose"):
        PointPillars.from_onnx(path, SMALL, runtime="native")


def test_a_deconv_with_padding_is_refused_naming_why(tmp_path):
    model = build_pointpillars_onnx(SMALL, HeadConfig(), seed=0, channels=(16,))
    graph = model.graph
    conv = next(n for n in graph.node if n.name == "Conv_cls_preds")
    conv.op_type = "ConvTranspose"
    conv.attribute.extend([helper.make_attribute("pads", [1, 1, 1, 1])])
    path = tmp_path / "deconv.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelError, match="only kernel == stride, no pads|cannot lower"):
        PointPillars.from_onnx(path, SMALL, runtime="native")


def _padded_model(mode: str = "constant") -> onnx.ModelProto:
    """The random model with its second conv's padding as a Pad node before it (OpenPCDet's
    ZeroPad2d + Conv(padding=0) exported without folding)."""
    model = build_pointpillars_onnx(SMALL, HeadConfig(), seed=4, channels=(16, 16), cls_bias=-2.0)
    graph = model.graph
    conv = next(n for n in graph.node if n.name == "Conv_1")
    graph.initializer.append(onnx.numpy_helper.from_array(
        np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pad_1.pads"))
    pad = helper.make_node("Pad", [conv.input[0], "pad_1.pads"], ["pad_1.out"], name="Pad_1",
                           mode=mode)
    conv.input[0] = "pad_1.out"
    for attr in conv.attribute:
        if attr.name == "pads":
            attr.ints[:] = [0, 0, 0, 0]
    graph.node.insert(list(graph.node).index(conv), pad)
    return model


def test_a_zero_pad_before_a_conv_is_folded_into_it(tmp_path):
    path = tmp_path / "padded.onnx"
    onnx.save(_padded_model(), str(path))
    rng = np.random.default_rng(4)
    native = PointPillars.from_onnx(path, SMALL, runtime="native").open()
    ort = PointPillars.from_onnx(path, SMALL, runtime="onnxruntime", sparse=False).open()
    points = np.column_stack([rng.uniform(0, 20.4, 3000), rng.uniform(-10.2, 10.2, 3000),
                              rng.uniform(-2.5, 0.5, 3000), rng.uniform(0, 1, 3000)])
    points = points.astype(np.float32)
    _assert_maps_close(native, ort, points)
    assert _assert_same_detections(native, ort, points) > 0


def test_a_reflect_pad_is_refused(tmp_path):
    path = tmp_path / "reflect.onnx"
    onnx.save(_padded_model("reflect"), str(path))
    with pytest.raises(ModelError, match=r"node 'Pad_1' \(Pad\): only zero padding"):
        PointPillars.from_onnx(path, SMALL, runtime="native")
