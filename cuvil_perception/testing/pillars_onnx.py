"""Build small ONNX models in the CUDA-PointPillars layout, with random (seeded) weights.

The layout is what NVIDIA-AI-IOT/CUDA-PointPillars' ``tool/export_onnx.py`` + ``modify_onnx.py``
write (opset 11):

    voxels [P, 32, 10] -> Reshape [P*32, 10] -> MatMul [10, 64] -> BatchNormalization
    -> Relu -> Reshape [P, 32, 64] -> ReduceMax(axes=[1], keepdims=0) -> [P, 64]
    -> PPScatterPlugin(pillar features, voxel_idxs [P, 4], voxel_num [1]; dense_shape=[ny, nx])
    -> [1, 64, ny, nx] -> BEV backbone -> three head convs -> Transpose to NHWC
    -> cls_preds [1, H, W, A*K], box_preds [1, H, W, A*7], dir_cls_preds [1, H, W, A*2]

The backbone here is small: ``len(channels)`` Conv 3x3 + ReLU blocks, the first with stride 2
(the head map is the grid / 2, like the real model's). ``cls_bias`` shifts the class logits so
that only a few anchors score >= 0.1 (a trained model keeps a few hundred). These weights mean
nothing: a model built here detects nothing real.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..ops.pillars.config import HeadConfig, PillarConfig

OPSET = 11


def build_pointpillars_onnx(config: PillarConfig | None = None, head: HeadConfig | None = None,
                            *, max_voxels: int | None = None, channels: tuple = (32, 32),
                            seed: int = 0, cls_bias: float = -5.0,
                            batch_norm: bool = False) -> onnx.ModelProto:
    """A CUDA-PointPillars-layout model for ``config``'s grid (default KITTI) and ``head``;
    ``batch_norm`` puts a BatchNormalization between each backbone Conv and its Relu."""
    config = config or PillarConfig()
    head = head or HeadConfig()
    graph = _Builder(np.random.default_rng(seed))
    P = max_voxels or config.max_pillars
    _pfn_and_scatter(graph, config, P)
    x = graph.backbone("spatial_features", config.num_features, channels, batch_norm)
    height, width = head.map_size(config)
    outputs = []
    for name, per_anchor, bias, scale in (("cls_preds", head.num_classes, cls_bias, 0.3),
                                          ("box_preds", 7, 0.0, 0.05),
                                          ("dir_cls_preds", 2, 0.0, 0.3)):
        cout = head.anchors_per_cell * per_anchor
        graph.head_conv(x, channels[-1] if channels else config.num_features, name, cout, bias,
                        scale)
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                     [1, height, width, cout]))
    inputs = [helper.make_tensor_value_info("voxels", TensorProto.FLOAT, [P, 32, 10]),
              helper.make_tensor_value_info("voxel_idxs", TensorProto.INT32, [P, 4]),
              helper.make_tensor_value_info("voxel_num", TensorProto.INT32, [1])]
    onnx_graph = helper.make_graph(graph.nodes, "pointpillars_random_weights", inputs, outputs,
                                   graph.inits)
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="cuvil_perception.testing.pillars_onnx")
    model.ir_version = 7
    return model


class _Builder:
    """Accumulates nodes and initializers with seeded random weights."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def init(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list, output: str, name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [output], name=name, **attrs))
        return output

    def backbone(self, x: str, cin: int, channels: tuple, batch_norm: bool = False) -> str:
        for k, cout in enumerate(channels):
            weight = self.rng.normal(0, np.sqrt(2.0 / (9 * cin)), (cout, cin, 3, 3))
            conv = f"backbone.{k}"
            y = self.node("Conv", [x, self.init(f"{conv}.weight", weight.astype(np.float32)),
                                   self.init(f"{conv}.bias", np.zeros(cout, np.float32))],
                          f"{conv}.conv", f"Conv_{k}", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                          strides=[2, 2] if k == 0 else [1, 1])
            if batch_norm:
                y = self.batch_norm(y, f"{conv}.bn", cout)
            x = self.node("Relu", [y], f"{conv}.out", f"Relu_b{k}")
            cin = cout
        return x

    def batch_norm(self, x: str, name: str, channels: int) -> str:
        rng = self.rng
        params = [rng.uniform(0.5, 1.5, channels), rng.normal(0, 0.2, channels),
                  rng.normal(0, 0.2, channels), rng.uniform(0.5, 2.0, channels)]
        names = [self.init(f"{name}.{p}", v.astype(np.float32))
                 for p, v in zip(("weight", "bias", "running_mean", "running_var"), params)]
        return self.node("BatchNormalization", [x] + names, f"{name}.out", name, epsilon=1e-3)

    def head_conv(self, x: str, cin: int, name: str, cout: int, bias: float, scale: float):
        weight = self.rng.normal(0, scale / np.sqrt(cin), (cout, cin, 1, 1)).astype(np.float32)
        self.node("Conv", [x, self.init(f"head.{name}.weight", weight),
                           self.init(f"head.{name}.bias", np.full(cout, bias, np.float32))],
                  f"{name}_nchw", f"Conv_{name}", kernel_shape=[1, 1])
        self.node("Transpose", [f"{name}_nchw"], name, f"Transpose_{name}", perm=[0, 2, 3, 1])


def _pfn_and_scatter(g: _Builder, config: PillarConfig, P: int) -> None:
    """voxels -> Reshape -> MatMul -> BN -> Relu -> Reshape -> ReduceMax -> PPScatterPlugin."""
    C, rng = config.num_features, g.rng
    g.node("Reshape", ["voxels", g.init("reshape_0_shape", np.array([P * 32, 10]))],
           "reshape_0_out", "reshape_0")
    g.node("MatMul", ["reshape_0_out", g.init(
        "pfn.linear.weight", rng.normal(0, 0.4, (10, C)).astype(np.float32))],
        "matmul_op_out", "MatMul_0")
    g.node("BatchNormalization", [
        "matmul_op_out",
        g.init("pfn.norm.weight", rng.uniform(0.5, 1.5, C).astype(np.float32)),
        g.init("pfn.norm.bias", rng.normal(0, 0.2, C).astype(np.float32)),
        g.init("pfn.norm.running_mean", rng.normal(0, 0.5, C).astype(np.float32)),
        g.init("pfn.norm.running_var", rng.uniform(0.2, 2.0, C).astype(np.float32))],
        "bn_op_out", "BatchNormalization_0", epsilon=1e-3, momentum=0.99)
    g.node("Relu", ["bn_op_out"], "relu_op_out", "Relu_0")
    g.node("Reshape", ["relu_op_out", g.init("reshape_1_shape", np.array([P, 32, C]))],
           "reshape_1_out", "reshape_1")
    g.node("ReduceMax", ["reshape_1_out"], "pillar_features", "ReduceMax_0", axes=[1],
           keepdims=0)
    g.node("PPScatterPlugin", ["pillar_features", "voxel_idxs", "voxel_num"],
           "spatial_features", "PPScatter_0", dense_shape=[config.ny, config.nx])


def write_pointpillars_onnx(path: str | Path, config: PillarConfig | None = None,
                            head: HeadConfig | None = None, **kwargs) -> Path:
    """Build (see ``build_pointpillars_onnx``) and save; returns the path."""
    path = Path(path)
    onnx.save(build_pointpillars_onnx(config, head, **kwargs), str(path))
    return path
