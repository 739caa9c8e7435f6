"""numba twins of the project's BEV kernels (PFN, scatter, fused first conv, heads at
candidate cells; the others are in _numba_twins.py), written by the same rules (benchmark
only; see vs_numba.py): the same algorithm as each kernel module's, ``@njit(nogil=True)``,
``contract`` where the kernel writes explicit FMAs, and the plain loop a numba user would write
where the kernel uses a vector operation numba has no word for (a masked broadcast, a
streaming store)."""

from __future__ import annotations

import numba
import numpy as np

F = np.float32
jit = numba.njit(nogil=True, cache=True)
jit_contract = numba.njit(nogil=True, cache=True, fastmath={"contract"})


# ---- pillars: PFN, scatter, fused first conv, heads at candidate cells ------------------------

@jit_contract
def pillars_pfn(voxels, coords, num_points, count, weights, bias, out, voxel, offset):
    channels, max_points = bias.shape[0], voxels.shape[1]
    base = np.empty(channels, np.float32)
    for p in range(count):
        filled = num_points[p]
        sx = sy = sz = F(0.0)
        for k in range(filled):
            sx, sy, sz = sx + voxels[p, k, 0], sy + voxels[p, k, 1], sz + voxels[p, k, 2]
        cx = F(coords[p, 2]) * voxel[0] + offset[0]
        cy = F(coords[p, 1]) * voxel[1] + offset[1]
        cz = F(coords[p, 0]) * voxel[2] + offset[2]
        n = F(filled)
        dmx, dmy, dmz = sx / n - cx, sy / n - cy, sz / n - cz
        padded = filled < max_points
        for c in range(channels):
            v = -dmx * weights[4, c] + (cx * weights[0, c] + bias[c])
            v = -dmy * weights[5, c] + (cy * weights[1, c] + v)
            base[c] = -dmz * weights[6, c] + (cz * weights[2, c] + v)
            out[p, c] = bias[c] if bias[c] > 0.0 and padded else F(0.0)
        for k in range(filled):
            ux, uy, uz = voxels[p, k, 0] - cx, voxels[p, k, 1] - cy, voxels[p, k, 2] - cz
            r = voxels[p, k, 3]
            for c in range(channels):
                v = uy * weights[11, c] + (ux * weights[10, c] + base[c])
                v = r * weights[13, c] + (uz * weights[12, c] + v)
                out[p, c] = out[p, c] if out[p, c] > v else v


@jit
def _mark_and_sort(coords, count, bitmap, cell_pillar, cells, pids, nx):
    for p in range(count):
        cell = np.int64(coords[p, 1]) * nx + coords[p, 2]
        cell_pillar[cell] = p
        bitmap[cell >> 6] |= np.uint64(1) << np.uint64(cell & 63)
    written = 0
    for w in range(bitmap.shape[0]):
        word = bitmap[w]
        if word != 0:
            for bit in range(64):
                if (word >> np.uint64(bit)) & np.uint64(1):
                    cell = (w << 6) + bit
                    cells[written], pids[written] = cell, cell_pillar[cell]
                    written += 1
            bitmap[w] = 0


@jit
def pillars_scatter(features, coords, count, bev, prev_cells, prev_count, bitmap, cell_pillar,
                    cells, pids, nx):
    """kernel_scatter's "merged" order."""
    _mark_and_sort(coords, count, bitmap, cell_pillar, cells, pids, nx)
    previous, channels, past = prev_count[0], features.shape[1], 1 << 40
    i = j = 0
    while i < previous or j < count:
        old = prev_cells[i] if i < previous else past
        new = cells[j] if j < count else past
        if new <= old:
            pid = pids[j]
            for c in range(channels):
                bev[c, new] = features[pid, c]
        else:
            for c in range(channels):
                bev[c, old] = 0.0
        j += new <= old
        i += old <= new
    for k in range(count):
        prev_cells[k] = cells[k]
    prev_count[0] = count


