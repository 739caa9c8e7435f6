"""The native kernels bound to their static buffers, plus twins of the ``reference`` functions.

Each ``*Kernel`` class owns the persistent buffers of one kernel for one static configuration
(allocated as the kernel's signature states them: `compile.buffers.allocate`), binds the
compiled kernel on ``open()`` and caches buffer addresses. Results are views of those
buffers: valid until the next call on the same object.

The module-level functions have the names and signatures of ``reference``; they use one
kernel object per configuration (cached), so two calls with the same config share buffers.
"""

from __future__ import annotations

import functools

import numpy as np

from ...compile import KernelSpec, get_kernel
from ...compile.buffers import allocate
from .config import HeadConfig, PillarConfig
from .kernel_decode import decode_spec
from .kernel_nms import nms_spec
from .kernel_pfn import fold_weights, pfn_spec
from .kernel_pillarize import pillarize_spec
from .kernel_scatter import ORDERS, scatter_spec
from .kernel_scatter_lines import lines_fit, scatter_lines_spec
from .reference import as_points
from .types import Candidates, PfnWeights, Pillars

LINE_ORDERS = ("stream", "lines")
SCATTER_ORDERS = LINE_ORDERS + ORDERS


class _Bound:
    """A kernel spec, its callable once opened, and the buffer addresses it is called with."""

    spec: KernelSpec

    def __init__(self) -> None:
        self.kernel = None

    def open(self):
        if self.kernel is None:
            self.kernel = get_kernel(self.spec)
        return self

    def _call(self, *args) -> None:
        if self.kernel is None:
            self.open()
        self.kernel(*args)


class PillarizeKernel(_Bound):
    """``pillarize`` into persistent buffers (see kernel_pillarize for the state it keeps)."""

    def __init__(self, config: PillarConfig):
        super().__init__()
        self.config = config
        spec = self.spec = pillarize_spec(config)
        m, k = config.max_pillars, config.max_points_per_pillar
        # Four spare rows past the [m, k, 4] output: the kernel's scratch (see kernel_pillarize).
        self._rows = allocate(spec, "voxels", align=64)
        self.out = Pillars(self._rows[:m * k].reshape(m, k, 4), allocate(spec, "coords"),
                           allocate(spec, "num_points"), allocate(spec, "counts"))
        self.grid = allocate(spec, "grid", fill=-1)
        self.overflow, self.cells = allocate(spec, "overflow"), allocate(spec, "cells")
        self._addr = (self.out.voxels.ctypes.data, self.out.coords.ctypes.data,
                      self.out.num_points.ctypes.data, self.out.counts.ctypes.data,
                      self.grid.ctypes.data, self.overflow.ctypes.data, self.cells.ctypes.data)

    def __call__(self, points: np.ndarray) -> Pillars:
        """points float32 [N, 4] (x, y, z, r), LiDAR frame -> Pillars (views of the buffers)."""
        pts = as_points(points)
        self._call(pts.ctypes.data, len(pts), *self._addr)
        return self.out


class PfnKernel(_Bound):
    """Features + PFN for one set of weights: Pillars -> float32 [max_pillars, C]."""

    def __init__(self, config: PillarConfig, weights: PfnWeights):
        super().__init__()
        if weights.channels != config.num_features:
            raise ValueError(f"PFN has {weights.channels} channels, config expects "
                             f"{config.num_features}")
        self.config = config
        self.spec = pfn_spec(config)
        self.weights, self.bias = fold_weights(weights)
        self.out = allocate(self.spec, "out", count=config.max_pillars)
        self._addr = (self.weights.ctypes.data, self.bias.ctypes.data, self.out.ctypes.data)

    def __call__(self, pillars: Pillars) -> np.ndarray:
        """Rows past ``pillars.count`` keep whatever an earlier frame wrote (never read)."""
        self._call(pillars.voxels.ctypes.data, pillars.coords.ctypes.data,
                   pillars.num_points.ctypes.data, pillars.count, *self._addr)
        return self.out


