"""The rest of configs/fusion.yaml's kernels (test_library_aarch64 covers pillarize, PFN, the
line scatter and decode) and the tutorial's ground removal, built as one aarch64 library and
called under qemu-user on real inputs, against this machine's kernels on the same bytes:

- the INT8 PointPillars sparse path on the ten KITTI frames: conv_scatter (the persistent map
  carried from frame to frame), head_cells, decode on those heads, rotated NMS; and the dense
  scatter's bitmap order (``bits`` loops; the default where whole lines do not fit the grid) on
  the first three;
- the INT8 YOLOv8 head on the bundled drive's camera images: scan, decode, NMS;
- examples/ground_removal on the ten KITTI frames.

Bitwise where the kernel is bitwise to its numpy reference (NMS, scan, the scatter, ground
removal, every integer output); elsewhere each kernel's documented tolerance (the float outputs of conv_scatter,
head_cells, both decodes), quoted where the calls are built.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from calls_support import Call, Const, Out, Replay, Table, assert_same, host_call
from library_support import CONFIG, HEAD, TRIPLE, aarch64_toolchain, pillars_specs, scan

from cuvil_perception.cli.compile_cmd import pipeline_kernels
from cuvil_perception.compile.library import build_library
from cuvil_perception.graph import builtin_models_dir, load_pipeline
from cuvil_perception.ops.pillars.model import PointPillars
from cuvil_perception.ops.pillars.native import ScatterKernel
from cuvil_perception.ops.pillars.native_sparse import ConvScatterKernel
from cuvil_perception.ops.yolo.model import YoloV8
from cuvil_perception.ops.yolo.reference import letterbox

ROOT = Path(__file__).parent.parent
HARNESS = Path(__file__).parent / "native" / "calls_harness.c"
IMAGES = ROOT / "datasets" / "sample_drive" / "image_02" / "data"
DECODE_TOL = (1e-5, 1e-5)  # library_support.assert_decode_close, test_pillars_postprocess
HEADS_TOL = (1e-5, 1e-5)  # test_pillars_sparse: head_cells box / dir against the reference
# The dense scatter's bitmap order ("merged", the default where whole lines do not fit the grid;
# a 55 MB map a frame): the second and third frames clear the cells of the frame before.
DENSE_FRAMES = 3


def _ground_removal():
    stage = next(s for s in load_pipeline(ROOT / "examples" / "ground_removal.yaml").ordered()
                 if s.id == "ground")
    return stage.make_op()


def _pillars_calls(replay: Replay, frames: list[Path]) -> None:
    pp = PointPillars.from_onnx(builtin_models_dir() / "pointpillars_cuvil_demo.int8.onnx",
                                CONFIG, HEAD).open()
    cs, heads, decode, nms = pp.scatter, pp.heads, pp.decode, pp.nms
    dense = ScatterKernel(CONFIG, "merged").open()
    assert isinstance(cs, ConvScatterKernel) and heads is not None, pp.notes
    for i, frame in enumerate(frames):
        label = f"KITTI frame {i}"
        pillars = pp.pillarize(scan(frame))
        features, n = pp.pfn(pillars).copy(), pillars.count
        coords = pillars.coords.copy()
        if i < DENSE_FRAMES:
            state = [a.copy() for a in (dense.bev, dense.prev_cells, dense.prev_count,
                                        dense.bitmap, dense.cell_pillar, dense.cells, dense.pids)]
            replay.add(Call(dense.spec, [features, coords, np.int64(n), *map(Out, state)],
                            label))
            dense(features, coords, n)
        state = [a.copy() for a in (cs.out, cs.mark, cs.touched, cs.prev, cs.prev_count)]
        bev = cs(features, coords, n)
        # test_pillars_sparse.assert_close: atol 1e-4 x max(1, the largest value), rtol 0
        tol = (0.0, 1e-4 * max(1.0, float(np.abs(bev).max())))
        replay.add(Call(cs.spec, [features, coords, np.int64(n), Const(cs.weights),
                                  Const(cs.bias), Out(state[0], tol), *map(Out, state[1:])],
                        label))
        cls, *parts = pp.runner.network(bev)
        before = [a.copy() for a in (heads.out.box, heads.out.dir, heads.out.cells)]
        cells = heads(cls, parts)
        replay.add(Call(heads.spec, [cls, Table(parts), Const(heads.weights), Const(heads.bias),
                                     Out(before[0], HEADS_TOL), Out(before[1], HEADS_TOL),
                                     Out(before[2])], label))
        box, direction = cells.box.copy(), cells.dir.copy()
        out = decode.out
        before = [a.copy() for a in (out.boxes, out.scores, out.labels, out.anchor,
                                     decode.counts)]
        cand = decode(cls, box, direction)
        replay.add(Call(decode.spec, [cls, box, direction, Const(decode.anchor_table),
                                      Out(before[0], DECODE_TOL), Out(before[1], DECODE_TOL),
                                      *map(Out, before[2:])], label))
        # NmsKernel.__call__'s host part, then the kernel on its state before the call
        order = np.argsort(-cand.scores[:cand.count], kind="stable")[:HEAD.nms_pre]
        ranked = np.ascontiguousarray(cand.boxes[order], np.float32)
        heading = ranked[:, 6].astype(np.float64)
        state = [a.copy() for a in (nms.keep, nms.suppressed, nms.table, nms.extents, nms.near)]
        replay.add(Call(nms.spec, [ranked, np.cos(heading), np.sin(heading),
                                   np.int64(len(order)), *map(Out, state)], label))
        nms(cand.boxes, cand.scores, cand.count)


def _yolo_calls(replay: Replay, images: list[Path]) -> None:
    det = YoloV8.from_onnx(builtin_models_dir() / "yolov8_cuvil_demo.int8.onnx", conf=0.25,
                           iou=0.7, classes=[0, 1, 2])
    det.open()
    head = det.head
    scan_spec, decode_spec, nms_spec = head.kernels()
    for path in images:
        label = f"image {path.name}"
        outputs = det.runner.run(letterbox(cv2.imread(str(path)), det.input_hw))
        boxes = [np.ascontiguousarray(o, np.float32) for o in outputs[0::2]]
        classes = [np.ascontiguousarray(o, np.float32) for o in outputs[1::2]]
        before = {name: getattr(head, name).copy() for name in (
            "_best", "_cand", "_boxes", "_scores", "_cls", "_work", "_suppressed", "_keep")}
        head.run(boxes, classes)
        scan_call = Call(scan_spec, [Table(classes), Out(before["_best"]), Out(before["_cand"]),
                                     np.float32(head._threshold)], label)
        replay.add(scan_call)
        n, _ = host_call(scan_call)  # the candidate count run() does not keep
        # test_yolo_native: boxes rtol 2.5e-7 + atol 1e-4 (pixels), scores atol 1e-6
        replay.add(Call(decode_spec, [
            Table(boxes), Table(classes), head._cand.copy(), np.int64(n),
            np.float32(head.conf), Out(before["_boxes"], (2.5e-7, 1e-4)),
            Out(before["_scores"], (0.0, 1e-6)), Out(before["_cls"])], label))
        count = len(head._order(head.last_candidates))
        replay.add(Call(nms_spec, [
            head._sorted_boxes.copy(), head._sorted_cls.copy(), np.int64(count),
            np.float32(head._offset), np.float64(head.iou), np.int64(head.max_det),
            Out(before["_work"]), Out(before["_suppressed"]), Out(before["_keep"])], label))


def _ground_calls(replay: Replay, frames: list[Path]) -> None:
    op = _ground_removal()
    spec = op.kernels()[0]
    static = spec.static
    lowest = np.zeros(static["cells"], np.float32)
    out = np.zeros((static["capacity"], 4), np.float32)
    for i, frame in enumerate(frames):
        points = scan(frame)
        replay.add(Call(spec, [points, np.int64(len(points)), Out(lowest), Out(out)],
                        f"KITTI frame {i}"))


@pytest.fixture(scope="module")
def replayed(tmp_path_factory, kitti_frames):
    """The calls, the library and the harness built, the calls run under qemu-user."""
    tools = aarch64_toolchain()
    work = tmp_path_factory.mktemp("aarch64_calls")
    replay = Replay(work)
    _pillars_calls(replay, kitti_frames)
    _yolo_calls(replay, sorted(IMAGES.glob("*.png")))
    _ground_calls(replay, kitti_frames)
    specs = list({c.spec.identity(): c.spec for c in replay.calls}.values())
    lib = build_library(specs, TRIPLE, work / "lib", "calls")
    exe = work / "calls_harness"
    tools.run([tools.cc, "-O2", "-Wall", "-Werror", "-std=c11", "-o", str(exe), str(HARNESS),
               f"-I{lib.out_dir}", str(lib.static), "-lm"], "building the harness")
    returns = replay.run(tools.emulator, exe)
    yield replay, returns
    for big in work.glob("c*_a*"):  # hundreds of MB of buffers: pytest keeps its tmp dirs
        big.unlink()


def test_every_fusion_kernel_is_covered_on_aarch64(replayed):
    replay, _ = replayed
    covered = {c.spec.identity() for c in replay.calls}
    covered |= {s.identity() for s in pillars_specs()}  # test_library_aarch64
    needed = {s.name: s.identity() for s in pipeline_kernels(load_pipeline(
        ROOT / "configs" / "fusion.yaml"))}
    assert {name for name, ident in needed.items() if ident not in covered} == set()


def test_aarch64_kernels_match_host_kernels(replayed):
    replay, returns = replayed
    assert_same(replay, returns)
    names = [c.spec.name for c in replay.calls]
    assert names.count("pillars.conv_scatter") == names.count("example.ground_removal") == 10
    assert names.count("pillars.scatter") == DENSE_FRAMES
    assert names.count("yolo.scan") == len(list(IMAGES.glob("*.png"))) > 0
