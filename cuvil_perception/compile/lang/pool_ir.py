"""The native side of the prange thread pool, as LLVM IR: ``launch`` (called by a kernel at a
``prange`` loop) and ``worker`` (the loop each pool thread runs, GIL released, for its life).

Memory layouts (all little-endian, 64-bit):

- ``Par`` (one per calling Python thread, `parallel.py`): ``[0] ptr launch`` (this function's
  address), ``[8] ptr pool``, ``[16] i64 threads`` (how many threads this call may use, the
  caller's included).
- pool: ``[0] i64 idle`` (bit k: worker k waits for work and may be taken), then one 64-byte
  mailbox per worker at ``64 + 64 k``: ``[0] i32 seq`` (the futex word: bumped for each job),
  ``[8] ptr job`` (null when none is waiting to be taken).
- job (on the launching thread's stack): ``[0] ptr chunk``, ``[8] ptr ctx``, ``[16] i64 n``
  (chunks), ``[24] i64 next`` (the next chunk to take), ``[32] i32 pending`` (helpers not yet
  done; the launcher's futex word).

``launch(par, chunk, ctx, n)`` runs ``chunk(ctx, c)`` for every ``c`` in ``[0, n)``: it takes up
to ``threads - 1`` idle workers (a CAS on ``idle``; those another launch holds are not waited
for: chunk boundaries do not depend on who runs them, so fewer helpers give the same bits),
posts the job in their mailboxes (store, then ``seq += 1`` and a futex wake) and takes chunks
itself from the shared counter. When none is left it takes the job back (a CAS on the
mailbox) from every helper that has not taken it yet -- on a loaded machine a woken thread may
wait milliseconds for a core, and the launcher must not wait for it to find nothing to do --
and spins briefly, then sleeps on ``pending`` until the helpers that did take it are done. A
worker sleeps on its mailbox's ``seq``; woken, it takes the job (an exchange with null: null
means it was taken back, and it sleeps again), takes chunks until none is left, marks itself
idle, and decrements ``pending`` (waking the launcher on the last one); it touches the job no
more after that, so the job may live on the launcher's stack. A null ``par``, or one
thread, runs every chunk on the calling thread in order.

Waiting is a Linux futex (``syscall(SYS_futex, ...)``: 202 on x86-64, 98 on aarch64); the
number comes from the target triple, so an object for another Linux target gets its own.
"""

from __future__ import annotations

from llvmlite import ir

from .. import irutil as u

I32, I64, PTR = u.I32, u.I64, u.PTR
CHUNK_FN = ir.FunctionType(u.VOID, [PTR, I64])  # chunk(ctx, c)
LAUNCH_FN = ir.FunctionType(u.VOID, [PTR, PTR, PTR, I64])  # launch(par, chunk, ctx, n)
JOB = ir.LiteralStructType([PTR, PTR, I64, I64, I32])  # chunk, ctx, n, next, pending
MAILBOX, HEADER = 64, 64  # bytes: one cache line each, so workers do not share lines
MAX_WORKERS = 63  # bits of the idle mask
SPINS = 2000  # loads (and pause hints) of a futex word before sleeping on it (~a few us)
_FUTEX_WAIT, _FUTEX_WAKE = 128, 129  # FUTEX_WAIT / FUTEX_WAKE | FUTEX_PRIVATE_FLAG
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}


_PAUSE = {"x86_64": ("llvm.x86.sse2.pause", ()), "aarch64": ("llvm.aarch64.hint", (1,))}


def supported(triple: str) -> bool:
    """Whether the pool runs on ``triple`` (Linux on x86-64 or aarch64: the futex and the
    spin-wait hint); elsewhere prange loops run on the calling thread."""
    return "linux" in triple and triple.split("-")[0] in _SYS_FUTEX


def futex_number(triple: str) -> int:
    return _SYS_FUTEX[triple.split("-")[0]]


def _pause(b: ir.IRBuilder, arch: str) -> None:
    """The spin-wait hint (``pause`` / ``yield``): a spinning thread leaves its core's other
    hardware thread the pipeline, and spends less power."""
    name, args = _PAUSE[arch]
    fn = b.module.globals.get(name) or ir.Function(
        b.module, ir.FunctionType(u.VOID, [I32] * len(args)), name)
    b.call(fn, [u.const_i32(a) for a in args])


def _at(b: ir.IRBuilder, base: ir.Value, offset) -> ir.Value:
    off = u.const_i64(offset) if isinstance(offset, int) else offset
    return b.gep(base, [off], source_etype=ir.IntType(8))


