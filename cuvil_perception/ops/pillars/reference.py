"""Numpy twins of every PointPillars kernel: the semantics in code (DESIGN.md "ops/pillars").

Each function here has the same name and signature as its native counterpart in
``cuvil_perception.ops.pillars.native``; tests compare the two. Arithmetic that decides a
discrete outcome (which cell a point falls in) is done in float32 exactly as the kernels do it.
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...geometry.bev_iou import box_table, iou_rows, may_overlap
from .config import HeadConfig, PillarConfig, logit_gate
from .types import (COUNT, DROPPED_PILLARS, DROPPED_POINTS, INVALID_POINTS, OUT_OF_RANGE,
                    Candidates, CellHeads, CellHeadWeights, ConvLayer, PfnWeights, Pillars)


def empty_pillars(config: PillarConfig) -> Pillars:
    """Zeroed static buffers for ``config``."""
    m, k = config.max_pillars, config.max_points_per_pillar
    return Pillars(np.zeros((m, k, 4), np.float32), np.zeros((m, 3), np.int32),
                   np.zeros(m, np.int32), np.zeros(5, np.int64))


def as_points(points) -> np.ndarray:
    """points as C-contiguous float32 [N, 4]; any other shape is an InputError (a [N, 5] cloud
    read as [N, 4] would be silently wrong)."""
    array = np.asarray(points)
    if array.ndim != 2 or array.shape[1] != 4:
        raise InputError(f"points must be an [N, 4] array (x, y, z, reflectance), got shape "
                         f"{array.shape}")
    return np.ascontiguousarray(array, np.float32)


def cell_of(points: np.ndarray, config: PillarConfig) -> tuple[np.ndarray, np.ndarray]:
    """(ix, iy) int32 cells of in-range points: trunc((p - min) / voxel) in float32, clamped to
    n - 1 (a point just below the upper bound may round up to n)."""
    low = np.asarray(config.point_cloud_range[:2], np.float32)
    size = np.asarray(config.voxel_size[:2], np.float32)
    ix = ((points[:, 0] - low[0]) / size[0]).astype(np.int32)
    iy = ((points[:, 1] - low[1]) / size[1]).astype(np.int32)
    return np.minimum(ix, config.nx - 1), np.minimum(iy, config.ny - 1)


def pillarize(points: np.ndarray, config: PillarConfig) -> Pillars:
    """Group points [N, 4] float32 (x, y, z, r; LiDAR frame) into pillars.

    Keeps finite points with min <= p < max on x, y and z. Pillars are numbered in order of first
    appearance in the input; points keep input order inside a pillar; the 33rd+ point of a pillar
    and every point of the (max_pillars+1)th+ pillar are dropped and counted.
    """
    out = empty_pillars(config)
    pts = as_points(points)
    finite = np.isfinite(pts).all(axis=1)
    pts = pts[finite]
    low = np.asarray(config.point_cloud_range[:3], np.float32)
    high = np.asarray(config.point_cloud_range[3:], np.float32)
    inside = ((pts[:, :3] >= low) & (pts[:, :3] < high)).all(axis=1)
    pts = pts[inside]
    out.counts[INVALID_POINTS] = int((~finite).sum())
    out.counts[OUT_OF_RANGE] = int((~inside).sum())
    if len(pts) == 0:
        return out
    ix, iy = cell_of(pts, config)
    cell = iy.astype(np.int64) * config.nx + ix
    cells, by_appearance, pillar, slot, per_pillar = _number_points(cell)
    keep = (pillar < config.max_pillars) & (slot < config.max_points_per_pillar)
    out.voxels[pillar[keep], slot[keep]] = pts[keep]
    count = min(len(cells), config.max_pillars)
    kept_cells = cells[by_appearance[:count]]
    out.coords[:count, 1] = kept_cells // config.nx
    out.coords[:count, 2] = kept_cells % config.nx
    out.num_points[:count] = np.minimum(per_pillar[:count], config.max_points_per_pillar)
    out.counts[COUNT] = count
    out.counts[DROPPED_PILLARS] = len(cells) - count
    out.counts[DROPPED_POINTS] = len(pts) - int(keep.sum())
    return out


def _number_points(cell: np.ndarray):
    """For the cell of each point: the distinct cells, their order of first appearance, each
    point's pillar id (rank of its cell's first appearance), its slot (how many earlier points
    share the pillar) and the points per pillar."""
    cells, first, inverse = np.unique(cell, return_index=True, return_inverse=True)
    by_appearance = np.argsort(first, kind="stable")
    rank = np.empty(len(cells), np.int64)
    rank[by_appearance] = np.arange(len(cells))
    pillar = rank[inverse.reshape(-1)]
    order = np.argsort(pillar, kind="stable")
    per_pillar = np.bincount(pillar, minlength=len(cells))
    starts = np.cumsum(per_pillar) - per_pillar
    slot = np.empty(len(cell), np.int64)
    slot[order] = np.arange(len(cell)) - starts[pillar[order]]
    return cells, by_appearance, pillar, slot, per_pillar


def pillar_features(pillars: Pillars, config: PillarConfig) -> np.ndarray:
    """PillarVFE's 10 features, float32 [count, 32, 10]; padded rows are zero (OpenPCDet)."""
    n = pillars.count
    vox = pillars.voxels[:n]
    num = pillars.num_points[:n].astype(np.float32)
    xyz = vox[:, :, :3]
    mean = xyz.sum(axis=1, keepdims=True) / np.maximum(num, 1)[:, None, None]
    voxel = np.asarray(config.voxel_size, np.float32)
    offset = voxel / 2 + np.asarray(config.point_cloud_range[:3], np.float32)
    cell_xyz = pillars.coords[:n, ::-1].astype(np.float32)  # (x, y, z) cell indices
    centre = cell_xyz * voxel + offset
    feats = np.concatenate([vox, xyz - mean, xyz - centre[:, None, :]], axis=2)
    mask = np.arange(vox.shape[1])[None, :] < pillars.num_points[:n, None]
    return feats * mask[:, :, None]


