"""Documented signatures of the PointPillars kernels (names, element types, shapes, units).

Each ``*_args`` returns the `Arg` tuple a kernel's `KernelSpec` is declared with; the C header of
a deployment library (``compile --library``) is generated from them. Shapes are written over
the kernel's static params (``max_pillars``, ``max_points``, ``channels``, ``nx``, ``ny``,
``anchors``, ``cap``, ``pre``, ``post``) and its scalar arguments (``n``, ``count``, ``m``).
Coordinates are in the LiDAR frame (x forward, y left, z up), metres.
"""

from __future__ import annotations

from ...compile import Arg

_CELLS = "ny * nx"


def pillarize_args(grid_dtype: str) -> tuple[Arg, ...]:
    """``grid_dtype``: "i16" when max_pillars < 2**15, else "i32" (kernel_pillarize.grid_type)."""
    return (
        Arg("points", "ptr", "f32", ("n", 4), "m (x, y, z); reflectance 0..1", "in",
            "the scan, KITTI .bin layout"),
        Arg("n", "i64", unit="points", doc="rows of points"),
        Arg("voxels", "ptr", "f32", ("max_pillars * max_points + 4", 4), "m (x, y, z); "
            "reflectance", "state", "[max_pillars, max_points, 4] output plus 4 spare rows; "
            "holds the previous frame on entry (zero-initialise once, 64-byte aligned)"),
        Arg("coords", "ptr", "i32", ("max_pillars", 3), "cells (z, y, x)", "state",
            "cell of each pillar; zero past count"),
        Arg("num_points", "ptr", "i32", ("max_pillars",), "points", "state",
            "real points per pillar (1..max_points); zero past count"),
        Arg("counts", "ptr", "i64", (5,), "pillars, points", "state",
            "count, dropped_points, dropped_pillars, invalid_points, out_of_range; "
            "counts[0] is the previous frame's pillar count on entry"),
        Arg("grid", "ptr", grid_dtype, (_CELLS,), "pillar id", "state",
            "-1 everywhere on entry and on exit (initialise once)"),
        Arg("overflow", "ptr", "i32", (_CELLS,), "cells", "scratch"),
        Arg("cells", "ptr", "i32", ("max_pillars",), "cells", "scratch"),
    )


def pfn_args() -> tuple[Arg, ...]:
    return (
        Arg("voxels", "ptr", "f32", ("count", "max_points", 4), "m (x, y, z); reflectance",
            "in", "pillarize's voxels"),
        Arg("coords", "ptr", "i32", ("count", 3), "cells (z, y, x)", "in"),
        Arg("num_points", "ptr", "i32", ("count",), "points", "in"),
        Arg("count", "i64", unit="pillars", doc="pillars to compute (counts[0] of pillarize)"),
        Arg("weights", "ptr", "f32", (14, "channels"), "", "in",
            "PFN Linear(10 -> C, no bias) with its BatchNorm folded in: rows 0-9 W[k, c] = "
            "linear[k, c] * gamma[c] / sqrt(var[c] + eps) for the point features k = x, y, z, "
            "r, x - pillar mean x, y - mean y, z - mean z, x - cell centre x, y - centre y, "
            "z - centre z; rows 10-13 = W0 + W4 + W7, W1 + W5 + W8, W2 + W6 + W9, W3"),
        Arg("bias", "ptr", "f32", ("channels",), "", "in",
            "folded BatchNorm bias: beta[c] - mean[c] * gamma[c] / sqrt(var[c] + eps)"),
        Arg("out", "ptr", "f32", ("count", "channels"), "", "out",
            "pillar features; rows past count are not written"),
    )


def _scatter_head() -> tuple[Arg, ...]:
    return (
        Arg("features", "ptr", "f32", ("count", "channels"), "", "in", "PFN output"),
        Arg("coords", "ptr", "i32", ("count", 3), "cells (z, y, x)", "in"),
        Arg("count", "i64", unit="pillars"),
        Arg("bev", "ptr", "f32", ("channels", "ny", "nx"), "", "state",
            "the BEV map; holds the previous frame on entry (zero-initialise once, 64-byte "
            "aligned)"),
    )


def scatter_args() -> tuple[Arg, ...]:
    """kernel_scatter (cell-granular orders)."""
    return _scatter_head() + (
        Arg("prev_cells", "ptr", "i32", ("max_pillars + 1",), "cells", "state",
            "the previous frame's sorted cells (zero-initialise)"),
        Arg("prev_count", "ptr", "i64", (1,), "cells", "state", "zero-initialise"),
        Arg("bitmap", "ptr", "u64", (f"({_CELLS} + 63) / 64",), "", "state",
            "all zero on entry and exit (zero-initialise)"),
        Arg("cell_pillar", "ptr", "i32", (_CELLS,), "pillar id", "scratch"),
        Arg("cells", "ptr", "i32", ("max_pillars",), "cells", "scratch"),
        Arg("pids", "ptr", "i32", ("max_pillars",), "pillar id", "scratch"),
    )


