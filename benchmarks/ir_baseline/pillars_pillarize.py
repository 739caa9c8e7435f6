"""The hand-built IR ``pillars.pillarize`` that ``cuvil_perception/ops/pillars/kernel_pillarize.py``
replaced (same signature and semantics; see that docstring). Kept for ``benchmarks/lang_vs_ir.py``."""

from __future__ import annotations

from llvmlite import ir

from cuvil_perception.compile import KernelSpec

from . import _ir as u
from cuvil_perception.ops.pillars.config import PillarConfig
from cuvil_perception.ops.pillars.signatures import pillarize_args
from cuvil_perception.ops.pillars.types import COUNT, DROPPED_PILLARS, DROPPED_POINTS, INVALID_POINTS, OUT_OF_RANGE

BLOCK = 512  # points per pre-pass block (2 KB of cell codes on the stack)
GRID_AHEAD = 32  # prefetch the grid cell of the point this many places ahead (same block)
ROWS_AHEAD = 16  # prefetch the first voxel line of the pillar id this many ids ahead
INVALID, OUTSIDE = -1, -2  # cell codes of a non-finite point and of a point out of range


def build_pillarize(module: ir.Module, fn_name: str, *, rng: list, voxel: list, nx: int,
                    ny: int, max_pillars: int, max_points: int) -> None:
    args = [u.PTR, u.I64] + [u.PTR] * 7
    fn = ir.Function(module, ir.FunctionType(u.VOID, args), name=fn_name)
    points, n, voxels, coords, num_points, counts, grid, overflow, cells = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx = _Ctx(b, rng, voxel, nx, ny, max_pillars, max_points,
               dict(voxels=voxels, coords=coords, num_points=num_points, grid=grid,
                    overflow=overflow, cells=cells))
    previous = u.load_at(b, counts, COUNT, u.I64)
    _clear_tails(ctx, previous)
    tallies = {k: u.entry_alloca(b, u.I64, init=u.const_i64(0)) for k in range(5)}
    n_over = u.entry_alloca(b, u.I64, init=u.const_i64(0))
    codes = _stack_array(b, u.I32, BLOCK)
    with u.for_range(b, 0, n, step=BLOCK, name="block") as base:
        rest = b.sub(n, base)
        size = b.select(b.icmp_signed("<", rest, u.const_i64(BLOCK)), rest,
                        u.const_i64(BLOCK))
        with u.for_range(b, 0, size, name="code") as t:
            code = _cell_code(ctx, points, b.add(base, t))
            u.store_at(b, code, codes, t)
        with u.for_range(b, 0, size, name="pt") as t:
            _prefetch_cell(ctx, codes, t, size)
            _one_point(ctx, points, b.add(base, t), u.load_at(b, codes, t, u.I32), tallies,
                       n_over)
    count = b.load(tallies[COUNT])
    _clear_leftovers(ctx, count, previous)
    _finish(ctx, count, b.load(n_over))
    for k in range(5):
        u.store_at(b, b.load(tallies[k]), counts, k)
    b.ret_void()


def _finish(ctx, count, n_over) -> None:
    """Write the coords (0, iy, ix) of pillars < count from their cells; reset their grid
    cells and the overflowing ones to -1."""
    b = ctx.b
    with u.for_range(b, 0, count, name="reset") as p:
        cell = u.load_at(b, ctx.cells, p, u.I32)
        iy = b.udiv(cell, u.const_i32(ctx.nx))
        at = b.mul(p, u.const_i64(3))
        u.store_at(b, iy, ctx.coords, b.add(at, u.const_i64(1)))
        u.store_at(b, b.sub(cell, b.mul(iy, u.const_i32(ctx.nx))), ctx.coords,
                   b.add(at, u.const_i64(2)))
        u.store_at(b, ir.Constant(ctx.gty, -1), ctx.grid, b.sext(cell, u.I64))
    with u.for_range(b, 0, n_over, name="reset_over") as k:
        cell = b.sext(u.load_at(b, ctx.overflow, k, u.I32), u.I64)
        u.store_at(b, ir.Constant(ctx.gty, -1), ctx.grid, cell)


