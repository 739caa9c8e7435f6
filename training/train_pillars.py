"""Train the demo PointPillars on synthetic drives and export it in the CUDA-PointPillars layout.

    .venv/bin/pip install torch==2.13.0          # the `train` extra; never needed at run time
    python training/train_pillars.py --train training/data/train --val training/data/val \
        --epochs 20 --out cuvil_perception/models/pointpillars_cuvil_demo.onnx

OpenPCDet semantics throughout (KITTI PointPillars config unless changed): pillars and the 10
PillarVFE features come from ``cuvil_perception.ops.pillars.reference`` (the run-time numpy
twins, so training sees exactly what the native kernels compute); anchors from
``reference.anchors``; targets by AxisAlignedTargetAssigner (nearest-axis BEV IoU; car
positive >= 0.6 / negative < 0.45, pedestrian and cyclist 0.5 / 0.35, and each box's best
anchor positive); ResidualCoder targets; losses: sigmoid focal (alpha 0.25, gamma 2, weight 1),
smooth-L1 with the sin-difference heading (beta 1/9, weight 2), direction CE (2 bins, offset
0.78539, weight 0.2), all normalised by the positive count.

Export: the BEV part via ``torch.onnx.export`` (opset 11, input ``spatial_features``), then the
PFN written as MatMul -> BatchNormalization -> Relu -> ReduceMax and a ``PPScatterPlugin`` node
in front, with inputs voxels [P, 32, 10], voxel_idxs [P, 4], voxel_num [1] — the layout
``PointPillars.from_onnx`` takes. ``--check`` (default on) loads it that way and runs a frame.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bn import recalibrate_bn  # noqa: E402
from pillars_net import PointPillarsNet  # noqa: E402

from cuvil_perception.drives import Drive  # noqa: E402
from cuvil_perception.ops.pillars import HeadConfig, PillarConfig, reference  # noqa: E402

THRESHOLDS = ((0.6, 0.45), (0.5, 0.35), (0.5, 0.35))  # (matched, unmatched) per class


def limit_period(v, offset: float, period: float):
    return v - np.floor(v / period + offset) * period


def nearest_bev(boxes: np.ndarray) -> np.ndarray:
    """OpenPCDet boxes3d_nearest_bev: axis-aligned [N, 4] after snapping heading to an axis."""
    rot = np.abs(limit_period(boxes[:, 6], 0.5, np.pi))
    swap = rot > np.pi / 4
    dx = np.where(swap, boxes[:, 4], boxes[:, 3])
    dy = np.where(swap, boxes[:, 3], boxes[:, 4])
    return np.stack([boxes[:, 0] - dx / 2, boxes[:, 1] - dy / 2, boxes[:, 0] + dx / 2,
                     boxes[:, 1] + dy / 2], axis=1)


def iou_aligned(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(-1)
    area_a = (a[:, 2:] - a[:, :2]).prod(-1)
    area_b = (b[:, 2:] - b[:, :2]).prod(-1)
    return inter / np.maximum(area_a[:, None] + area_b[None] - inter, 1e-6)


def encode(gt: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """ResidualCoder.encode: [N, 7] targets of boxes ``gt`` against ``anchors``."""
    d = np.sqrt(anchors[:, 3] ** 2 + anchors[:, 4] ** 2)
    return np.stack([(gt[:, 0] - anchors[:, 0]) / d, (gt[:, 1] - anchors[:, 1]) / d,
                     (gt[:, 2] - anchors[:, 2]) / anchors[:, 5],
                     *(np.log(gt[:, k] / anchors[:, k]) for k in (3, 4, 5)),
                     gt[:, 6] - anchors[:, 6]], axis=1).astype(np.float32)


def assign(anchors: np.ndarray, gt: np.ndarray, gt_cls: np.ndarray, per_cell: int):
    """Labels [A] (-1 ignore, 0 background, k + 1 class k) and box targets [A, 7]."""
    n = len(anchors)
    labels = np.full(n, -1, np.int64)
    targets = np.zeros((n, 7), np.float32)
    cls_of_anchor = (np.arange(n) % per_cell) // 2
    for k, (pos, neg) in enumerate(THRESHOLDS):
        idx = np.nonzero(cls_of_anchor == k)[0]
        boxes = gt[gt_cls == k]
        if not len(boxes):
            labels[idx] = 0
            continue
        iou = iou_aligned(nearest_bev(anchors[idx]), nearest_bev(boxes))
        best_gt, best = iou.argmax(1), iou.max(1)
        lab = np.full(len(idx), -1, np.int64)
        lab[best >= pos] = k + 1
        lab[best < neg] = 0
        forced = np.nonzero((iou == iou.max(0, keepdims=True)) & (iou > 0))[0]
        lab[forced] = k + 1
        labels[idx] = lab
        fg = lab > 0
        targets[idx[fg]] = encode(boxes[best_gt[fg]], anchors[idx[fg]])
    return labels, targets


class Frames:
    """Every frame of some drives: pillars, features and targets computed on demand."""

    def __init__(self, roots, config: PillarConfig, head: HeadConfig):
        self.items = [(d, k) for d in (Drive(p) for p in roots) for k in range(len(d))]
        self.config, self.head = config, head
        self.anchors = reference.anchors(config, head)
        r = config.point_cloud_range
        self.xy = (r[0], r[1], r[3], r[4])

    def __len__(self) -> int:
        return len(self.items)

    def load(self, i: int, flip: bool = False):
        drive, k = self.items[i]
        frame = drive.read(k)
        points, labels = frame.points.copy(), frame.labels.copy()
        if flip:  # mirror y (the KITTI range is symmetric in y)
            points[:, 1] *= -1
            labels[:, 2] *= -1
            labels[:, 7] *= -1
        pillars = reference.pillarize(points, self.config)
        feats = reference.pillar_features(pillars, self.config)
        gt = labels[:, 1:8]
        x0, y0, x1, y1 = self.xy
        keep = (gt[:, 0] >= x0) & (gt[:, 0] < x1) & (gt[:, 1] >= y0) & (gt[:, 1] < y1)
        cls, tgt = assign(self.anchors, gt[keep], labels[keep, 0].astype(np.int64),
                          self.head.anchors_per_cell)
        coords = pillars.coords[:pillars.count].astype(np.int64)
        num = pillars.num_points[:pillars.count].astype(np.int64)
        num = torch.from_numpy(num)
        return torch.from_numpy(feats), torch.from_numpy(coords), cls, tgt, num


def losses(preds, batch, anchors: torch.Tensor, dir_offset: float):
    cls_map, box_map, dir_map = preds
    B = cls_map.shape[0]
    cls_p = cls_map.reshape(B, -1, 3)
    box_p = box_map.reshape(B, -1, 7)
    dir_p = dir_map.reshape(B, -1, 2)
    labels = torch.from_numpy(np.stack([b[2] for b in batch]))
    targets = torch.from_numpy(np.stack([b[3] for b in batch]))
    pos = (labels > 0).float()
    norm = pos.sum(1, keepdim=True).clamp(min=1.0)
    cls_w = ((labels >= 0).float()) / norm
    onehot = F.one_hot(labels.clamp(min=0), 4)[..., 1:].float()
    p = torch.sigmoid(cls_p)
    ce = F.binary_cross_entropy_with_logits(cls_p, onehot, reduction="none")
    pt = onehot * p + (1 - onehot) * (1 - p)
    alpha = onehot * 0.25 + (1 - onehot) * 0.75
    cls_loss = (alpha * (1 - pt) ** 2 * ce).sum(-1) * cls_w
    reg_w = pos / norm
    p6, t6 = box_p[..., 6:7], targets[..., 6:7]
    box_p = torch.cat([box_p[..., :6], torch.sin(p6) * torch.cos(t6)], -1)
    box_t = torch.cat([targets[..., :6], torch.cos(p6) * torch.sin(t6)], -1)
    loc = F.smooth_l1_loss(box_p, box_t, beta=1 / 9, reduction="none").sum(-1) * reg_w
    rot = targets[..., 6] + anchors[None, :, 6]
    offset_rot = rot - dir_offset - torch.floor((rot - dir_offset) / (2 * math.pi)) * 2 * math.pi
    dir_t = torch.floor(offset_rot / math.pi).long().clamp(0, 1)
    dirl = F.cross_entropy(dir_p.reshape(-1, 2), dir_t.reshape(-1), reduction="none")
    dirl = dirl.view(B, -1) * reg_w
    return (cls_loss.sum() + 2.0 * loc.sum() + 0.2 * dirl.sum()) / B


def train(args, config: PillarConfig, head: HeadConfig) -> dict:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    torch.set_num_threads(args.threads)
    data = Frames(args.train, config, head)
    net = PointPillarsNet(config.ny, config.nx, tuple(args.channels), args.up)
    anchors = torch.from_numpy(data.anchors)
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=0.01)
    steps = args.steps or args.epochs * math.ceil(len(data) / args.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=steps, pct_start=0.4)
    began, step, history = time.perf_counter(), 0, []
    net.train()
    while step < steps:
        order = rng.permutation(len(data))
        for start in range(0, len(order), args.batch):
            batch = [data.load(int(i), bool(rng.random() < 0.5))
                     for i in order[start:start + args.batch]]
            preds = net([(b[0], b[1], b[4]) for b in batch])
            loss = losses(preds, batch, anchors, head.dir_offset)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 10.0)
            opt.step()
            sched.step()
            step += 1
            history.append(loss.item())
            if step % args.log_every == 0 or step == steps:
                print(f"step {step}/{steps} loss {np.mean(history[-args.log_every:]):.3f} "
                      f"{time.perf_counter() - began:.0f} s", flush=True)
            out_of_time = args.max_minutes and time.perf_counter() - began > args.max_minutes * 60
            if step >= steps or out_of_time:
                steps = step
                break
    def forward_batch(start):
        batch = [data.load(i % len(data)) for i in range(start, start + args.batch)]
        return lambda: net([(b[0], b[1], b[4]) for b in batch])

    recalibrate_bn(net, [forward_batch(k * args.batch) for k in range(args.bn_batches)])
    return {"net": net, "steps": step, "seconds": time.perf_counter() - began,
            "final_loss": float(np.mean(history[-20:])) if history else None}


def pfn_nodes(pfn, config: PillarConfig):
    """(initializers, nodes): voxels -> Reshape -> MatMul -> BatchNormalization -> Relu ->
    Reshape -> ReduceMax -> PPScatterPlugin -> ``spatial_features``, with the trained weights."""
    from onnx import helper, numpy_helper

    P = config.max_pillars
    inits = [numpy_helper.from_array(np.array([P * 32, 10], np.int64), "reshape_0_shape"),
             numpy_helper.from_array(pfn.linear.weight.detach().numpy().T.copy(), "pfn.linear"),
             numpy_helper.from_array(np.array([P, 32, 64], np.int64), "reshape_1_shape")]
    for name in ("weight", "bias", "running_mean", "running_var"):
        inits.append(numpy_helper.from_array(
            getattr(pfn.norm, name).detach().numpy().astype(np.float32), f"pfn.norm.{name}"))
    nodes = [
        helper.make_node("Reshape", ["voxels", "reshape_0_shape"], ["pfn_in"], name="reshape_0"),
        helper.make_node("MatMul", ["pfn_in", "pfn.linear"], ["pfn_mm"], name="MatMul_0"),
        helper.make_node("BatchNormalization", ["pfn_mm", "pfn.norm.weight", "pfn.norm.bias",
                                                "pfn.norm.running_mean", "pfn.norm.running_var"],
                         ["pfn_bn"], name="BatchNormalization_0", epsilon=pfn.norm.eps),
        helper.make_node("Relu", ["pfn_bn"], ["pfn_relu"], name="Relu_0"),
        helper.make_node("Reshape", ["pfn_relu", "reshape_1_shape"], ["pfn_rows"],
                         name="reshape_1"),
        helper.make_node("ReduceMax", ["pfn_rows"], ["pillar_features"], name="ReduceMax_0",
                         axes=[1], keepdims=0),
        helper.make_node("PPScatterPlugin", ["pillar_features", "voxel_idxs", "voxel_num"],
                         ["spatial_features"], name="PPScatter_0",
                         dense_shape=[config.ny, config.nx]),
    ]
    return inits, nodes


def export(net: PointPillarsNet, path: Path, config: PillarConfig) -> Path:
    """The CUDA-PointPillars layout: PFN nodes + PPScatterPlugin + the exported BEV part."""
    import onnx
    from onnx import TensorProto, helper

    net.eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    bev_file = path.with_suffix(".bev.onnx")
    torch.onnx.export(net.bev, torch.zeros(1, 64, config.ny, config.nx), str(bev_file),
                      opset_version=11, input_names=["spatial_features"],
                      output_names=["cls_preds", "box_preds", "dir_cls_preds"], dynamo=False)
    bev = onnx.load(str(bev_file))
    bev_file.unlink()
    inits, nodes = pfn_nodes(net.pfn, config)
    P = config.max_pillars
    inputs = [helper.make_tensor_value_info("voxels", TensorProto.FLOAT, [P, 32, 10]),
              helper.make_tensor_value_info("voxel_idxs", TensorProto.INT32, [P, 4]),
              helper.make_tensor_value_info("voxel_num", TensorProto.INT32, [1])]
    graph = helper.make_graph(nodes + list(bev.graph.node), "pointpillars_cuvil_demo", inputs,
                              list(bev.graph.output), inits + list(bev.graph.initializer))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)],
                              producer_name="cuvil-perception training/train_pillars.py")
    model.ir_version = 7
    onnx.save(model, str(path))
    return path


def check_export(path: Path, val, config: PillarConfig, net: PointPillarsNet) -> dict:
    """Load through PointPillars.from_onnx, compare its head maps with the torch model on the
    first validation frame (native pillarize / PFN / scatter + ONNX backbone vs torch), detect."""
    from cuvil_perception.ops.pillars import PointPillars

    model = PointPillars.from_onnx(path, config).open()
    points = Drive(Path(val[0])).read(0).points
    onnx_maps = model.runner(model.bev(points).copy())
    pillars = reference.pillarize(points, config)
    feats = torch.from_numpy(reference.pillar_features(pillars, config))
    coords = torch.from_numpy(pillars.coords[:pillars.count].astype(np.int64))
    num = torch.from_numpy(pillars.num_points[:pillars.count].astype(np.int64))
    net.eval()
    with torch.no_grad():
        torch_maps = [m[0].numpy() for m in net([(feats, coords, num)])]
    diff = max(float(np.abs(a[0] - b).max()) for a, b in zip(onnx_maps, torch_maps))
    if diff > 1e-2:
        raise SystemExit(f"{path}: exported head maps differ from torch by {diff:.3g}")
    boxes, scores, labels = model.detect(points)
    return {"loaded": True, "max_abs_diff_vs_torch": diff, "boxes_on_val_frame0": len(boxes),
            "best_score": float(scores.max()) if len(scores) else None}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", nargs="+", required=True, help="training drive folders")
    ap.add_argument("--val", nargs="+", required=True, help="validation drive folders")
    ap.add_argument("--out", type=Path, required=True, help="ONNX file to write")
    ap.add_argument("--range", type=float, nargs=6, default=None,
                    help="point_cloud_range (default KITTI)")
    ap.add_argument("--voxel", type=float, nargs=3, default=None, help="voxel size (KITTI)")
    ap.add_argument("--max-pillars", type=int, default=16000)
    ap.add_argument("--channels", type=int, nargs=2, default=(32, 64))
    ap.add_argument("--up", type=int, default=64, help="channels of each upsampled block")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (0: epochs)")
    ap.add_argument("--max-minutes", type=float, default=0.0, help="wall-clock cap (0: none)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--bn-batches", type=int, default=8,
                    help="batches that re-estimate the BatchNorm statistics before export")
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args(argv)
    kwargs = {"max_pillars": args.max_pillars}
    if args.range:
        kwargs["point_cloud_range"] = tuple(args.range)
    if args.voxel:
        kwargs["voxel_size"] = tuple(args.voxel)
    config, head = PillarConfig(**kwargs), HeadConfig()
    result = train(args, config, head)
    path = export(result["net"], args.out, config)
    summary = {"onnx": str(path), "bytes": path.stat().st_size, "steps": result["steps"],
               "seconds": round(result["seconds"], 1), "final_loss": result["final_loss"],
               "seed": args.seed, "channels": list(args.channels), "up": args.up,
               "point_cloud_range": list(config.point_cloud_range),
               "voxel_size": list(config.voxel_size), "max_pillars": config.max_pillars,
               "train": args.train, "val": args.val}
    if not args.no_check:
        summary["check"] = check_export(path, args.val, config, result["net"])
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
