"""Lowering ``for i in prange(start, stop, chunks=C)`` (semantics: `prange`).

The loop body is outlined into two internal functions of the kernel's module:

- ``<kernel>.prangeK.body(captures..., i64 c)`` runs chunk ``c``: it recomputes the chunk's
  ``[lo, hi)`` from the captured start and count, runs the canonical counted loop over it (the
  body lowered by the usual statement lowering, into this function), and stores each
  reduction's partial in ``partials[c]``. Its parameters are what the body reads from the
  kernel: the values of the scalar variables (copied: the body cannot change them), buffer
  pointers (``noalias`` when the kernel's are, so the vectoriser sees the same facts as in a
  plain loop; LLVM keeps them as scoped alias metadata when it inlines the body) and run-time
  extents, the partial arrays and a debug build's error record.
- ``<kernel>.prangeK(ptr ctx, i64 c)`` loads those from a stack record and calls the body: the
  fixed signature the pool's ``launch`` calls (`pool_ir.CHUNK_FN`).

At the loop the kernel fills the record, then, with a null thread-pool argument, calls every
chunk in order itself; otherwise it calls ``par->launch(par, chunk, ctx, C)``, which returns
when every chunk has run. Then each reduction's partials are combined in the fixed tree order
and into the variable (`prange.finish`); a debug build returns if a chunk recorded an index
error. Every function takes the `lower.Lowerer` as ``lw``.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from llvmlite import ir

from .. import irutil as u
from . import pool_ir
from .arith import binop, compare
from .counted import loop_var, phi_loop
from .prange import CHUNKS, MAX_CHUNKS, check_body
from .scope import Frame, Var
from .types import BOOL, VecType
from .values import BufRef, Const, Val


def for_prange(lw, node: ast.For) -> None:
    if lw.in_prange:
        lw.fail(node, "a prange loop inside a prange loop (here through a helper): only "
                "the outermost one runs in parallel", "`range` for the inner loop")
    start, stop, chunks = prange_bounds(lw, node)
    env = lw.frame.env
    outer = {name for name, v in env.items() if isinstance(v, Var)}
    reductions, problems = check_body(node, outer)
    if problems:
        lw.fail(*problems[0])
    reds = {name: (op, env[name]) for name, op in reductions.items()}
    for name, (op, var) in reds.items():
        if isinstance(var.ty, VecType) or var.ty == BOOL:
            lw.fail(node, f"'{name}' is a {var.ty} reduction: only int and float scalars "
                    "reduce across a prange loop", f"an i64 or f32 variable for '{name}'")
    captures, values = prange_captures(lw, node, env, set(reds))
    partials = {name: u.entry_alloca(lw.b, ir.ArrayType(var.ty.ir, chunks),
                                     f"{name}.parts") for name, (_, var) in reds.items()}
    count = lw.b.sub(stop, start)
    empty = lw.b.icmp_signed("<", count, u.const_i64(0))
    count = lw.b.select(empty, u.const_i64(0), count)
    n_cap = len(values)
    values += [start, count] + list(partials.values()) + ([lw.err] if lw.debug else [])
    body = prange_body(lw, node, captures, values, n_cap, reds, chunks)
    prange_launch(lw, prange_chunk(lw, body, values), values, chunks)
    prange_forget(lw, node, env)
    for name, (op, var) in reds.items():
        prange_finish(lw, op, var, partials[name], chunks)


def prange_bounds(lw, node: ast.For) -> tuple:
    """(start, stop) as i64 values and the chunk count of ``prange(...)``."""
    it = node.iter
    if not 1 <= len(it.args) <= 2 or any(k.arg != "chunks" for k in it.keywords):
        lw.fail(it, "prange() takes a stop, or a start and a stop (step 1), and "
                "optionally `chunks=`", "`prange(n)`, `prange(a, b)` or `prange(n, "
                "chunks=16)`")
    if not isinstance(node.target, ast.Name):
        lw.fail(node.target, "a prange loop needs one loop variable")
    chunks = CHUNKS
    for k in it.keywords:
        chunks = lw.const_int(k.value, "prange's chunks=")
        if not 1 <= chunks <= MAX_CHUNKS:
            lw.fail(k.value, f"chunks={chunks}: between 1 and {MAX_CHUNKS}")
    start = lw.index_value(it.args[0], node) if len(it.args) == 2 else u.const_i64(0)
    return start, lw.index_value(it.args[-1], node), chunks


def prange_captures(lw, node: ast.For, env: dict, skip: set) -> tuple[dict, list]:
    """({name: what the body binds it to, with ``("arg", k)`` for the k-th captured IR
    value}, [captured IR values]) for the names the body uses."""
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - skip
    captures, values = {}, []

    def take(value):
        if value is None or isinstance(value, ir.Constant):
            return value
        values.append(value)
        return ("arg", len(values) - 1)

    for name in sorted(used & set(env)):
        v = env[name]
        if isinstance(v, Var):
            captures[name] = (v, take(lw.b.load(v.slot, typ=v.ty.ir)))
        elif isinstance(v, BufRef):
            captures[name] = (v, replace(v, ptr=take(v.ptr),
                                         extents=tuple(take(e) for e in v.extents),
                                         strides=tuple(take(s) for s in v.strides)))
    return captures, values


def prange_body(lw, node, captures: dict, values: list, n_cap: int, reds: dict,
                chunks: int) -> ir.Function:
    """The outlined ``body(captures..., start, count, partials..., [err], c)`` (see the
    module docstring); ``values`` are the kernel-side arguments, the first ``n_cap`` of
    them the captures."""
    fn = prange_function(lw, values)
    saved = (lw.fn, lw.b, lw.err, lw.dead)
    lw.fn, lw.b = fn, ir.IRBuilder(fn.append_basic_block("entry"))
    lw.dead, lw.in_prange = False, True
    args = fn.args
    start, count, c = args[n_cap], args[n_cap + 1], args[-1]
    parts = args[n_cap + 2:n_cap + 2 + len(reds)]
    if lw.debug:
        lw.err = args[n_cap + 2 + len(reds)]
    env = prange_env(lw, captures, reds, args)
    lw.frames.append(Frame(lw.frame.src, env, lw.frame.once))
    lo, hi = _chunk(lw.b, start, count, c, chunks)
    var = loop_var(lw, node.target.id, node)
    phi_loop(lw, node, "prange", lo, node.target.id,
             lambda idx: lw.b.icmp_signed("<", idx, hi),
             lambda idx: lw.b.store(idx, var.slot),
             lambda idx: lw.b.add(idx, u.const_i64(1), flags=("nsw",)))
    for (rname, (_, rvar)), slot in zip(reds.items(), parts):
        lw.b.store(lw.b.load(env[rname].slot, typ=rvar.ty.ir),
                   u.gep(lw.b, slot, c, rvar.ty.ir))
    lw.b.ret_void()
    lw.frames.pop()
    lw.fn, lw.b, lw.err, lw.dead = saved
    lw.in_prange = False
    return fn


def prange_function(lw, values: list) -> ir.Function:
    """An internal ``void (values..., i64 c)``; a buffer parameter's argument keeps its
    name (`mark_written` knows a parameter by it) and its ``noalias``."""
    types = [u.PTR if isinstance(v.type, ir.PointerType) else v.type for v in values]
    name = f"{lw.fn.name}.prange{lw.prange_count}.body"
    lw.prange_count += 1
    fn = ir.Function(lw.fn.module, ir.FunctionType(u.VOID, types + [u.I64]), name)
    fn.linkage = "internal"
    for value, arg in zip(values, fn.args):
        if isinstance(value, ir.Argument):
            arg.name = value.name
            if "noalias" in value.attributes:
                arg.add_attribute("noalias")
    return fn


def prange_env(lw, captures: dict, reds: dict, args) -> dict:
    """The body's names: the kernel's constants; its variables as slots holding the
    captured values; its buffers on the captured pointers and extents; each reduction a
    slot holding the operation's identity."""
    def arg(ref):
        return args[ref[1]] if isinstance(ref, tuple) else ref

    env = {k: v for k, v in lw.frame.env.items() if isinstance(v, Const)}
    for cname, (old, new) in captures.items():
        if isinstance(old, Var):
            slot = u.entry_alloca(lw.b, old.ty.ir, cname, init=arg(new))
            env[cname] = Var(slot, old.ty, old.line)
        else:
            env[cname] = replace(new, ptr=arg(new.ptr),
                                 extents=tuple(arg(e) for e in new.extents),
                                 strides=tuple(arg(s) for s in new.strides))
            if isinstance(old.ptr, ir.AllocaInstr):  # a `local` array of the kernel
                lw.shared_locals.add(id(env[cname].ptr))
    for rname, (op, var) in reds.items():
        slot = u.entry_alloca(lw.b, var.ty.ir, rname, init=_identity(op, var.ty))
        env[rname] = Var(slot, var.ty, var.line)
    return env