def _futex(b: ir.IRBuilder, module: ir.Module, word: ir.Value, op: int, value: ir.Value) -> None:
    sys = module.globals.get("syscall") or ir.Function(
        module, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
    nr = module.globals["cuvil.sys_futex"]
    b.call(sys, [b.load(nr, typ=I64), word, u.const_i32(op), value, ir.Constant(PTR, None),
                 ir.Constant(PTR, None), u.const_i32(0)])


def _declare_common(module: ir.Module, triple_number: int) -> None:
    g = ir.GlobalVariable(module, I64, "cuvil.sys_futex")
    g.initializer, g.global_constant, g.linkage = u.const_i64(triple_number), True, "internal"


def _run_chunks(module: ir.Module) -> ir.Function:
    """``run(job)``: take chunks from ``job.next`` and run them until none is left."""
    fn = ir.Function(module, ir.FunctionType(u.VOID, [PTR]), "cuvil.run_chunks")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    job = fn.args[0]
    chunk = b.load(job, typ=CHUNK_FN.as_pointer())  # (typed: llvmlite reads the callee type)
    ctx = b.load(_at(b, job, 8), typ=PTR)
    n = b.load(_at(b, job, 16), typ=I64)
    head, body, done = (fn.append_basic_block(x) for x in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    c = b.atomic_rmw("add", _at(b, job, 24), u.const_i64(1), "monotonic")
    b.cbranch(b.icmp_signed("<", c, n), body, done)
    b.position_at_end(body)
    b.call(chunk, [ctx, c])
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _wait_while(b: ir.IRBuilder, module: ir.Module, word: ir.Value, busy, arch: str) -> ir.Value:
    """Spin ``SPINS`` loads of the i32 at ``word``, then sleep on it, until ``busy(value)`` is
    false; returns that value (acquire)."""
    fn = b.function
    pre = b.block
    head, spin, sleep, done = (fn.append_basic_block(f"wait.{x}")
                               for x in ("head", "spin", "sleep", "done"))
    b.branch(head)
    b.position_at_end(head)
    tries = b.phi(I64)
    tries.add_incoming(u.const_i64(0), pre)
    value = b.load_atomic(word, "acquire", 4, typ=I32)
    b.cbranch(busy(value), spin, done)
    b.position_at_end(spin)
    _pause(b, arch)
    more = b.add(tries, u.const_i64(1))
    tries.add_incoming(more, spin)
    b.cbranch(b.icmp_signed("<", more, u.const_i64(SPINS)), head, sleep)
    b.position_at_end(sleep)
    _futex(b, module, word, _FUTEX_WAIT, value)
    tries.add_incoming(u.const_i64(0), sleep)
    b.branch(head)
    b.position_at_end(done)
    return value


def _claim(b: ir.IRBuilder, idle: ir.Value, want: ir.Value) -> ir.Value:
    """Take up to ``want`` idle workers (lowest bits first) with one CAS; their mask."""
    fn = b.function
    retry, pick, picked, done = (fn.append_basic_block(f"claim.{x}")
                                 for x in ("retry", "pick", "picked", "done"))
    b.branch(retry)
    b.position_at_end(retry)
    old = b.load_atomic(idle, "monotonic", 8, typ=I64)
    b.branch(pick)
    b.position_at_end(pick)
    rest, chosen, count = b.phi(I64), b.phi(I64), b.phi(I64)
    rest.add_incoming(old, retry)
    chosen.add_incoming(u.const_i64(0), retry)
    count.add_incoming(u.const_i64(0), retry)
    more = b.and_(b.icmp_signed("<", count, want), b.icmp_unsigned("!=", rest, u.const_i64(0)))
    lowest = b.and_(rest, b.neg(rest))
    rest.add_incoming(b.xor(rest, lowest), pick)
    chosen.add_incoming(b.or_(chosen, lowest), pick)
    count.add_incoming(b.add(count, u.const_i64(1)), pick)
    b.cbranch(more, pick, picked)
    b.position_at_end(picked)
    swap = b.cmpxchg(idle, old, rest, "acq_rel", "monotonic")
    ok = b.extract_value(swap, 1)
    none = b.icmp_unsigned("==", chosen, u.const_i64(0))
    b.cbranch(b.or_(ok, none), done, retry)
    b.position_at_end(done)
    return b.select(ok, chosen, u.const_i64(0))


def build_launch(module: ir.Module, fn_name: str, *, futex: int, arch: str) -> None:
    """``launch(par, chunk, ctx, n)``: see the module docstring."""
    _declare_common(module, futex)
    run = _run_chunks(module)
    fn = ir.Function(module, LAUNCH_FN, fn_name)
    par, chunk, ctx, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    job = b.alloca(JOB, name="job")
    for k, value in enumerate((chunk, ctx, n, u.const_i64(0), u.const_i32(0))):
        b.store(value, _field(b, job, k))
    null = b.icmp_unsigned("==", par, ir.Constant(PTR, None))
    alone, shared = fn.append_basic_block("alone"), fn.append_basic_block("shared")
    b.cbranch(null, alone, shared)
    b.position_at_end(alone)
    b.call(run, [job])
    b.ret_void()
    b.position_at_end(shared)
    threads = b.load(_at(b, par, 16), typ=I64)
    want = b.sub(_smin(b, threads, n), u.const_i64(1))
    post = fn.append_basic_block("post")
    b.cbranch(b.icmp_signed(">", want, u.const_i64(0)), post, alone)
    b.position_at_end(post)
    pool = b.load(_at(b, par, 8), typ=PTR)
    chosen = _claim(b, pool, want)
    count = b.trunc(u.intrinsic(b, "llvm.ctpop", chosen), I32)
    b.store(count, _field(b, job, 4))
    _each_bit(b, chosen, lambda k, bit: _post(b, module, _mailbox(b, pool, k), job))
    b.call(run, [job])
    _each_bit(b, chosen, lambda k, bit: _revoke(b, pool, _mailbox(b, pool, k), bit, job))
    _wait_while(b, module, _field(b, job, 4),
                lambda v: b.icmp_unsigned("!=", v, u.const_i32(0)), arch)
    b.ret_void()


def _field(b: ir.IRBuilder, job: ir.Value, k: int) -> ir.Value:
    return b.gep(job, [u.const_i32(0), u.const_i32(k)])


def _smin(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _mailbox(b: ir.IRBuilder, pool, k) -> ir.Value:
    return _at(b, pool, b.add(u.const_i64(HEADER), b.mul(k, u.const_i64(MAILBOX))))


def _each_bit(b: ir.IRBuilder, mask, body) -> None:
    """``body(k, 1 << k)`` for each set bit k of ``mask``, lowest first."""
    fn = b.function
    pre = b.block
    head, each, done = (fn.append_basic_block(f"bit.{x}") for x in ("head", "each", "done"))
    b.branch(head)
    b.position_at_end(head)
    rest = b.phi(I64)
    rest.add_incoming(mask, pre)
    b.cbranch(b.icmp_unsigned("!=", rest, u.const_i64(0)), each, done)
    b.position_at_end(each)
    body(u.intrinsic(b, "llvm.cttz", rest, ir.Constant(u.I1, 1)), b.and_(rest, b.neg(rest)))
    rest.add_incoming(b.and_(rest, b.sub(rest, u.const_i64(1))), b.block)
    b.branch(head)
    b.position_at_end(done)


def _post(b: ir.IRBuilder, module: ir.Module, box, job) -> None:
    """Mailbox ``box``'s job = ``job``, then ``seq += 1`` and a futex wake."""
    b.atomic_rmw("xchg", _at(b, box, 8), b.bitcast(job, PTR), "release")
    b.atomic_rmw("add", box, u.const_i32(1), "seq_cst")
    _futex(b, module, box, _FUTEX_WAKE, u.const_i32(1))


def _revoke(b: ir.IRBuilder, pool, box, bit, job) -> None:
    """Take ``job`` back from a worker that has not taken it yet (it was not scheduled while
    the launcher ran the chunks): the worker is idle again and not waited for. A worker that
    took it is counted in ``pending`` and is waited for."""
    pair = b.cmpxchg(_at(b, box, 8), b.bitcast(job, PTR), ir.Constant(PTR, None), "acq_rel",
                     "monotonic")
    with b.if_then(b.extract_value(pair, 1)):
        b.atomic_rmw("or", pool, bit, "seq_cst")
        b.atomic_rmw("sub", _field(b, job, 4), u.const_i32(1), "acq_rel")


def build_worker(module: ir.Module, fn_name: str, *, futex: int, arch: str) -> None:
    """``worker(pool, k)``: marks itself idle, then runs the jobs posted to mailbox ``k``
    forever (see the module docstring)."""
    _declare_common(module, futex)
    run = _run_chunks(module)
    fn = ir.Function(module, ir.FunctionType(u.VOID, [PTR, I64]), fn_name)
    pool, k = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    box = _mailbox(b, pool, k)
    bit = b.shl(u.const_i64(1), k)
    b.atomic_rmw("or", pool, bit, "seq_cst")
    pre = b.block
    loop, work, stop = (fn.append_basic_block(x) for x in ("loop", "work", "stop"))
    b.branch(loop)
    b.position_at_end(loop)
    seen = b.phi(I32)
    seen.add_incoming(u.const_i32(0), pre)
    now = _wait_while(b, module, box, lambda v: b.icmp_unsigned("==", v, seen), arch)
    job = b.atomic_rmw("xchg", _at(b, box, 8), ir.Constant(PTR, None), "acq_rel")
    b.cbranch(b.icmp_unsigned("==", job, ir.Constant(PTR, None)), stop, work)
    b.position_at_end(work)
    b.call(run, [job])
    b.atomic_rmw("or", pool, bit, "seq_cst")  # idle again (the job is done with this worker)
    left = b.atomic_rmw("sub", _at(b, job, 32), u.const_i32(1), "acq_rel")
    wake, back = fn.append_basic_block("wake"), fn.append_basic_block("back")
    b.cbranch(b.icmp_unsigned("==", left, u.const_i32(1)), wake, back)
    b.position_at_end(wake)
    _futex(b, module, _at(b, job, 32), _FUTEX_WAKE, u.const_i32(1))
    b.branch(back)
    b.position_at_end(back)
    seen.add_incoming(now, back)
    b.branch(loop)
    b.position_at_end(stop)  # revoked before this worker took it: wait again
    seen.add_incoming(now, stop)
    b.branch(loop)