def scatter_lines_args() -> tuple[Arg, ...]:
    """kernel_scatter_lines (whole 64-byte lines)."""
    return scatter_args() + (
        Arg("union_lines", "ptr", "i32", ("2 * max_pillars",), "lines", "scratch"),
        Arg("union_ends", "ptr", "i32", ("2 * max_pillars",), "", "scratch"),
        Arg("gathered", "ptr", "f32", ("channels / 16", "max_pillars", 16), "", "scratch",
            "64-byte aligned"),
        Arg("rank", "ptr", "i32", ("max_pillars",), "", "scratch"),
    )


def decode_args() -> tuple[Arg, ...]:
    return (
        Arg("cls", "ptr", "f32", ("anchors", "classes"), "logit", "in", "class head (NHWC)"),
        Arg("box", "ptr", "f32", ("anchors", 7), "encoded residuals", "in", "box head"),
        Arg("dir", "ptr", "f32", ("anchors", 2), "logit", "in", "direction head"),
        Arg("anchor_table", "ptr", "f32", ("anchors", 7), "m, rad (x y z dx dy dz heading)",
            "in"),
        Arg("boxes", "ptr", "f32", ("cap", 7), "m, rad (x y z dx dy dz heading)", "out"),
        Arg("scores", "ptr", "f32", ("cap",), "probability 0..1", "out"),
        Arg("labels", "ptr", "i32", ("cap",), "class index (0-based)", "out"),
        Arg("anchor", "ptr", "i32", ("cap",), "anchor index", "out"),
        Arg("counts", "ptr", "i64", (2,), "rows", "out",
            "rows written, anchors that passed but did not fit in cap"),
    )


def nms_args() -> tuple[Arg, ...]:
    return (
        Arg("boxes", "ptr", "f32", ("m", 7), "m, rad (x y z dx dy dz heading)", "in",
            "sorted by descending score"),
        Arg("cosines", "ptr", "f64", ("m",), "", "in", "cos of each heading"),
        Arg("sines", "ptr", "f64", ("m",), "", "in", "sin of each heading"),
        Arg("m", "i64", unit="boxes", doc="rows of boxes", most="pre"),
        Arg("keep", "ptr", "i32", ("post",), "row index", "out",
            "rows kept, by descending score; the return value says how many"),
        Arg("suppressed", "ptr", "u8", ("pre",), "", "scratch"),
        Arg("table", "ptr", "f64", ("pre", 12), "", "scratch"),
        Arg("extents", "ptr", "f64", (4, "pre"), "m", "scratch"),
        Arg("near", "ptr", "u8", ("pre",), "", "scratch"),
    )


def conv_scatter_args() -> tuple[Arg, ...]:
    """kernel_conv_scatter (scatter fused into the first conv; output NHWC)."""
    return (
        Arg("features", "ptr", "f32", ("count", "cin"), "", "in", "PFN output"),
        Arg("coords", "ptr", "i32", ("count", 3), "cells (z, y, x)", "in"),
        Arg("count", "i64", unit="pillars"),
        Arg("weights", "ptr", "f32", ("kh * kw", "cin", "cout"), "", "in",
            "BN-folded conv weight, [ky * kw + kx, ci, co] = W[co, ci, ky, kx]"),
        Arg("bias", "ptr", "f32", ("cout",), "", "in", "BN-folded bias"),
        Arg("out", "ptr", "f32", ("ho", "wo", "cout"), "", "state",
            "relu(conv + bias), NHWC; holds the previous frame on entry (relu(bias) everywhere "
            "before the first call)"),
        Arg("mark", "ptr", "u8", ("ho * wo",), "", "state", "all zero on entry and exit"),
        Arg("touched", "ptr", "i32", ("ho * wo",), "cells", "scratch"),
        Arg("prev", "ptr", "i32", ("ho * wo",), "cells", "state",
            "the output cells the previous frame reached"),
        Arg("prev_count", "ptr", "i64", (1,), "cells", "state", "zero-initialise"),
    )


def head_cells_args() -> tuple[Arg, ...]:
    """kernel_head_cells (box / direction 1x1 heads at candidate cells)."""
    return (
        Arg("cls", "ptr", "f32", ("cells", "groups"), "logit", "in", "class head (NHWC)"),
        Arg("feats", "ptr", "u64", ("len(parts)",), "address", "in",
            "address of each channel part k of the heads' input map, f32 [parts[k], cells]"),
        Arg("weights", "ptr", "f32", ("sum(parts)", "(jb + jd + 15) / 16 * 16"), "", "in",
            "box rows then direction rows, transposed, zero-padded"),
        Arg("bias", "ptr", "f32", ("(jb + jd + 15) / 16 * 16",), "", "in"),
        Arg("box", "ptr", "f32", ("cells", "jb"), "encoded residuals", "out",
            "written at candidate cells only"),
        Arg("dir", "ptr", "f32", ("cells", "jd"), "logit", "out",
            "written at candidate cells only"),
        Arg("found", "ptr", "i32", ("cells",), "cell index", "out",
            "candidate cells, ascending; the return value says how many"),
    )