def pfn(pillars: Pillars, weights: PfnWeights, config: PillarConfig) -> np.ndarray:
    """Features + PFN: float32 [max_pillars, C]; rows past ``count`` are zero.

    Linear (no bias) -> BatchNorm (eps from ``weights``) -> ReLU -> max over all 32 rows, padded
    rows included: they enter the max as relu(BN(0)), as in OpenPCDet.
    """
    out = np.zeros((config.max_pillars, weights.channels), np.float32)
    n = pillars.count
    if n == 0:
        return out
    feats = pillar_features(pillars, config)
    x = (feats.reshape(-1, 10) @ weights.linear.astype(np.float32)).reshape(n, feats.shape[1], -1)
    scale = np.sqrt(weights.var.astype(np.float32) + np.float32(weights.eps))
    x = (x - weights.mean.astype(np.float32)) / scale * weights.gamma + weights.beta
    out[:n] = np.maximum(x, 0).max(axis=1)
    return out


def scatter(features: np.ndarray, coords: np.ndarray, count: int,
            config: PillarConfig) -> np.ndarray:
    """PointPillarScatter: float32 [C, ny, nx]; pillar p's features at [:, y_p, x_p], zero
    elsewhere."""
    channels = features.shape[1]
    bev = np.zeros((channels, config.ny, config.nx), np.float32)
    bev[:, coords[:count, 1], coords[:count, 2]] = features[:count].T
    return bev


def anchors(config: PillarConfig, head: HeadConfig) -> np.ndarray:
    """OpenPCDet AnchorGenerator (align_center False): float32 [H * W * A, 7].

    Order: row (y) outer, column (x), class, rotation inner.
    x = x_min + i (x_max - x_min) / (W - 1), same for y; z = bottom + dz / 2.
    """
    height, width = head.map_size(config)
    rng = config.point_cloud_range
    xs = rng[0] + np.arange(width) * ((rng[3] - rng[0]) / max(width - 1, 1))
    ys = rng[1] + np.arange(height) * ((rng[4] - rng[1]) / max(height - 1, 1))
    table = np.zeros((height, width, len(head.anchors), len(head.rotations), 7), np.float64)
    table[..., 0] = xs[None, :, None, None]
    table[..., 1] = ys[:, None, None, None]
    for k, cls in enumerate(head.anchors):
        table[:, :, k, :, 2] = cls.bottom + cls.size[2] / 2
        table[:, :, k, :, 3:6] = cls.size
    table[..., 6] = np.asarray(head.rotations)[None, None, None, :]
    return table.reshape(-1, 7).astype(np.float32)


def decode_boxes(cls_map: np.ndarray, box_map: np.ndarray, dir_map: np.ndarray,
                 anchor_table: np.ndarray, head: HeadConfig, capacity: int) -> Candidates:
    """Score, threshold and decode head maps (NHWC: [1, H, W, A*K], [.., A*7], [.., A*2]).

    score = sigmoid(max logit), label = argmax logit (first on ties), kept when
    score >= head.score_threshold; ResidualCoder decode + direction bins. Candidates are
    written in anchor order into buffers of ``capacity`` rows; the rest are counted as overflow.
    """
    logits = cls_map.reshape(-1, head.num_classes).astype(np.float32)
    best = logits.max(axis=1)
    scores = (1.0 / (1.0 + np.exp(-best.astype(np.float64)))).astype(np.float32)
    passed = np.flatnonzero(scores >= np.float32(head.score_threshold))
    taken = passed[:capacity]
    out = Candidates(np.zeros((capacity, 7), np.float32), np.zeros(capacity, np.float32),
                     np.zeros(capacity, np.int32), np.zeros(capacity, np.int32),
                     len(taken), len(passed) - len(taken))
    deltas = box_map.reshape(-1, 7)[taken].astype(np.float32)
    dirs = dir_map.reshape(-1, 2)[taken]
    out.boxes[:len(taken)] = _residual_decode(deltas, anchor_table[taken], dirs, head)
    out.scores[:len(taken)] = scores[taken]
    out.labels[:len(taken)] = logits[taken].argmax(axis=1)
    out.anchor[:len(taken)] = taken
    return out