@jit
def pillars_scatter_lines(features, coords, count, bev, prev_lines, prev_count, bitmap,
                          cell_pillar, cells, pids, union_lines, union_ends, nx):
    """kernel_scatter_lines' steps 1, 2 and 4 (whole 16-float lines of every plane; no
    streaming stores in numba, and the features read in cell order: no gather step)."""
    _mark_and_sort(coords, count, bitmap, cell_pillar, cells, pids, nx)
    previous, past = prev_count[0], 1 << 40
    i = j = n = 0
    while i < previous or j < count:
        line = min((cells[j] >> 4) if j < count else past,
                   prev_lines[i] if i < previous else past)
        i += (prev_lines[i] if i < previous else past) == line
        while j < count and cells[j] >> 4 == line:
            j += 1
        union_lines[n], union_ends[n] = line, j
        n += 1
    kept = start = 0
    for k in range(n):
        prev_lines[kept] = union_lines[k]
        kept += union_ends[k] > start
        start = union_ends[k]
    prev_count[0] = kept
    start = 0
    for k in range(n):
        at = union_lines[k] * 16
        for c in range(features.shape[1]):
            for lane in range(16):
                bev[c, at + lane] = 0.0
            for t in range(start, union_ends[k]):
                bev[c, cells[t]] = features[pids[t], c]
        start = union_ends[k]


@jit_contract
def pillars_conv_scatter(features, coords, count, weights, bias, out, mark, touched, prev,
                         prev_count, total, geometry):
    kh, kw, sy, sx, top, left, ho, wo = geometry
    cin, cout = weights.shape[1], weights.shape[2]
    reached = 0
    for p in range(count):
        y, x = np.int64(coords[p, 1]), np.int64(coords[p, 2])
        for tap in range(kh * kw):
            shy, shx = y + top - tap // kw, x + left - tap % kw
            oy, ox = shy // sy, shx // sx
            if shy >= 0 and shy % sy == 0 and oy < ho and shx >= 0 and shx % sx == 0 and \
                    ox < wo:
                cell = oy * wo + ox
                total[:] = 0.0
                for ci in range(cin):
                    f = features[p, ci]
                    for co in range(cout):
                        total[co] = f * weights[tap, ci, co] + total[co]
                if mark[cell] == 0:
                    mark[cell], touched[reached] = 1, cell
                    reached += 1
                    for co in range(cout):
                        out[cell, co] = total[co]
                else:
                    for co in range(cout):
                        out[cell, co] += total[co]
    for k in range(prev_count[0]):
        cell = prev[k]
        if mark[cell] == 0:
            for co in range(cout):
                out[cell, co] = bias[co] if bias[co] > 0.0 else F(0.0)
    for k in range(reached):
        cell = touched[k]
        for co in range(cout):
            v = out[cell, co] + bias[co]
            out[cell, co] = v if v > 0.0 else F(0.0)
        mark[cell], prev[k] = 0, cell
    prev_count[0] = reached
    return reached


@jit_contract
def pillars_head_cells(cls, feats, weights, bias, box, dirs, found, acc, anchors, gate):
    cells, groups = cls.shape
    classes, jb, jd = groups // anchors, box.shape[1], dirs.shape[1]
    n = 0
    for c in range(cells):
        hit = False
        for a in range(anchors):
            best = cls[c, a * classes]
            for k in range(1, classes):
                value = cls[c, a * classes + k]
                best = value if value > best else best
            hit |= best >= gate
        if hit:
            found[n] = c
            n += 1
            acc[:] = bias
            row = 0
            for feat in feats:  # [C_k, cells] each
                for ci in range(feat.shape[0]):
                    f = feat[ci, c]
                    for j in range(acc.shape[0]):
                        acc[j] = f * weights[row + ci, j] + acc[j]
                row += feat.shape[0]
            box[c, :] = acc[:jb]
            dirs[c, :] = acc[jb:jb + jd]
    return n
