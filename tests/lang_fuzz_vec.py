"""Vector values (``Vec[T, n]``) and slices for the kernel-language fuzzer: expressions (loads,
slices, splat, iota, lane-wise arithmetic, masks, select, min/max, casts, shuffles) and the
statements that store them. Int lanes may wrap (numpy arrays and the kernel both do), so a
vector's interval is capped at its type's range; a store into an ``i32``/``i64`` buffer masks
the lanes into the buffer's kept interval."""

from __future__ import annotations

from dataclasses import dataclass

from lang_fuzz_expr import CAST, FLOATS, INTS, LIMITS, V, paren
from lang_fuzz_gen import STORAGE, VEC_DTYPES


@dataclass(frozen=True)
class VecV:
    code: str
    elem: str      # i32 i64 f32 f64, or b (a mask)
    lanes: int
    lo: float = LIMITS["i64"][0]
    hi: float = LIMITS["i64"][1]


def capped(elem: str, lo, hi) -> tuple:
    tlo, thi = LIMITS[elem]
    return (lo, hi) if tlo <= lo and hi <= thi else (tlo, thi)


class VecGen:
    def __init__(self, g):
        self.g = g  # the `lang_fuzz_gen.ExprGen` (scope, buffers, scalar expressions)

    def vec_bufs(self, elem=None, static_last=False):
        return [b for b in self.g.bufs if b.dtype in VEC_DTYPES and not b.approx
                and (elem is None or b.dtype == elem)]

    # -- sources ------------------------------------------------------------------------
    def vec_expr(self, elem: str, lanes: int, depth: int) -> VecV:
        g = self.g
        for _ in range(4):
            kind = g.pick(["src", "src", "bin", "bin", "un", "select", "minmax", "cast", "fn",
                           "var"] if depth > 0 else ["src", "var"])
            v = getattr(self, "v_" + kind)(elem, lanes, depth)
            if v is not None:
                return v
        return self.splat(elem, lanes, depth)

    def v_var(self, elem, lanes, depth):
        found = [v for v in self.g.scope.vecs.values() if v.elem == elem and v.lanes == lanes]
        return self.g.pick(found) if found else None

    def v_src(self, elem, lanes, depth):
        r = self.g.rng.random()
        if r < 0.35:
            return self.load(elem, lanes, depth)
        if r < 0.7:
            return self.slice_read(elem, lanes, depth)
        if r < 0.85:
            return self.splat(elem, lanes, depth)
        if r < 0.92:
            lo, hi = (0, lanes - 1) if elem in INTS else (LIMITS[elem])
            return VecV(f"simd.iota({elem}, {lanes})", elem, lanes, lo, hi)
        items = [self.g.expr(elem, 0).typed() for _ in range(lanes)] if lanes <= 8 else None
        if items is None:
            return None
        lo, hi = min(i.lo for i in items), max(i.hi for i in items)
        return VecV(f"simd.vector({elem}, ({', '.join(i.code for i in items)},))", elem, lanes,
                    lo, hi)

    def splat(self, elem, lanes, depth):
        s = self.g.expr(elem, max(depth - 1, 0)).typed()
        return VecV(f"simd.splat({s.code}, {lanes})", elem, lanes, s.lo, s.hi)

    def load(self, elem, lanes, depth):
        bufs = [b for b in self.vec_bufs(elem) if b.size >= lanes and not b.local]
        if not bufs:
            return None
        b = self.g.pick(bufs)
        at = self.flat_start(b, lanes, depth)
        return VecV(f"simd.load({b.name}, {at}, {lanes})", elem, lanes,
                    *self.elem_iv(b))

    def elem_iv(self, b):
        comp, lo, hi, _ = STORAGE[b.dtype]
        return (lo, hi) if lo is not None else LIMITS[b.dtype]

    def flat_start(self, b, lanes, depth) -> str:
        room = b.size - lanes + 1
        if self.g.chance(0.5) or depth <= 0:
            return str(int(self.g.rng.integers(room)))
        return f"{paren(self.g.int_expr('i64', depth - 1))} % {room}"

    def slice_spec(self, b, lanes: int, depth: int):
        """(subscript text, lanes) of a one-axis slice of ``b`` with about ``lanes`` lanes."""
        g = self.g
        axes = [k for k, e in enumerate(b.extents) if not e.isidentifier() or e.startswith("n")]
        axes = [k for k in axes if k not in b.dyn]
        if not axes:
            return None
        ax = g.pick(axes)
        n = b.shape[ax]
        step = int(g.pick([1, 1, 1, 2, 3]))
        count = min(lanes, (n + step - 1) // step)
        start = int(g.rng.integers(0, n - (count - 1) * step))
        stop = start + (count - 1) * step + 1
        text = self.slice_text(b, ax, start, stop, step, count, depth)
        idx = [g.index(e, s, depth - 1) for e, s in zip(b.extents, b.shape)]
        idx[ax] = text
        return f"{b.name}[{', '.join(idx)}]", count

    def slice_text(self, b, ax, start, stop, step, count, depth) -> str:
        g, n = self.g, b.shape[ax]
        st = "" if step == 1 and g.chance(0.5) else f":{step}"
        if step == 1 and count == n and g.chance(0.5):
            return ":"
        if step == 1 and g.chance(0.3):
            starts = [v.code for v in g.scope.vars.values()
                      if v.ty == "i64" and 0 <= v.lo and v.hi <= n - count
                      and v.code[0] in "iwqv"]
            if starts:
                k = g.pick(starts)
                return f"{k}:{k} + {count}"
        if stop >= n and g.chance(0.5):
            return f"{start}:{st}" if st else f"{start}:"
        if start == 0 and g.chance(0.3):
            return f":{stop}{st}"
        return f"{start}:{stop}{st}"

    def slice_read(self, elem, lanes, depth):
        bufs = [b for b in self.vec_bufs(elem)]
        if not bufs:
            return None
        spec = self.slice_spec(self.g.pick(bufs), lanes, depth)
        if spec is None or spec[1] != lanes:
            return None
        b = [x for x in bufs if spec[0].startswith(x.name + "[")][0]
        return VecV(spec[0], elem, lanes, *self.elem_iv(b))

    # -- operations ---------------------------------------------------------------------
    def v_bin(self, elem, lanes, depth):
        g = self.g
        if elem == "b":
            return None
        ops = ["+", "-", "*"] + (["/"] if elem in FLOATS else ["&", "|", "^"])
        op = g.pick(ops)
        a = self.vec_expr(elem, lanes, depth - 1)
        if g.chance(0.3):
            s = g.expr(elem, 0)
            b = VecV(paren(s) if s.weak else paren(s.typed()), elem, lanes, s.lo, s.hi)
        else:
            b = self.vec_expr(elem, lanes, depth - 1)
        if g.chance(0.2):
            a, b = b, a
        if elem in INTS:
            c = [x * y if op == "*" else x + y if op == "+" else x - y
                 for x in (a.lo, a.hi) for y in (b.lo, b.hi)] if op in "+-*" else \
                [min(a.lo, b.lo, 0) * 2 - 1, max(a.hi, b.hi, 0) * 2 + 1]
            lo, hi = capped(elem, min(c), max(c))
        else:
            lo, hi = LIMITS[elem]
        return VecV(f"{paren(V(a.code, elem))} {op} {paren(V(b.code, elem))}", elem, lanes,
                    lo, hi)

    def v_un(self, elem, lanes, depth):
        a = self.vec_expr(elem, lanes, depth - 1)
        op = self.g.pick(["-", "abs"] + (["~"] if elem in INTS else []))
        code = f"abs({a.code})" if op == "abs" else f"{op}{paren(V(a.code, elem))}"
        lo, hi = capped(elem, min(-abs(a.lo), -abs(a.hi)) - 1, max(abs(a.lo), abs(a.hi)) + 1)
        return VecV(code, elem, lanes, lo, hi)

    def mask(self, lanes, depth) -> VecV:
        g = self.g
        if depth > 1 and g.chance(0.25):
            a, b = self.mask(lanes, depth - 1), self.mask(lanes, depth - 1)
            return VecV(f"({a.code}) {g.pick(['&', '|', '^'])} ({b.code})", "b", lanes, 0, 1)
        elem = g.pick(VEC_DTYPES)
        a = self.vec_expr(elem, lanes, depth - 1)
        if g.chance(0.3):
            s = g.expr(elem, 0)
            other = s.code if s.weak else s.typed().code
        else:
            other = self.vec_expr(elem, lanes, depth - 1).code
        op = g.pick(["<", "<=", ">", ">=", "==", "!="])
        return VecV(f"({a.code}) {op} ({other})", "b", lanes, 0, 1)

    def v_select(self, elem, lanes, depth):
        g = self.g
        m = g.bool_expr(0).code if g.chance(0.2) else self.mask(lanes, depth - 1).code
        a, b = self.vec_expr(elem, lanes, depth - 1), self.vec_expr(elem, lanes, depth - 1)
        return VecV(f"simd.select({m}, {a.code}, {b.code})", elem, lanes,
                    min(a.lo, b.lo), max(a.hi, b.hi))

    def v_minmax(self, elem, lanes, depth):
        a, b = self.vec_expr(elem, lanes, depth - 1), self.vec_expr(elem, lanes, depth - 1)
        fn = self.g.pick(["min", "max"])
        return VecV(f"simd.{fn}({a.code}, {b.code})", elem, lanes, min(a.lo, b.lo),
                    max(a.hi, b.hi))

    def v_cast(self, elem, lanes, depth):
        src = self.g.pick(VEC_DTYPES)
        a = self.vec_expr(src, lanes, depth - 1)
        if elem in INTS and src in INTS:
            lo, hi = capped(elem, a.lo, a.hi)
        else:
            lo, hi = LIMITS[elem]
        return VecV(f"{CAST[elem]}({a.code})", elem, lanes, lo, hi)

    def v_fn(self, elem, lanes, depth):
        g = self.g
        a = self.vec_expr(elem, lanes, depth - 1)
        if elem in FLOATS and g.chance(0.5):
            return VecV(f"kmath.{g.pick(['sqrt', 'floor', 'ceil', 'trunc'])}({a.code})", elem,
                        lanes)
        r = g.rng.random()
        if r < 0.4 and lanes > 1:
            picks = [int(g.rng.integers(a.lanes)) for _ in range(lanes)]
            return VecV(f"simd.shuffle({a.code}, ({', '.join(map(str, picks))},))", elem, lanes,
                        a.lo, a.hi)
        if r < 0.7:
            wide = self.vec_expr(elem, lanes + int(g.rng.integers(0, 4)), depth - 1)
            start = int(g.rng.integers(0, wide.lanes - lanes + 1))
            return VecV(f"simd.slice({wide.code}, {start}, {lanes})", elem, lanes, wide.lo,
                        wide.hi)
        x = g.expr(elem, 0).typed()
        k = int(g.rng.integers(lanes))
        return VecV(f"simd.insert({a.code}, {k}, {x.code})", elem, lanes, min(a.lo, x.lo),
                    max(a.hi, x.hi))

    # -- scalars out of vectors ---------------------------------------------------------
    def lanes_pick(self) -> int:
        return int(self.g.pick([1, 2, 3, 4, 4, 8, 8, 16, 5, 7]))

    def lane_or_reduce(self, ty: str, depth: int) -> V | None:
        g = self.g
        if not g.flags.simd:
            return None
        lanes = self.lanes_pick()
        v = self.vec_expr(ty, lanes, depth - 1)
        r = g.rng.random()
        if r < 0.4:
            k = str(int(g.rng.integers(-lanes, lanes)))
            if g.chance(0.3):
                k = f"{paren(g.int_expr(g.pick(INTS), depth - 1))} % {lanes}"
            return V(f"{paren(V(v.code, ty))}[{k}]", ty, *capped(ty, v.lo, v.hi))
        fn = g.pick(["reduce_add", "reduce_max", "reduce_min"])
        lo, hi = (v.lo * lanes, v.hi * lanes) if fn == "reduce_add" else (v.lo, v.hi)
        lo, hi = (min(lo, 0), max(hi, 0)) if fn == "reduce_add" else (lo, hi)
        return V(f"simd.{fn}({v.code})", ty, *(capped(ty, lo, hi) if ty in INTS else (lo, hi)))

    def any_all(self, depth: int) -> V | None:
        if not self.g.flags.simd:
            return None
        m = self.mask(self.lanes_pick(), depth - 1)
        return V(f"simd.{self.g.pick(['any', 'all'])}({m.code})", "b", 0, 1)

    # -- statements ---------------------------------------------------------------------
    def s_vdecl(self, indent, depth):
        g = self.g
        elem, lanes = g.pick(("i32", "i64", "f32", "f64")), self.lanes_pick()
        old = [n for n, v in g.scope.vecs.items() if n in g.scope.mutable]
        if old and g.chance(0.3):
            name = g.pick(sorted(old))
            v = g.scope.vecs[name]
            op = g.pick(["+", "-", "*"])
            rhs = self.vec_expr(v.elem, v.lanes, depth)
            g.emit(indent, f"{name} {op}= {rhs.code}")
            g.scope.vecs[name] = VecV(name, v.elem, v.lanes, *LIMITS[v.elem])
            return
        v = self.vec_expr(elem, lanes, depth + 1)
        name = g.fresh("r")
        ann = f": Vec[{elem}, {lanes}]" if g.chance(0.3) else ""
        g.emit(indent, f"{name}{ann} = {v.code}")
        g.scope.vecs[name] = VecV(name, elem, lanes, v.lo, v.hi)
        g.scope.mutable.add(name)

    def kept(self, b, v: VecV) -> str:
        """``v`` masked into the interval an int buffer keeps."""
        comp, lo, hi, _ = STORAGE[b.dtype]
        if b.dtype in FLOATS or (lo <= v.lo and v.hi <= hi):
            return v.code
        return f"({v.code}) & 65535"

    def s_vstore(self, indent, depth):
        g = self.g
        bufs = [b for b in self.vec_bufs()]
        if not bufs:
            return None
        b = g.pick(bufs)
        r = g.rng.random()
        if r < 0.3 and not b.local:
            lanes = self.lanes_pick()
            if b.size < lanes:
                return None
            v = self.vec_expr(b.dtype, lanes, depth + 1)
            at = self.flat_start(b, lanes, depth)
            return g.emit(indent, f"simd.store({b.name}, {at}, {self.kept(b, v)})")
        spec = self.slice_spec(b, self.lanes_pick(), depth)
        if spec is None:
            return None
        tgt, lanes = spec
        if r < 0.45:
            s = g.store_value(b, depth, same_type=True)
            return g.emit(indent, f"{tgt} = {s}")
        if r < 0.6 and lanes <= 6:
            items = [g.store_value(b, 0, same_type=True) for _ in range(lanes)]
            return g.emit(indent, f"{tgt} = ({', '.join(items)},)")
        v = self.vec_expr(b.dtype, lanes, depth + 1)
        if r < 0.75 and b.dtype in FLOATS and g.flags.slice_opassign:
            return g.emit(indent, f"{tgt} {g.pick(['+', '-', '*'])}= {v.code}")
        g.emit(indent, f"{tgt} = {self.kept(b, v)}")

    def s_unpack(self, indent, depth):
        g = self.g
        elem, lanes = g.pick(("i32", "i64", "f32", "f64")), int(g.rng.integers(1, 5))
        v = self.vec_expr(elem, lanes, depth + 1)
        names = [g.fresh("v") for _ in range(lanes)]
        g.emit(indent, f"{', '.join(names)}{',' if lanes == 1 else ''} = {v.code}")
        for n in names:
            g.scope.vars[n] = V(n, elem, *(capped(elem, v.lo, v.hi) if elem in INTS
                                           else LIMITS[elem]))

    def s_fill(self, indent, depth):
        """``simd.fill`` / ``simd.copy`` of a run inside the buffers."""
        g = self.g
        bufs = [b for b in self.vec_bufs() if not b.local]
        if not bufs:
            return None
        dst = g.pick(bufs)
        n = int(g.rng.integers(1, min(dst.size, 16) + 1))
        at = self.flat_start(dst, n, depth)
        srcs = [b for b in bufs if b.dtype == dst.dtype and b.size >= n and b is not dst]
        if srcs and g.chance(0.5):
            src = g.pick(srcs)
            return g.emit(indent, f"simd.copy({dst.name}, {at}, {src.name}, "
                                  f"{self.flat_start(src, n, depth)}, {n})")
        g.emit(indent, f"simd.fill({dst.name}, {at}, {n}, {g.store_value(dst, 0, True)})")
