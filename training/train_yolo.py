"""Train the demo YOLOv8-layout camera detector on synthetic drives and export it to ONNX.

    .venv/bin/pip install torch==2.13.0          # the `train` extra; never needed at run time
    python training/make_data.py --out training/data
    python training/train_yolo.py --train training/data/train --val training/data/val \
        --epochs 30 --out cuvil_perception/models/yolov8_cuvil_demo.onnx

Classes 0 car, 1 pedestrian, 2 cyclist (the drives' label classes). Input: letterboxed
(ultralytics LetterBox rules, grey 114 padding) to ``--imgsz H W`` (multiples of 32), RGB / 255.
Assigner: a simplified task-aligned assigner (ultralytics TAL): candidates are anchor centres
inside a ground-truth box, ranked by score^0.5 * IoU^6, top 10 per box, an anchor claimed by
several boxes goes to the one it overlaps most; soft class targets = the normalised alignment.
Losses as ultralytics: BCE (gain 0.5), 1 - GIoU (7.5), DFL (1.5). Augmentation: horizontal flip.

The export goes through ``torch.onnx.export`` (TorchScript exporter, opset 17) with the Detect
head's inference forward, so the file has the ultralytics Detect export pattern; ``--check``
(default on) loads it with ``YoloV8.from_onnx`` and fails unless the head surgery cut it.
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
from yolo_net import REG_MAX, STRIDES, TinyYolo, dist2bbox, make_anchors  # noqa: E402

from cuvil_perception.drives import CLASSES, Drive  # noqa: E402
from cuvil_perception.ops.yolo.reference import letterbox_geometry, letterbox_image  # noqa: E402


def letterbox(image: np.ndarray, hw: tuple[int, int]):
    """uint8 BGR [h, w, 3] -> (uint8 RGB [3, H, W], per-axis gain and offset [4] for x1 y1 x2
    y2): the run-time letterbox of ``ops.yolo.reference`` (ultralytics LetterBox), so training
    sees exactly what inference sees."""
    (new_w, new_h), (top, _, left, _) = letterbox_geometry(image.shape[:2], hw)
    boxed = letterbox_image(image, hw)
    gx, gy = new_w / image.shape[1], new_h / image.shape[0]
    gain = np.array([gx, gy, gx, gy], np.float32)
    offset = np.array([left, top, left, top], np.float32)
    return np.ascontiguousarray(boxed[..., ::-1].transpose(2, 0, 1)), gain, offset


class Frames:
    """Every labelled frame of some drives: (drive, index) pairs, loaded on demand."""

    def __init__(self, roots: list[Path], hw: tuple[int, int]):
        self.drives = [Drive(p) for p in roots]
        self.items = [(d, k) for d in self.drives for k in range(len(d))]
        self.hw = hw

    def __len__(self) -> int:
        return len(self.items)

    def load(self, i: int, flip: bool = False):
        """(uint8 [3, H, W], boxes float32 [G, 4] x1 y1 x2 y2 input pixels, classes [G])."""
        drive, k = self.items[i]
        frame = drive.read(k)
        image, gain, offset = letterbox(frame.image, self.hw)
        rows = frame.labels[frame.labels[:, 8] >= 0]
        boxes = rows[:, 8:12] * gain + offset
        if flip:
            image = image[:, :, ::-1].copy()
            boxes = np.stack([self.hw[1] - boxes[:, 2], boxes[:, 1], self.hw[1] - boxes[:, 0],
                              boxes[:, 3]], axis=1)
        return image, boxes.astype(np.float32), rows[:, 0].astype(np.int64)


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """IoU [N, M] of xyxy boxes."""
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area_a = (a[:, 2:] - a[:, :2]).clamp(min=0).prod(-1)
    area_b = (b[:, 2:] - b[:, :2]).clamp(min=0).prod(-1)
    return inter / (area_a[:, None] + area_b[None] - inter + 1e-9)


def giou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise GIoU of xyxy boxes [N, 4]."""
    lt, rb = torch.max(a[:, :2], b[:, :2]), torch.min(a[:, 2:], b[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    union = (a[:, 2:] - a[:, :2]).prod(-1) + (b[:, 2:] - b[:, :2]).prod(-1) - inter + 1e-9
    hull = (torch.max(a[:, 2:], b[:, 2:]) - torch.min(a[:, :2], b[:, :2])).prod(-1) + 1e-9
    return inter / union - (hull - union) / hull


def assign(scores, boxes, anchors, gt_boxes, gt_cls, nc: int, topk: int = 10):
    """Simplified TAL for one image -> (foreground [A] bool, gt index [A], soft targets [A, nc])."""
    A = anchors.shape[0]
    target = torch.zeros(A, nc)
    if len(gt_boxes) == 0:
        return torch.zeros(A, dtype=torch.bool), torch.zeros(A, dtype=torch.long), target
    inside = ((anchors[None] > gt_boxes[:, None, :2]) & (anchors[None] < gt_boxes[:, None, 2:]))
    inside = inside.all(-1)  # [G, A]
    iou = box_iou(gt_boxes, boxes).clamp(min=0) * inside
    align = scores[:, gt_cls].T.pow(0.5) * iou.pow(6) * inside
    top = align.topk(min(topk, A), dim=1).indices
    chosen = torch.zeros_like(inside).scatter_(1, top, True) & inside
    owner = torch.where(chosen, iou, torch.full_like(iou, -1)).argmax(0)  # best-overlap box
    fg = chosen.any(0)
    pos = torch.zeros_like(chosen)
    pos[owner[fg], torch.nonzero(fg).squeeze(1)] = True
    align = align * pos
    norm = align / (align.amax(1, keepdim=True) + 1e-9) * (iou * pos).amax(1, keepdim=True)
    weight = norm.amax(0)
    target[fg, gt_cls[owner[fg]]] = weight[fg]
    return fg, owner, target


def dfl_loss(pred_dist: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Distribution focal loss [N] for logits [N, 4, reg_max] and distances [N, 4] (cells)."""
    left = target.long()
    wl = left + 1 - target
    logp = F.log_softmax(pred_dist, -1)
    loss = -(logp.gather(-1, left[..., None])[..., 0] * wl +
             logp.gather(-1, (left + 1)[..., None])[..., 0] * (1 - wl))
    return loss.mean(-1)


def compute_loss(feats, batch_boxes, batch_cls, nc: int):
    """ultralytics-style loss over a batch; feats = per-level [B, 64 + nc, h, w]."""
    B = feats[0].shape[0]
    x = torch.cat([f.view(B, 4 * REG_MAX + nc, -1) for f in feats], 2).permute(0, 2, 1)
    pred_dist, logits = x.split((4 * REG_MAX, nc), -1)
    anchors, strides = make_anchors(feats, STRIDES, 0.5)
    proj = torch.arange(REG_MAX, dtype=torch.float)
    dist = pred_dist.view(B, -1, 4, REG_MAX).softmax(-1) @ proj
    boxes = dist2bbox(dist, anchors[None], xywh=False) * strides[None]  # input pixels
    pixel_anchors = anchors * strides
    cls_loss = box_loss = dfl = 0.0
    total = 0.0
    for b in range(B):
        gt = torch.from_numpy(batch_boxes[b])
        fg, owner, target = assign(logits[b].detach().sigmoid(), boxes[b].detach(),
                                   pixel_anchors, gt, torch.from_numpy(batch_cls[b]), nc)
        norm = max(target.sum().item(), 1.0)
        total += 1
        cls_loss = cls_loss + F.binary_cross_entropy_with_logits(
            logits[b], target, reduction="sum") / norm
        if fg.any():
            weight = target[fg].sum(-1)
            tb = gt[owner[fg]]
            box_loss = box_loss + ((1 - giou(boxes[b][fg], tb)) * weight).sum() / norm
            ltrb = torch.cat([pixel_anchors[fg] - tb[:, :2], tb[:, 2:] - pixel_anchors[fg]], -1)
            ltrb = (ltrb / strides[fg]).clamp(0, REG_MAX - 1 - 0.01)
            d = dfl_loss(pred_dist[b][fg].view(-1, 4, REG_MAX), ltrb)
            dfl = dfl + (d * weight).sum() / norm
    return (7.5 * box_loss + 0.5 * cls_loss + 1.5 * dfl) / total


def _step(model, opt, sched, items) -> float:
    """One optimiser step on a list of (image, boxes, classes); returns the loss."""
    images = torch.from_numpy(np.stack([it[0] for it in items])).float() / 255
    loss = compute_loss(model(images), [it[1] for it in items], [it[2] for it in items],
                        len(CLASSES))
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
    opt.step()
    sched.step()
    return loss.item()


def train(args) -> dict:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    torch.set_num_threads(args.threads)
    hw = tuple(args.imgsz)
    data = Frames([Path(p) for p in args.train], hw)
    model = TinyYolo(len(CLASSES), args.width)
    model.detect.bias_init(max(hw))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=5e-4)
    steps = args.steps or args.epochs * math.ceil(len(data) / args.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=steps, pct_start=0.1)
    began, step, losses = time.perf_counter(), 0, []
    model.train()
    while step < steps:
        for _ in range(0, len(data), args.batch):
            picks = rng.integers(0, len(data), args.batch)
            items = [data.load(int(i), flip=bool(rng.random() < 0.5)) for i in picks]
            losses.append(_step(model, opt, sched, items))
            step += 1
            if step % args.log_every == 0 or step == steps:
                print(f"step {step}/{steps} loss {np.mean(losses[-args.log_every:]):.3f} "
                      f"{time.perf_counter() - began:.0f} s", flush=True)
            out_of_time = args.max_minutes and time.perf_counter() - began > args.max_minutes * 60
            if step >= steps or out_of_time:
                steps = step
                break

    def forward_batch(start):
        items = [data.load(i % len(data)) for i in range(start, start + args.batch)]
        return lambda: model(torch.from_numpy(np.stack([it[0] for it in items])).float() / 255)

    recalibrate_bn(model, [forward_batch(k * args.batch) for k in range(args.bn_batches)])
    return {"model": model, "steps": step, "seconds": time.perf_counter() - began,
            "final_loss": float(np.mean(losses[-20:])) if losses else None}


def export(model, path: Path, hw: tuple[int, int]) -> Path:
    """torch.onnx.export with ultralytics' export interface and metadata."""
    import onnx

    model.eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(model, torch.zeros(1, 3, *hw), str(path), opset_version=17,
                      input_names=["images"], output_names=["output0"], do_constant_folding=True,
                      dynamo=False)
    proto = onnx.load(str(path))
    meta = {"description": "cuvil-perception demo YOLOv8-layout detector (synthetic drives)",
            "task": "detect", "stride": "32", "batch": "1", "imgsz": str(list(hw)),
            "names": str(dict(enumerate(CLASSES))), "author": "cuvil-perception"}
    for key, value in meta.items():
        proto.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))
    return path


def check_export(path: Path, val: list[str], hw) -> dict:
    """Load through YoloV8.from_onnx: the head must be cut (native head); its detections must
    equal the full graph's output through the numpy postprocess (low conf, so there are some)."""
    from cuvil_perception.ops.yolo import YoloV8, letterbox as cuvil_letterbox, postprocess
    from cuvil_perception.ops.yolo import scale_boxes
    import onnxruntime as ort

    model = YoloV8.from_onnx(path, conf=0.01)
    if not model.cut:
        raise SystemExit(f"{path}: the head surgery did not cut the model: "
                         f"{model.fallback_reason}")
    model.open()
    image = Drive(Path(val[0])).read(0).image
    rows = model.detect(image)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    full = session.run(None, {"images": cuvil_letterbox(image, hw)})[0]
    expected = postprocess(full, conf=0.01).copy()
    scale_boxes(hw, expected, image.shape[:2])
    n = min(len(rows), len(expected), 20)
    diff = float(np.abs(rows[:n] - expected[:n]).max()) if n else 0.0
    if len(rows) != len(expected) or diff > 0.05:
        raise SystemExit(f"{path}: native head gives {len(rows)} boxes, the full graph "
                         f"{len(expected)} (max diff {diff:.3g})")
    return {"cut": True, "style": model.layout.style, "grids": model.layout.grids,
            "boxes_conf_0.01_val_frame0": int(len(rows)), "max_abs_diff_vs_full_graph": diff}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", nargs="+", required=True, help="training drive folders")
    ap.add_argument("--val", nargs="+", required=True, help="validation drive folders")
    ap.add_argument("--out", type=Path, required=True, help="ONNX file to write")
    ap.add_argument("--imgsz", type=int, nargs=2, default=(320, 1024), metavar=("H", "W"))
    ap.add_argument("--width", type=int, default=16, help="base channel count")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (0: epochs)")
    ap.add_argument("--max-minutes", type=float, default=0.0, help="wall-clock cap (0: none)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--bn-batches", type=int, default=16,
                    help="batches that re-estimate the BatchNorm statistics before export")
    ap.add_argument("--no-check", action="store_true", help="skip the from_onnx check")
    args = ap.parse_args(argv)
    if any(v % 32 for v in args.imgsz):
        ap.error(f"--imgsz must be multiples of 32, got {args.imgsz}")
    result = train(args)
    path = export(result["model"], args.out, tuple(args.imgsz))
    summary = {"onnx": str(path), "bytes": path.stat().st_size, "steps": result["steps"],
               "seconds": round(result["seconds"], 1), "final_loss": result["final_loss"],
               "seed": args.seed, "imgsz": list(args.imgsz), "width": args.width,
               "train": args.train, "val": args.val}
    if not args.no_check:
        summary["check"] = check_export(path, args.val, tuple(args.imgsz))
    print(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