def grid_type(max_pillars: int) -> ir.IntType:
    """int16 when pillar ids fit (half the footprint of the random-access map), else int32."""
    return ir.IntType(16) if max_pillars < 2**15 else u.I32


def _stack_array(b: ir.IRBuilder, elem: ir.Type, size: int) -> ir.Value:
    """``size`` elements on the stack (allocated in the entry block), as an opaque pointer."""
    entry = b.function.entry_basic_block
    with b.goto_block(entry):
        b.position_before(entry.instructions[0])
        slot = b.alloca(elem, size=u.const_i32(size))
        return b.bitcast(slot, u.PTR)


class _Ctx:
    """The builder and the constants one kernel instance bakes in."""

    def __init__(self, b, rng, voxel, nx, ny, max_pillars, max_points, buffers: dict):
        self.b, self.nx, self.ny = b, nx, ny
        self.low = [u.const_f32(v) for v in rng[:3]]
        self.high = [u.const_f32(v) for v in rng[3:]]
        self.size = [u.const_f32(v) for v in voxel[:2]]
        self.max_pillars, self.max_points = max_pillars, max_points
        self.voxels, self.coords = buffers["voxels"], buffers["coords"]
        self.num_points, self.grid = buffers["num_points"], buffers["grid"]
        self.overflow, self.cells = buffers["overflow"], buffers["cells"]
        self.gty = grid_type(max_pillars)
        # Rows zeroed per store: four (64 bytes) when K is a multiple of 4, so a store never
        # crosses into the next pillar; else one.
        self.group = 4 if max_points % 4 == 0 else 1
        self.zeros = ir.Constant(u.vec(u.F32, 4 * self.group), [0.0] * (4 * self.group))


def _clear_tails(ctx: _Ctx, previous: ir.Value) -> None:
    """Zero the rows past the first ``group`` of the previous frame's pillars (the first are
    zeroed when this frame takes the id, or by ``_clear_leftovers``). Few pillars have more
    than four points; doing this up front keeps a data-dependent branch out of the per-point
    loop."""
    b = ctx.b
    with u.for_range(b, 0, previous, name="tails") as p:
        filled = b.sext(u.load_at(b, ctx.num_points, p, u.I32), u.I64)
        _zero_rows(ctx, b.mul(p, u.const_i64(ctx.max_points)), u.const_i64(ctx.group),
                   filled)


def _clear_leftovers(ctx: _Ctx, count: ir.Value, previous: ir.Value) -> None:
    """Zero the rest of what the previous frame wrote to pillars ``count..previous`` (pillars
    below ``count`` were cleared when this frame took their id): rows, coords, num_points."""
    b = ctx.b
    with u.for_range(b, count, previous, name="clear") as p:
        u.store_vec(b, ctx.zeros, ctx.voxels, b.mul(p, u.const_i64(ctx.max_points * 4)))
        u.store_at(b, u.const_i32(0), ctx.num_points, p)
        for axis in range(3):
            u.store_at(b, u.const_i32(0), ctx.coords, b.add(b.mul(p, u.const_i64(3)),
                                                           u.const_i64(axis)))


def _zero_rows(ctx: _Ctx, row0, start, stop) -> None:
    """Zero voxel rows row0 + [start, stop), ``group`` rows per store (rows past the filled
    ones are zero already; a group never crosses into the next pillar)."""
    b = ctx.b
    with u.for_range(b, start, stop, step=ctx.group, name="zero_rows") as k:
        u.store_vec(b, ctx.zeros, ctx.voxels, b.mul(b.add(row0, k), u.const_i64(4)))