class ScatterKernel(_Bound):
    """PillarScatter into a persistent [C, ny, nx] map, clearing only last frame's cells.

    ``order`` is one of ``SCATTER_ORDERS``: ``"stream"`` and ``"lines"`` are
    kernel_scatter_lines with and without non-temporal stores, the others kernel_scatter's
    write orders (the benchmark's baseline). Default: ``"stream"`` when the grid allows it
    (C and ny * nx multiples of 16), else ``"merged"``. The map is 64-byte aligned."""

    def __init__(self, config: PillarConfig, order: str | None = None):
        super().__init__()
        order = scatter_order(config, order)
        self.config = config
        spec = self.spec = scatter_kernel_spec(config, order)
        m = config.max_pillars

        def buffer(name: str, **kw) -> np.ndarray:
            return allocate(spec, name, max_pillars=m, **kw)

        self.bev = buffer("bev", align=64)
        # last frame's cells ("merged"...) or lines ("stream", "lines"), sorted
        self.prev_cells = buffer("prev_cells")
        self.prev_count, self.bitmap = buffer("prev_count"), buffer("bitmap")  # (u64 words)
        self.cell_pillar, self.cells, self.pids = (buffer(n) for n in ("cell_pillar", "cells",
                                                                        "pids"))
        buffers = (self.bev, self.prev_cells, self.prev_count, self.bitmap, self.cell_pillar,
                   self.cells, self.pids)
        if order in LINE_ORDERS:  # the union of the two frames' lines; sorted features
            self.union = (buffer("union_lines"), buffer("union_ends"))
            self.gathered, self.rank = buffer("gathered", align=64), buffer("rank")
            buffers += (*self.union, self.gathered, self.rank)
        self._addr = tuple(a.ctypes.data for a in buffers)

    def __call__(self, features: np.ndarray, coords: np.ndarray, count: int) -> np.ndarray:
        """features float32 [P, C], coords int32 [P, 3] (z, y, x) -> the map [C, ny, nx]."""
        _check_rows(features, coords, count, self.config)
        self._call(features.ctypes.data, coords.ctypes.data, int(count), *self._addr)
        return self.bev


def scatter_order(config: PillarConfig, order: str | None = None) -> str:
    """``order``, checked against the grid; None -> the default (``"stream"`` when the grid
    allows whole lines, else ``"merged"``)."""
    fits = lines_fit(config)
    order = order or ("stream" if fits else "merged")
    if order not in SCATTER_ORDERS:
        raise ValueError(f"scatter order must be one of {SCATTER_ORDERS}, got {order!r}")
    if order in LINE_ORDERS and not fits:
        raise ValueError(f"scatter order {order!r} needs num_features and nx * ny to be "
                         f"multiples of 16")
    return order


def scatter_kernel_spec(config: PillarConfig, order: str | None = None) -> KernelSpec:
    """The spec `ScatterKernel` binds for ``order`` (None: the default order)."""
    order = scatter_order(config, order)
    if order in LINE_ORDERS:
        return scatter_lines_spec(config, order == "stream")
    return scatter_spec(config, order)


def _aligned_zeros(shape: tuple) -> np.ndarray:
    """A zeroed C-contiguous float32 array whose data starts on a 64-byte boundary.

    Written once here so its pages are committed before frame 0: np.zeros maps them lazily, and
    the first scatter would otherwise page-fault through the whole 55 MB map inside a deadline."""
    size = int(np.prod(shape))
    raw = np.zeros(size + 16, np.float32)
    raw.fill(0.0)
    skip = (-raw.ctypes.data % 64) // 4
    return raw[skip:skip + size].reshape(shape)


class DecodeKernel(_Bound):
    """Threshold + decode of the head maps into a static candidate buffer."""

    def __init__(self, config: PillarConfig, head: HeadConfig, anchor_table: np.ndarray):
        super().__init__()
        spec = self.spec = decode_spec(config, head)
        self.anchor_table = np.ascontiguousarray(anchor_table, np.float32)
        self.total = len(self.anchor_table)
        self.out = Candidates(*(allocate(spec, n) for n in ("boxes", "scores", "labels",
                                                             "anchor")), 0, 0)
        self.counts = allocate(spec, "counts")
        self._addr = tuple(a.ctypes.data for a in (
            self.anchor_table, self.out.boxes, self.out.scores, self.out.labels,
            self.out.anchor, self.counts))

    def __call__(self, cls_map: np.ndarray, box_map: np.ndarray,
                 dir_map: np.ndarray) -> Candidates:
        maps = [np.ascontiguousarray(m, np.float32) for m in (cls_map, box_map, dir_map)]
        for m, width in zip(maps, (self.spec.static["classes"], 7, 2)):
            if m.size != self.total * width:
                raise ValueError(f"head map has {m.size} values, expected {self.total} x {width}")
        self._call(*(m.ctypes.data for m in maps), *self._addr)
        self.out.count, self.out.overflow = int(self.counts[0]), int(self.counts[1])
        return self.out