def prange_chunk(lw, body: ir.Function, values: list) -> ir.Function:
    """``chunk(ctx, c)``: the body's arguments loaded from the record ``ctx``."""
    record = ir.LiteralStructType([a.type for a in body.args[:-1]])
    fn = ir.Function(lw.fn.module, pool_ir.CHUNK_FN, body.name[:-len(".body")])
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx, c = fn.args
    loaded = [b.load(b.gep(ctx, [u.const_i32(0), u.const_i32(k)], source_etype=record),
                     typ=t) for k, t in enumerate(record.elements)]
    b.call(body, loaded + [c])
    b.ret_void()
    fn.record = record
    return fn


def prange_launch(lw, chunk: ir.Function, values: list, chunks: int) -> None:
    """Fill the record and run every chunk: on this thread (null pool argument) or
    through ``par->launch``; then, in a debug build, return if a chunk failed a check."""
    ctx = u.entry_alloca(lw.b, chunk.record, "prange.ctx")
    for k, value in enumerate(values):
        lw.b.store(value, lw.b.gep(ctx, [u.const_i32(0), u.const_i32(k)]))
    alone = lw.b.icmp_unsigned("==", lw.par, ir.Constant(u.PTR, None))
    with lw.b.if_else(alone) as (then, other):
        with then:
            with u.for_range(lw.b, 0, chunks, name="chunk") as c:
                lw.b.call(chunk, [ctx, c])
        with other:
            launch = lw.b.load(lw.par, typ=pool_ir.LAUNCH_FN.as_pointer())
            lw.b.call(launch, [lw.par, chunk, ctx, u.const_i64(chunks)])
    if lw.debug:
        failed = lw.b.icmp_signed("!=", lw.b.load(lw.err, typ=u.I64), u.const_i64(0))
        with lw.b.if_then(failed, likely=False):
            ret = lw.fn.function_type.return_type
            if isinstance(ret, ir.VoidType):
                lw.b.ret_void()
            else:
                lw.b.ret(ir.Constant(ret, 0.0 if isinstance(
                    ret, (ir.FloatType, ir.DoubleType)) else 0))