def _cell_code(ctx: _Ctx, points, i) -> ir.Value:
    """The cell of point ``i`` (iy * nx + ix) as i32, or INVALID / OUTSIDE. Branch-free."""
    b = ctx.b
    vals = [u.load_at(b, points, b.add(b.mul(i, u.const_i64(4)), u.const_i64(c)), u.F32)
            for c in range(4)]
    # v - v is 0 for finite v and NaN for NaN or inf; the sum is 0 iff all four are finite.
    diff = [b.fsub(v, v) for v in vals]
    total = b.fadd(b.fadd(diff[0], diff[1]), b.fadd(diff[2], diff[3]))
    finite = b.fcmp_ordered("==", total, u.const_f32(0.0))
    inside = None
    for axis in range(3):
        ok = b.and_(b.fcmp_ordered(">=", vals[axis], ctx.low[axis]),
                    b.fcmp_ordered("<", vals[axis], ctx.high[axis]))
        inside = ok if inside is None else b.and_(inside, ok)
    ix = _axis_cell(ctx, vals[0], 0, ctx.nx)
    iy = _axis_cell(ctx, vals[1], 1, ctx.ny)
    # Out of range, ix / iy are poison (fptosi of a huge value); the selects never pick them.
    cell = b.add(b.mul(iy, u.const_i32(ctx.nx)), ix)
    return b.select(finite, b.select(inside, cell, u.const_i32(OUTSIDE)), u.const_i32(INVALID))


def _axis_cell(ctx: _Ctx, value, axis: int, cells: int) -> ir.Value:
    """trunc((value - min) / voxel) clamped to cells - 1, as i32 (value inside the range)."""
    b = ctx.b
    ratio = b.fdiv(b.fsub(value, ctx.low[axis]), ctx.size[axis])
    index = b.fptosi(ratio, u.I32)
    top = u.const_i32(cells - 1)
    return b.select(b.icmp_signed(">", index, top), top, index)


def _one_point(ctx: _Ctx, points, i, code, tallies, n_over) -> None:
    """Append point ``i`` (cell ``code``) to its pillar, allocating the pillar on first sight."""
    b = ctx.b
    fn = b.function
    valid, skip, rare, common, done = (fn.append_basic_block(n) for n in (
        "pt.valid", "pt.skip", "pt.rare", "pt.common", "pt.done"))
    b.cbranch(b.icmp_signed(">=", code, u.const_i32(0)), valid, skip)
    b.position_at_end(skip)
    _add(b, tallies[INVALID_POINTS], b.icmp_signed("==", code, u.const_i32(INVALID)))
    _add(b, tallies[OUT_OF_RANGE], b.icmp_signed("==", code, u.const_i32(OUTSIDE)))
    b.branch(done)
    b.position_at_end(valid)
    cell = b.sext(code, u.I64)
    current = b.sext(u.load_at(b, ctx.grid, cell, ctx.gty), u.I32)
    count = b.load(tallies[COUNT])
    is_new = b.icmp_signed("==", current, u.const_i32(-1))
    full = b.icmp_signed(">=", count, u.const_i64(ctx.max_pillars))
    dropped = b.icmp_signed("==", current, u.const_i32(-2))
    b.cbranch(b.or_(dropped, b.and_(is_new, full)), rare, common)
    b.position_at_end(rare)
    _rare(ctx, cell, dropped, tallies, n_over)
    b.branch(done)
    b.position_at_end(common)
    pillar = b.select(is_new, count, b.sext(current, u.I64))
    u.store_at(b, b.trunc(pillar, ctx.gty), ctx.grid, cell)
    b.store(b.add(count, b.zext(is_new, u.I64)), tallies[COUNT])
    u.store_at(b, code, ctx.cells, pillar)
    ahead = b.mul(b.add(count, u.const_i64(ROWS_AHEAD)), u.const_i64(ctx.max_points * 4))
    # Not ``inbounds``: near the pillar budget the address lies past the buffer (harmless for
    # a prefetch, which never faults).
    _prefetch_write(b, b.gep(ctx.voxels, [ahead], source_etype=u.F32))
    _append(ctx, points, i, pillar, is_new, tallies)
    b.branch(done)
    b.position_at_end(done)


