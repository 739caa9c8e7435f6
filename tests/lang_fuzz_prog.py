"""Whole random kernels for the kernel-language fuzzer: parameters (buffers of every dtype and
rank, scalars of each type, statics), ``@inline`` helpers, the body, and the inputs a seed
gives. ``generate(seed, flags)`` is deterministic: a seed reproduces its program and inputs."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lang_fuzz_expr import V
from lang_fuzz_gen import STORAGE, Buffer
from lang_fuzz_helpers import Helper, make_helpers
from lang_fuzz_stmt import StmtGen
from lang_fuzz_vec import VecGen

HEADER = ("from cuvil_perception.compile.lang import (Buf, Vec, atomic_add, atomic_max, "
          "atomic_min, bits, boolean, f32, f64, i32, i64, i8, i16, inline, kernel, kmath, "
          "local, prange, select, simd, u8, u16, u32, u64, unroll)\n\nTAB = (3, -1, 4, 0)\n")
DTYPES = ("f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")
SCALARS = ("i32", "i64", "f32", "f64")
NUMPY = {"f32": "float32", "f64": "float64", "i8": "int8", "u8": "uint8", "i16": "int16",
         "u16": "uint16", "i32": "int32", "u32": "uint32", "i64": "int64", "u64": "uint64"}


@dataclass
class Flags:
    """Generator features; the ones off by default make known, reported defects (see
    tests/test_lang_fuzz.py)."""

    simd: bool = True
    helpers: bool = True
    debug_share: float = 0.25   # fraction of programs also built bounds-checked
    slice_opassign: bool = True
    effects_in_expr: bool = True    # side-effecting helper calls inside expressions
    alias_share: float = 0.5        # of programs with two like buffers: noalias=False, aliased
    wide_constants: bool = False    # i32 beside a static beyond i32: a compile error
    prange_share: float = 0.3       # of programs with a prange loop reducing into a scalar


@dataclass
class Program:
    seed: int
    source: str
    kname: str
    runtime: list = field(default_factory=list)   # (name, kind, value or Buffer)
    static: dict = field(default_factory=dict)
    ret: str | None = None
    poke: tuple | None = None                     # (buffer name, axis) of the debug probe
    alias: tuple | None = None                    # two runtime positions given one array


def buffers(rng) -> list:
    out = []
    for k in range(int(rng.integers(2, 6))):
        dtype = str(rng.choice(DTYPES))
        rank = int(rng.integers(1, 4))
        shape = tuple(int(rng.choice([1, 2, 3, 4, 5, 8, 16])) for _ in range(rank))
        if rng.random() < 0.15:  # a long first axis: loops over it are vectorised
            shape = (int(rng.choice([37, 64, 130])),) + shape[1:]
        if out and rng.random() < 0.2:  # a twin of the previous one (may alias it)
            dtype, shape = out[-1].dtype, out[-1].shape
        extents = [str(n) for n in shape]
        if rng.random() < 0.3:
            extents[0] = f"n_{k}"
        elif rng.random() < 0.2:
            extents[0] = f"m_{k}"
        elif rng.random() < 0.15:  # Buf[T, None, ...]: indexed with the literal extent
            out.append(Buffer(f"b_{k}", dtype, shape, tuple(extents), dyn=(0,), unknown=True))
            continue
        out.append(Buffer(f"b_{k}", dtype, shape, tuple(extents)))
    for k, dtype in enumerate(("f32", "f64")):
        if rng.random() < 0.6:
            out.append(Buffer(f"a_{k}", dtype, (4,), ("4",), approx=True))
    return out


def annotation(b: Buffer) -> str:
    dims = ", ".join("None" if b.unknown and k == 0 else e if e.isdigit() else f'"{e}"'
                     for k, e in enumerate(b.extents))
    return f"Buf[{b.dtype}, {dims}]"


def generate(seed: int, flags: Flags | None = None) -> Program:
    flags = flags or Flags()
    rng = np.random.default_rng(seed)
    bufs = buffers(rng)
    ret = str(rng.choice(SCALARS)) if rng.random() < 0.7 else None
    prog = Program(seed, "", f"fuzz.s{seed}", ret=ret)
    g = StmtGen(rng, flags, bufs, [], ret)
    g.vec = VecGen(g)
    params = []
    for b in bufs:
        params.append(f"{b.name}: {annotation(b)}")
        prog.runtime.append((b.name, "buf", b))
    for k in range(int(rng.integers(0, 4))):
        ty = str(rng.choice(SCALARS))
        name = f"s_{k}"
        params.append(f"{name}: {ty}")
        value = scalar_value(rng, ty)
        prog.runtime.append((name, ty, value))
        g.scope.vars[name] = V(name, ty, value, value) if ty[0] == "i" else V(name, ty)
    for b in bufs:
        if b.extents[0].startswith("m_"):
            params.append(f"{b.extents[0]}: i64")
            prog.runtime.append((b.extents[0], "i64", b.shape[0]))
            g.scope.vars[b.extents[0]] = V(b.extents[0], "i64", b.shape[0], b.shape[0])
    statics = static_params(rng, bufs, g)
    probe = [b for b in bufs if not (b.approx or b.unknown)] \
        if rng.random() < flags.debug_share else []  # an unknown extent is not checked
    if probe:
        params.append("s_99: i64")
        prog.runtime.append(("s_99", "i64", 0))
    prog.static = statics
    helpers_src = make_helpers(rng, flags, bufs, g) if flags.helpers else ""
    body = kernel_body(rng, g, bufs)
    if probe:
        body[:0] = debug_probe(rng, probe, prog)
    options = aliased(rng, flags, prog)
    sig = ", ".join(params + ["*"] + [f"{k}: {type(v).__name__}" for k, v in statics.items()])
    head = f"def fz({sig})" + (f" -> {ret}:" if ret else ":")
    prog.source = (HEADER + helpers_src + "\n\n" + head + "\n" + "\n".join(body) + "\n\n\n"
                   f'K = kernel(fz, name="{prog.kname}"{options})\n'
                   f'KD = kernel(fz, name="{prog.kname}d", debug=True{options})\n')
    return prog


def aliased(rng, flags, prog) -> str:
    """Kernel options: ``noalias=False`` when two like buffers get one array (Python's
    aliasing in both modes, `prog.alias`), else none."""
    twins = [(i, j) for i, (_, ki, bi) in enumerate(prog.runtime) for j, (_, kj, bj)
             in enumerate(prog.runtime) if i < j and ki == kj == "buf" and bi.key() == bj.key()
             and not (bi.approx or bj.approx)]
    if not twins or rng.random() >= flags.alias_share:
        return ""
    prog.alias = twins[int(rng.integers(len(twins)))]
    return ", noalias=False"


def debug_probe(rng, bufs, prog) -> list:
    """Lines that touch one element (or a vector, a slice) one past the end of a buffer when
    ``s_99`` is 1 (and nothing when 0); ``prog.poke`` = (buffer name, axis or None)."""
    b = bufs[int(rng.integers(len(bufs)))]
    idx = [str(int(rng.integers(n))) for n in b.shape]
    axis = len(idx) - 1
    kind = str(rng.choice(["elem", "load", "slice"])) if b.dtype in ("i32", "i64", "f32", "f64") \
        else "elem"
    if kind == "load" and not b.local:
        n = int(rng.integers(1, min(b.size, 16) + 1))
        prog.poke = (b.name, None)
        return ["    if s_99 > 0:", f"        r_0 = simd.load({b.name}, {b.size - n} + s_99, {n})",
                f"        {b.name}[{', '.join(idx)}] = r_0[0]"]
    if kind == "slice" and b.extents[axis].isdigit():
        n = int(rng.integers(1, b.shape[axis] + 1))
        idx[axis] = f"v_0:v_0 + {n}"
        prog.poke = (b.name, axis)
        return ["    if s_99 > 0:", f"        v_0 = {b.shape[axis] - n} + s_99",
                f"        {b.name}[{', '.join(idx)}] = 1"]
    axis = int(rng.integers(len(idx)))
    idx[axis] = f"{b.shape[axis] - 1} + s_99"
    prog.poke = (b.name, axis)
    return ["    if s_99 > 0:", f"        {b.name}[{', '.join(idx)}] = 1"]


def scalar_value(rng, ty: str):
    if ty == "i32":
        return int(rng.integers(-1000, 1000))
    if ty == "i64":
        return int(rng.integers(-10**6, 10**6))
    return float(rng.choice([0.0, -0.0, 1.5, -2.25, 1e3, 0.1, np.inf, -np.inf, np.nan,
                             float(rng.normal() * 10), float(rng.normal() * 10)]))


def static_params(rng, bufs, g) -> dict:
    out = {}
    for b in bufs:
        if b.extents[0].startswith("n_"):
            out[b.extents[0]] = b.shape[0]
            g.scope.vars[b.extents[0]] = V(b.extents[0], "i64", b.shape[0], b.shape[0], True)
    c = int(rng.integers(-50, 50))
    out["c_0"] = c
    g.scope.vars["c_0"] = V("c_0", "i64", c, c, weak=True)
    out["c_1"] = float(rng.choice([0.5, -1.25, 3.0, 1e-3]))
    g.scope.vars["c_1"] = V("c_1", "f64", weak=True)
    out["c_big"] = 3_000_000_000 + int(rng.integers(-5, 5))
    out["c_flag"] = bool(rng.random() < 0.5)
    g.scope.vars["c_flag"] = V("c_flag", "b", 0, 1, weak=True)
    out["c_tup"] = tuple(int(x) for x in rng.integers(-9, 10, int(rng.integers(1, 4))))
    return out


def kernel_body(rng, g: StmtGen, bufs) -> list:
    g.lines = []
    for k in range(int(rng.integers(0, 3))):
        dtype = str(rng.choice(["i32", "i64", "f32", "f64"]))
        shape = tuple(int(rng.choice([2, 3, 4, 8])) for _ in range(int(rng.integers(1, 3))))
        name = f"t_{k}"
        g.emit(1, f"{name} = local({dtype}, {', '.join(map(str, shape))})")
        bufs.append(Buffer(name, dtype, shape, tuple(map(str, shape)), local=True))
    if rng.random() < g.flags.prange_share:
        prange_block(g, bufs)
    for _ in range(int(rng.integers(3, 11))):
        g.statement(1, int(rng.choice([1, 2, 2, 3])))
    if g.ret:
        g.emit(1, f"return {g.ret}({g.expr(g.ret, 2).code})")
    return g.lines


def prange_block(g: StmtGen, bufs) -> None:
    """``acc = T(0)``, then ``for p in prange(<a buffer's first extent>[, chunks=k]):`` with
    one reduction (a float sum, or a min / max) of an expression that may read every buffer,
    variable and pure helper; ``acc`` is stored in a buffer after it and joins the scope. The
    body writes no buffer (its chunks run on several threads at once)."""
    axes = [b for b in bufs if not (b.local or b.unknown or b.approx)]
    if not axes:
        return
    b = g.pick(axes)
    ty = g.pick(["f32", "f64", "i64"])
    op = g.pick(["+", "+", "min", "max"]) if ty != "i64" else g.pick(["min", "max"])
    acc, idx = g.fresh("p_acc"), g.fresh("p_i")
    chunks = g.pick(["", ", chunks=1", ", chunks=3", ", chunks=7"])
    g.emit(1, f"{acc} = {ty}(0)")
    g.emit(1, f"for {idx} in prange({b.extents[0]}{chunks}):")
    outer, effects = g.scope, g.flags.effects_in_expr
    g.scope, g.flags.effects_in_expr = outer.child(), False
    g.scope.mutable, g.scope.loops = set(), g.scope.loops + 1
    g.scope.vars[idx] = V(idx, "i64", 0, b.shape[0] - 1, py=True)
    v = next((e for e in (g.expr(ty, 2) for _ in range(6)) if e.exact), None) \
        or g.leaf(ty, 0)
    g.scope, g.flags.effects_in_expr = outer, effects
    g.emit(2, f"{acc} += {ty}({v.code})" if op == "+" else
           f"{acc} = {op}({acc}, {ty}({v.code}))")
    g.scope.vars[acc] = V(acc, ty) if ty != "i64" else V(acc, ty, min(0, v.lo), max(0, v.hi))
    out = [c for c in bufs if c.dtype == ty and not (c.local or c.approx)]
    if out:
        c = g.pick(out)
        g.emit(1, f"{c.name}[{', '.join('0' for _ in c.shape)}] = {acc}")


def inputs(prog: Program) -> tuple[list, list]:
    """(compiled arguments, py_func arguments): the same values; buffers fresh arrays."""
    rng = np.random.default_rng(prog.seed + 7_000_000)
    native, oracle = [], []
    for name, kind, value in prog.runtime:
        if kind == "buf":
            arr = buffer_data(rng, value)
            twin = prog.alias is not None and len(native) == prog.alias[1]
            native.append(native[prog.alias[0]] if twin else arr.copy())
            oracle.append(oracle[prog.alias[0]] if twin else arr.copy())
        else:
            native.append(value)
            oracle.append(np.dtype({"i32": "i4", "i64": "i8", "f32": "f4", "f64": "f8"}[kind])
                          .type(value))
    return native, oracle


def buffer_data(rng, b: Buffer) -> np.ndarray:
    comp, lo, hi, _ = STORAGE[b.dtype]
    dtype = np.dtype(NUMPY[b.dtype])
    if lo is None:
        data = rng.normal(0, 10, b.shape)
        special = rng.random(b.shape) < 0.08
        data[special] = rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 0.5, -1.5],
                                   int(special.sum()))
        return data.astype(dtype)
    lo, hi = max(lo, -1000), min(hi, 1000)
    return rng.integers(lo, hi + 1, b.shape).astype(dtype)