def _residual_decode(deltas: np.ndarray, anc: np.ndarray, dirs: np.ndarray,
                     head: HeadConfig) -> np.ndarray:
    """OpenPCDet ResidualCoder.decode_torch + the direction classifier, float32."""
    xa, ya, za, dxa, dya, dza, ra = (anc[:, i] for i in range(7))
    diagonal = np.sqrt(dxa * dxa + dya * dya)
    boxes = np.empty_like(deltas)
    boxes[:, 0] = deltas[:, 0] * diagonal + xa
    boxes[:, 1] = deltas[:, 1] * diagonal + ya
    boxes[:, 2] = deltas[:, 2] * dza + za
    boxes[:, 3:6] = np.exp(deltas[:, 3:6]) * anc[:, 3:6]
    heading = deltas[:, 6] + ra
    period = np.float32(np.pi)
    offset = np.float32(head.dir_offset)
    shifted = heading - offset
    limited = shifted - np.floor(shifted / period) * period
    bin_one = dirs[:, 1] > dirs[:, 0]  # argmax over 2 bins, first on ties
    boxes[:, 6] = limited + offset + period * bin_one.astype(np.float32)
    return boxes


def nms_bev_rotated(boxes: np.ndarray, scores: np.ndarray, count: int,
                    head: HeadConfig) -> np.ndarray:
    """Class-agnostic greedy NMS on rotated bird's-eye boxes; int32 indices into ``boxes``.

    Takes the top ``head.nms_pre`` of the first ``count`` rows by descending score (ties: lower
    index first), suppresses a box when its BEV IoU with a kept box is > ``head.nms_threshold``,
    keeps at most ``head.nms_post``. Returned in descending score order.
    """
    order = np.argsort(-scores[:count], kind="stable")[:head.nms_pre]
    table = box_table(boxes[order])
    suppressed = np.zeros(len(order), bool)
    kept: list[int] = []
    for i in range(len(order)):
        if suppressed[i]:
            continue
        kept.append(int(order[i]))
        if len(kept) == head.nms_post:
            break
        rest = np.arange(i + 1, len(order))
        for j in rest[~suppressed[i + 1:] & may_overlap(table, i, rest)]:
            if iou_rows(table[i], table[j]) > head.nms_threshold:
                suppressed[j] = True
    return np.asarray(kept, np.int32)


def conv_scatter(features: np.ndarray, coords: np.ndarray, count: int, conv: ConvLayer,
                 config: PillarConfig) -> np.ndarray:
    """Scatter fused with the first conv, computed densely: float32 [H_out, W_out, C_out] (NHWC)
    = relu(conv2d(scatter(features), conv.weight, conv.stride, conv.pads) + conv.bias)."""
    canvas = scatter(features, coords, count, config)
    (cin, cout), (kh, kw), (sy, sx) = conv.channels, conv.kernel, conv.stride
    top, left, bottom, right = conv.pads
    ho, wo = conv.out_size(config.ny, config.nx)
    padded = np.pad(canvas, ((0, 0), (top, bottom), (left, right)))
    out = np.zeros((cout, ho * wo), np.float32)
    for ky in range(kh):
        for kx in range(kw):
            window = padded[:, ky:ky + sy * (ho - 1) + 1:sy, kx:kx + sx * (wo - 1) + 1:sx]
            out += conv.weight[:, :, ky, kx] @ window.reshape(cin, -1)
    out += conv.bias[:, None]
    return np.ascontiguousarray(np.maximum(out, 0).T).reshape(ho, wo, cout)


def head_cells(cls_map: np.ndarray, feat, weights: CellHeadWeights,
               head: HeadConfig) -> CellHeads:
    """Box and direction 1x1 heads at candidate cells: cells where an anchor's best class logit
    (NHWC class map, A x K per cell; first maximum, NaN never replaces a value, as the decode
    kernel takes it) reaches ``logit_gate(head.score_threshold)``; ``feat`` the map F
    [1, C_f, H, W] they read, or its channel parts (a list, concatenated in order). Rows of
    other cells are zero here (not meaningful)."""
    parts = feat if isinstance(feat, (list, tuple)) else [feat]
    f = np.concatenate([p.reshape(p.shape[1], -1) for p in parts]).reshape(weights.features, -1)
    logits = cls_map.reshape(f.shape[1], head.anchors_per_cell, -1).astype(np.float32)
    best = logits[..., 0]  # as the decode kernel: the first logit, replaced by greater ones
    for k in range(1, logits.shape[2]):
        best = np.where(logits[..., k] > best, logits[..., k], best)
    gate = np.float32(logit_gate(head.score_threshold))
    cells = np.flatnonzero((best >= gate).any(axis=1))
    box = np.zeros((f.shape[1], len(weights.box_bias)), np.float32)
    dirs = np.zeros((f.shape[1], len(weights.dir_bias)), np.float32)
    gathered = f[:, cells].T.astype(np.float32)
    box[cells] = gathered @ weights.box_weight.T + weights.box_bias
    dirs[cells] = gathered @ weights.dir_weight.T + weights.dir_bias
    return CellHeads(box, dirs, cells.astype(np.int32), len(cells))
