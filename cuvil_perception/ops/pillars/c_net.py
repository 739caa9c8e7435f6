"""The native network (native_net's `NetPlan`) as the library's `c_backbone.BackbonePlan`.

``library_plan(pp)`` for a `PointPillars` built with ``runtime="native"`` on the sparse path
(the scatter fused into the first layer, the heads at candidate cells reading NHWC maps):

    NetPlan                               BackbonePlan
    ("input",)                            "input"   conv_scatter's NHWC map, read in place
    ("input_mask",)                       "buf:input_mask", written first by kernel_bev_marks
                                          from the cells conv_scatter reached ("changed")
    ("buffer", i) of the class output     "cls"     the handle's class map (no copy)
    ("buffer", i) of the heads' input F   "feat:0"  the handle's feature map, NHWC [cells, C_f]
    ("buffer", i) other maps              "buf:map<i>"  + 16 floats of slack (store_cells)
    ("mask", i)                           "buf:mask<i>" set to 1 at open (every cell is computed
                                          on the first frame: kernel_bev_conv)
    ("blob", offset)                      "w:<offset>"  the NetPlan blob, float32, as is

The layers keep their state across frames (the maps and masks are persistent: a cell equal to
the empty frame's is not recomputed), which is why the class and feature maps the backbone
writes must be the handle's own, never touched between frames by anything else.

Run length: kernel_bev_conv / kernel_bev_deconv pick their accumulators from the HOST's
features (8 with AVX-512's 32 zmm registers); a library's code runs on another CPU, so its
layers take `accumulators(target)`: 8 when the target's feature string enables AVX-512
(``--cpu host`` on such a machine), else 4 (the accumulators and a weight row stay in
registers on AVX2's 16 ymm and NEON's 32 q: the default targets, and any CPU named without
features). The run length changes no result.
"""

from __future__ import annotations

import numpy as np

from ...compile.target import Target
from ...errors import UsageError
from ...compile.cabi import LibraryPart
from .c_backbone import BackbonePlan, Step, backbone_part, workspace_bytes
from .c_detect import detect_part
from .kernel_bev_conv import ACCUMULATORS, run_length
from .model import PointPillars
from .native_bev import NativeRunner
from .native_plan import INPUT, Map, NetPlan

SLACK = 16  # floats past each map (kernel_bev_conv.store_cells)


def accumulators(target: Target | None) -> int:
    """The layers' vector accumulators per run of cells in a library for ``target`` (module
    docstring; None: 4)."""
    wide = target is not None and "+avx512f" in target.features.split(",")
    return ACCUMULATORS if wide else ACCUMULATORS // 2


def library_plan(pp: PointPillars, where: str = "pillars.detect",
                 target: Target | None = None) -> BackbonePlan:
    """The `BackbonePlan` of ``pp``'s native network (module docstring) for a library of
    ``target``; a `UsageError` (one line naming ``where``) for a model whose network the C
    pipeline cannot hold."""
    runner = pp.runner
    if not isinstance(runner, NativeRunner) or pp.heads is None or pp.plan.conv is None:
        raise UsageError(f"{where}: the C pipeline needs the native network on the sparse path "
                         "(a first Conv+BN+ReLU and 1x1 box / direction heads)")
    net = runner.plan
    aliases = {_whole(net, "cls", pp.heads.sizes, where): "cls",
               _whole(net, "feat", (pp.heads.sizes[0], sum(pp.heads.parts)), where): "feat:0"}
    buffers = {"input_mask": net.input.height * net.input.width}
    buffers |= {f"map{i}": (size + SLACK) * 4 for i, size in enumerate(net.buffers)
                if i not in aliases}
    masks = {f"mask{i}": size for i, size in enumerate(net.masks)}
    names = {("input",): "input", ("input_mask",): "buf:input_mask"}
    names |= {("buffer", i): aliases.get(i, f"buf:map{i}") for i in range(len(net.buffers))}
    names |= {("mask", i): f"buf:mask{i}" for i in range(len(net.masks))}
    offsets = {str(offset): 4 * offset for _, offset, _ in net.table}
    steps = [Step(runner.net.net.marks_spec, ("changed", "changed_count", "buf:input_mask"))]
    for step in net.steps:
        args = tuple(f"w:{ref[1]}" if ref[0] == "blob" else names[tuple(ref)]
                     for ref in step.args)
        steps.append(Step(_for_library(step.spec, accumulators(target)), args))
    weights = np.ascontiguousarray(net.weights(), "<f4").tobytes()
    return BackbonePlan(steps, buffers | masks, weights, offsets, ones=tuple(masks))


def library_kernels(pp: PointPillars, plan: BackbonePlan) -> list:
    """The kernels of a whole-pipeline library of ``pp``: its native pre / post-processing
    (the NHWC heads) and the backbone's (with the library's run length)."""
    native = set(pp.runner.specs)
    return [spec for spec in pp.kernels() if spec not in native] + plan.kernels()


def library_part(pp: PointPillars, plan: BackbonePlan, symbols: dict, prefix: str,
                 where: str = "pillars.detect", model: str = "the model") -> LibraryPart:
    """The whole-pipeline `LibraryPart` of ``pp`` with ``plan`` as its backbone (`c_detect`;
    ``symbols``: each of `library_kernels` -> its exported symbol)."""
    return detect_part(pp, symbols, prefix, backbone_part(plan, symbols, prefix), where, model,
                       workspace_bytes(plan))


def _whole(net: NetPlan, role: str, shape: tuple, where: str) -> int:
    """The buffer of output ``role``: a whole NHWC map of ``shape`` (cells, channels)."""
    value: Map = net.outputs[role]
    cells, channels = shape
    if value.buffer == INPUT or value.offset or value.stride != value.channels or \
            (value.height * value.width, value.channels) != (cells, channels):
        raise UsageError(f"{where}: the network's {role} output is not a map of its own "
                         f"[{cells}, {channels}] (the C pipeline writes it in place)")
    return value.buffer


def _for_library(spec, count: int):
    """A layer's spec with the library's run length (module docstring)."""
    if "run" not in spec.static or "cout" not in spec.static:
        return spec
    return spec.with_static(run=run_length(spec.static["cout"], count))