def prange_finish(lw, op: str, var, partials: ir.Value, chunks: int) -> None:
    """``var = var op tree(partials)`` (`prange.finish`)."""
    ty = var.ty
    parts = [Val(lw.b.load(u.gep(lw.b, partials, k, ty.ir), typ=ty.ir), ty)
             for k in range(chunks)]
    while len(parts) > 1:
        parts = [prange_combine(lw, op, parts[k], parts[k + 1]) if k + 1 < len(parts)
                 else parts[k] for k in range(0, len(parts), 2)]
    before = Val(lw.b.load(var.slot, typ=ty.ir), ty)
    lw.b.store(prange_combine(lw, op, before, parts[0]).ir, var.slot)


def prange_forget(lw, node: ast.For, env: dict) -> None:
    """Names first bound in the loop (its target, what its body assigns) have no value
    after it: a read there is an error saying so (`expr.resolve`)."""
    bound = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Store)}
    for name in bound - set(env):
        lw.prange_private[name] = (
            f"'{name}' is first assigned inside the prange loop at line {node.lineno}, "
            "where each iteration has its own: after the loop it has no value", "a "
            f"reduction declared before the loop (`{name} = 0.0`, then `{name} += ...` in "
            "it), or a buffer element per iteration")


def prange_check_write(lw, buf: BufRef) -> None:
    """A write into a `local` array declared before the prange loop is refused: its
    chunks would share one array on the launching thread's stack."""
    if id(buf.ptr) in lw.shared_locals:
        lw.fail(lw.at, f"'{buf.name}' is a local array declared before the prange loop "
                "and written in it: its chunks, on several threads, would share it",
                f"declare it inside the loop (`{buf.name} = local(...)`: each iteration "
                "its own)")


def prange_combine(lw, op: str, a: Val, b: Val) -> Val:
    if op in ("min", "max"):
        better = compare(lw.b, "<" if op == "min" else ">", b, a)
        return Val(lw.b.select(better.ir, b.ir, a.ir), a.ty)
    out = binop(lw.b, op, a, b, lw.flags)
    return out if out.ty == a.ty else Val(out.ir, a.ty)


def _chunk(b: ir.IRBuilder, start, count, c, chunks: int) -> tuple:
    """[lo, hi) of chunk ``c``: ``q + (c < r)`` iterations from ``start + c q + min(c, r)``."""
    q = b.udiv(count, u.const_i64(chunks))
    r = b.urem(count, u.const_i64(chunks))
    early = b.icmp_signed("<", c, r)
    lo = b.add(start, b.add(b.mul(c, q), b.select(early, c, r)))
    return lo, b.add(lo, b.add(q, b.zext(early, u.I64)))


def _identity(op: str, ty) -> ir.Constant:
    if ty.is_float:
        value = {"+": -0.0, "*": 1.0, "min": float("inf"), "max": float("-inf")}[op]
        return ir.Constant(ty.ir, value)
    bits = ty.ir.width
    value = {"+": 0, "*": 1, "&": -1, "|": 0, "^": 0, "min": (1 << (bits - 1)) - 1,
             "max": -(1 << (bits - 1))}[op]
    return ir.Constant(ty.ir, value)