class NmsKernel(_Bound):
    """Rotated-BEV greedy NMS: sorts by score (stable) in numpy, the rest in the kernel."""

    def __init__(self, head: HeadConfig):
        super().__init__()
        self.head = head
        self.spec = nms_spec(head)
        self.keep, self.suppressed, self.table, self.extents, self.near = (
            allocate(self.spec, n) for n in ("keep", "suppressed", "table", "extents", "near"))
        self._addr = tuple(a.ctypes.data for a in (
            self.keep, self.suppressed, self.table, self.extents, self.near))

    def __call__(self, boxes: np.ndarray, scores: np.ndarray, count: int) -> np.ndarray:
        """int32 indices into ``boxes`` of the kept boxes, by descending score."""
        order = np.argsort(-scores[:count], kind="stable")[:self.head.nms_pre].astype(np.int32)
        ranked = np.ascontiguousarray(boxes[order], np.float32)
        heading = ranked[:, 6].astype(np.float64)
        cosines, sines = np.cos(heading), np.sin(heading)
        if self.kernel is None:
            self.open()
        kept = self.kernel(ranked.ctypes.data, cosines.ctypes.data, sines.ctypes.data,
                           len(order), *self._addr)
        return order[self.keep[:kept]]


def _check_rows(features: np.ndarray, coords: np.ndarray, count: int, config) -> None:
    rows = config.max_pillars
    if features.shape != (rows, config.num_features) or features.dtype != np.float32 \
            or not features.flags.c_contiguous:
        raise ValueError(f"features must be C-contiguous float32 [{rows}, {config.num_features}]")
    if coords.shape != (rows, 3) or coords.dtype != np.int32 or not coords.flags.c_contiguous:
        raise ValueError(f"coords must be C-contiguous int32 [{rows}, 3]")
    if not 0 <= count <= rows:
        raise ValueError(f"count {count} outside 0..{rows}")


# -- twins of the reference functions -----------------------------------------------------
@functools.lru_cache(maxsize=8)
def _pillarizer(config: PillarConfig) -> PillarizeKernel:
    return PillarizeKernel(config).open()


@functools.lru_cache(maxsize=8)
def _scatterer(config: PillarConfig) -> ScatterKernel:
    return ScatterKernel(config).open()


def pillarize(points: np.ndarray, config: PillarConfig) -> Pillars:
    """Native ``reference.pillarize``; copies of the per-config kernel's persistent buffers, so
    a second call does not overwrite the first call's result (the ops use the kernels' views)."""
    out = _pillarizer(config)(points)
    return Pillars(out.voxels.copy(), out.coords.copy(), out.num_points.copy(),
                   out.counts.copy())


def pfn(pillars: Pillars, weights: PfnWeights, config: PillarConfig) -> np.ndarray:
    """Native ``reference.pfn`` (rows past ``count`` are zero here too: a fresh buffer)."""
    return PfnKernel(config, weights).open()(pillars)


def scatter(features: np.ndarray, coords: np.ndarray, count: int,
            config: PillarConfig) -> np.ndarray:
    """Native ``reference.scatter``; a copy of the per-config kernel's persistent map."""
    return _scatterer(config)(features, coords, count).copy()


def decode_boxes(cls_map, box_map, dir_map, anchor_table, head: HeadConfig,
                 capacity: int) -> Candidates:
    """Native ``reference.decode_boxes`` (``capacity`` must match the head's static capacity)."""
    kernel = DecodeKernel(_config_for(head, anchor_table, capacity), head, anchor_table)
    return kernel.open()(cls_map, box_map, dir_map)


def nms_bev_rotated(boxes: np.ndarray, scores: np.ndarray, count: int,
                    head: HeadConfig) -> np.ndarray:
    """Native ``reference.nms_bev_rotated``."""
    return NmsKernel(head).open()(boxes, scores, count)


def _config_for(head: HeadConfig, anchor_table: np.ndarray, capacity: int):
    """A stand-in grid with the anchor count of ``anchor_table``: decode only needs that."""
    per_cell = head.anchors_per_cell
    cells = len(anchor_table) // per_cell
    fake = _GridShape(nx=cells * head.stride, ny=head.stride)
    if head.candidate_capacity(fake) != capacity:
        raise ValueError(f"capacity {capacity} does not match the head's "
                         f"{head.candidate_capacity(fake)}")
    return fake


class _GridShape:
    """Just the (ny, nx) a HeadConfig needs to size its maps."""

    def __init__(self, nx: int, ny: int):
        self.nx, self.ny = nx, ny