def _append(ctx: _Ctx, points, i, pillar, is_new, tallies) -> None:
    """Point ``i`` into the next row of ``pillar``, or into the spare row when it is full.

    A pillar id taken this frame (``is_new``) still holds the previous frame's rows: its first
    ``group`` rows (four: one 64-byte store) are zeroed here, the store aimed at the spare rows
    when the pillar is not new (no branch); rows past those were zeroed by ``_clear_tails``.
    Clearing here, not in a pass before, touches the pillar's first line once per frame."""
    b = ctx.b
    stale = u.load_at(b, ctx.num_points, pillar, u.I32)
    row0 = b.mul(pillar, u.const_i64(ctx.max_points))
    spare = u.const_i64(ctx.max_pillars * ctx.max_points)
    u.store_vec(b, ctx.zeros, ctx.voxels, b.mul(b.select(is_new, row0, spare),
                                                 u.const_i64(4)))
    filled = b.select(is_new, u.const_i32(0), stale)
    room = b.icmp_signed("<", filled, u.const_i32(ctx.max_points))
    row = b.add(row0, b.sext(filled, u.I64))
    point = u.load_vec(b, points, b.mul(i, u.const_i64(4)), u.vec(u.F32, 4))
    u.store_vec(b, point, ctx.voxels, b.mul(b.select(room, row, spare), u.const_i64(4)))
    u.store_at(b, b.add(filled, b.zext(room, u.I32)), ctx.num_points, pillar)
    _add(b, tallies[DROPPED_POINTS], b.xor(room, ir.Constant(u.I1, 1)))


def _prefetch_cell(ctx: _Ctx, codes, t, size) -> None:
    """Prefetch the grid cell of the point GRID_AHEAD places ahead in the block (its code is
    known from the pre-pass): the grid is read at random, and a cold line costs a DRAM trip."""
    b = ctx.b
    ahead = b.add(t, u.const_i64(GRID_AHEAD))
    ahead = b.select(b.icmp_signed("<", ahead, size), ahead, t)
    code = u.load_at(b, codes, ahead, u.I32)
    cell = b.select(b.icmp_signed("<", code, u.const_i32(0)), u.const_i32(0), code)
    _prefetch_write(b, u.gep(b, ctx.grid, b.sext(cell, u.I64), ctx.gty))


def _prefetch_write(b: ir.IRBuilder, address) -> None:
    """llvm.prefetch for writing, keep in all cache levels (a hint: never faults)."""
    name = "llvm.prefetch.p0"
    fn = b.module.globals.get(name) or ir.Function(
        b.module, ir.FunctionType(u.VOID, [u.PTR, u.I32, u.I32, u.I32]), name=name)
    b.call(fn, [address, u.const_i32(1), u.const_i32(3), u.const_i32(1)])


def _rare(ctx: _Ctx, cell, dropped, tallies, n_over) -> None:
    """A point of a dropped cell, or the first point of a cell when the budget is full (the
    cell is marked -2 and listed in ``overflow``)."""
    b = ctx.b
    _add(b, tallies[DROPPED_POINTS], ir.Constant(u.I1, 1))
    with b.if_then(b.xor(dropped, ir.Constant(u.I1, 1))):
        u.store_at(b, ir.Constant(ctx.gty, -2), ctx.grid, cell)
        slot = b.load(n_over)
        u.store_at(b, b.trunc(cell, u.I32), ctx.overflow, slot)
        b.store(b.add(slot, u.const_i64(1)), n_over)
        _add(b, tallies[DROPPED_PILLARS], ir.Constant(u.I1, 1))


def _add(b: ir.IRBuilder, slot, flag) -> None:
    """slot += flag (an i1)."""
    b.store(b.add(b.load(slot), b.zext(flag, u.I64)), slot)


def pillarize_spec(config: PillarConfig) -> KernelSpec:
    """The pillarize kernel for one grid."""
    return KernelSpec(
        name="pillars.pillarize", build=build_pillarize,
        static={"rng": list(config.point_cloud_range), "voxel": list(config.voxel_size),
                "nx": config.nx, "ny": config.ny, "max_pillars": config.max_pillars,
                "max_points": config.max_points_per_pillar},
        args=pillarize_args(f"i{grid_type(config.max_pillars).width}"), ret=None, fastmath=(),
        version=3)
