"""Scalar expression productions of the kernel-language fuzzer over a scope of names (variables,
parameters, statics, buffers, local arrays); see `lang_fuzz_expr` for the value intervals."""

from __future__ import annotations

from dataclasses import dataclass, field

from lang_fuzz_expr import (CAST, F32_EXACT, FLOATS, INTS, LIMITS, V, int_binop, int_unop,
                            join_ty, narrow, paren)

#: storage dtype -> (compute type, element interval the program keeps, cast a load needs)
STORAGE = {"i8": ("i32", -128, 127, "i32"), "u8": ("i32", 0, 255, "i32"),
           "i16": ("i32", -2**15, 2**15 - 1, "i32"), "u16": ("i32", 0, 2**16 - 1, "i32"),
           "i32": ("i32", -2**20, 2**20, ""), "u32": ("i64", 0, 2**32 - 1, "i64"),
           "i64": ("i64", -2**40, 2**40, ""), "u64": ("i64", 0, 2**40, "i64"),
           "f32": ("f32", None, None, ""), "f64": ("f64", None, None, "")}
#: stores wrap in both modes: any typed int may be stored (py_func wraps an element store as
#: compiled, lang/slices.py `stored`; numpy's own would raise OverflowError for i8 / i16)
WRAPS = ("u8", "u16", "u32", "i8", "i16")
VEC_DTYPES = ("i32", "i64", "f32", "f64")


@dataclass
class Buffer:
    """A buffer parameter or local array: ``extents`` code per axis (``8``, ``n0``, ``m``)."""

    name: str
    dtype: str
    shape: tuple
    extents: tuple
    local: bool = False
    dyn: tuple = ()        # axes whose extent is a run-time value (a helper's view of one)
    unknown: bool = False  # annotated ``Buf[T, None, ...]``: the first extent is not known
    approx: bool = False   # a tolerance-compared output, never read

    @property
    def compute(self) -> str:
        return STORAGE[self.dtype][0]

    def key(self) -> str:
        """dtype, shape and which axes have a run-time extent: the buffers a helper written
        for this one may take (a `:` it slices needs the same static extents)."""
        dynamic = tuple(k in self.dyn or e.startswith("m_") for k, e in enumerate(self.extents))
        return f"{self.dtype}{self.shape}{dynamic}"

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class Scope:
    """Names visible at a point of the program (a child scope copies its parent's)."""

    vars: dict = field(default_factory=dict)      # name -> V (its interval is the budget)
    mutable: set = field(default_factory=set)     # names that may be assigned
    vecs: dict = field(default_factory=dict)      # name -> VecV
    loops: int = 0                                # enclosing run-time loops

    def child(self) -> "Scope":
        return Scope(dict(self.vars), set(self.mutable), dict(self.vecs), self.loops)


class ExprGen:
    """Random expressions; ``self.scope`` is the current scope, ``self.bufs`` the buffers."""

    def __init__(self, rng, flags, bufs: list, helpers: list):
        self.rng, self.flags, self.bufs, self.helpers = rng, flags, bufs, helpers
        self.scope = Scope()
        self.vec = None  # the `lang_fuzz_vec.VecGen`, set by the program generator

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    # -- leaves -------------------------------------------------------------------------
    def literal(self, ty: str) -> V:
        if ty in INTS:
            v = int(self.pick([0, 1, 2, 3, 5, 7, -1, -3, 100, -100, 12345]))
            return V(str(v), ty, v, v, weak=True)
        v = self.pick([0.0, 0.5, -1.5, 2.0, 3.25, -7.0, 100.0, 1e-3, 0.1])
        return V(repr(v), ty, weak=True)

    def names_of(self, ty: str) -> list:
        return [v for v in self.scope.vars.values() if v.ty == ty]

    def load(self, ty: str, depth: int) -> V | None:
        bufs = [b for b in self.bufs if b.compute == ty and not b.approx]
        if not bufs:
            return None
        b = self.pick(bufs)
        idx = (self.index(ext, n, depth) for ext, n in zip(b.extents, b.shape))
        code = f"{b.name}[{', '.join(idx)}]"
        comp, lo, hi, cast = STORAGE[b.dtype]
        if ty in FLOATS:
            return V(code, ty)
        return V(f"{cast}({code})" if cast else code, ty, lo, hi)

    def index(self, ext: str, n: int, depth: int) -> str:
        """An index in [0, n) of an axis of extent ``n`` (written ``ext``)."""
        loops = [v for v in self.scope.vars.values()
                 if v.ty == "i64" and v.code.startswith("i") and 0 <= v.lo and v.hi < n]
        r = self.rng.random()
        if loops and r < 0.45:
            return self.pick(loops).code
        if r < 0.7 or depth <= 0:
            return str(int(self.rng.integers(n)))
        e = self.int_expr(self.pick(INTS), depth - 1)
        if self.chance(0.5):
            return f"{paren(e)} % {ext}"
        return f"min(max({e.code}, 0), {ext} - 1)"

    def leaf(self, ty: str, depth: int) -> V:
        r = self.rng.random()
        names = self.names_of(ty)
        if names and r < 0.5:
            return self.pick(names)
        if r < 0.8:
            found = self.load(ty, depth)
            if found is not None:
                return found
        if ty == "b":
            if depth >= 0 and self.chance(0.7):
                a = self.leaf(self.pick(["i32", "i64", "f32", "f64"]), -1)
                return V(f"{paren(a)} {self.pick(['<', '>=', '=='])} 0", "b", 0, 1)
            return V(self.pick(["True", "False"]), "b", 0, 1)
        return self.literal(ty)

    # -- entry points -------------------------------------------------------------------
    def expr(self, ty: str, depth: int, approx: bool = False) -> V:
        if ty in INTS:
            return self.int_expr(ty, depth)
        if ty == "b":
            return self.bool_expr(depth)
        return self.float_expr(ty, depth, approx)

    def int_expr(self, ty: str, depth: int, budget: tuple | None = None) -> V:
        """An expression of int type ``ty`` whose interval fits ``budget`` (default: the
        type's own range)."""
        lo, hi = budget or LIMITS[ty]
        for _ in range(6):
            v = self._int_try(ty, depth)
            if v is not None and v.fits(ty):
                return narrow(self.rng, v, lo, hi)
        return narrow(self.rng, self.leaf(ty, 0), lo, hi)

    def _int_try(self, ty: str, depth: int) -> V | None:
        if depth <= 0 or self.chance(0.2):
            return self.leaf(ty, depth)
        kind = self.pick(["bin", "bin", "bin", "un", "minmax", "cast", "cond", "fn", "vec",
                          "call"])
        if kind == "call":
            return self.call(ty, depth)
        if kind == "bin":
            op = self.pick(["+", "-", "*", "//", "%", "<<", ">>", "&", "|", "^", "**"])
            return self.int_bin(op, ty, depth)
        if kind == "un":
            a = self.int_expr(ty, depth - 1)
            op = self.pick(["-", "~", "abs"])
            lo, hi = int_unop(op, a)
            code = f"abs({a.code})" if op == "abs" else f"{op}{paren(a)}"
            return V(code, ty, lo, hi, a.weak, py=a.py)
        made = {"minmax": self.minmax, "cond": self.conditional, "cast": self.int_cast,
                "fn": self.int_fn}.get(kind)
        if made is not None:
            return made(ty, depth)
        return self.vec.lane_or_reduce(ty, depth) if self.vec else None

    def int_bin(self, op: str, ty: str, depth: int) -> V | None:
        a = self.int_expr(ty, depth - 1, (-2**20, 2**20))
        if op == "**":
            k = int(self.rng.integers(4))
            c = [a.lo**k, a.hi**k] + ([0] if a.lo < 0 < a.hi and k else [])
            return V(f"{paren(a)} ** {k}", ty, min(c), max(c), a.weak, py=a.py)
        if op in ("<<", ">>") and self.chance(0.7):
            k = int(self.rng.integers(0, 12))
            b = V(str(k), ty, k, k, weak=True)
        elif op in ("//", "%") and self.chance(0.5):
            k = int(self.pick([1, 2, 3, 7, -2, -5, 16]))
            b = V(str(k), ty, k, k, weak=True)
        else:
            b = self.int_expr(ty, depth - 1, (-2**20, 2**20))
        if op in ("//", "%") and b.lo <= 0 <= b.hi:
            b = V(f"({b.code}) % 13 + 1", b.ty, 1, 13, b.weak)
        if op in ("<<", ">>") and not b.weak:
            b = V(f"{paren(b)} & 15", b.ty, 0, 15, b.weak)
        if a.weak and b.weak:
            a = a.typed()
        iv = int_binop(op, a, b)
        if iv is None:
            return None
        py = (a.weak or a.py) and (b.weak or b.py)
        return V(f"{paren(a)} {op} {paren(b)}", join_ty(a, b), *iv, a.weak and b.weak,
                 py=py and not (a.weak and b.weak))

    def minmax(self, ty: str, depth: int) -> V:
        fn = self.pick(["min", "max"])
        args = [self.expr(ty, depth - 1) for _ in range(int(self.rng.integers(2, 4)))]
        if all(a.weak for a in args):
            args[0] = args[0].typed()
        code = f"{fn}({', '.join(a.code for a in args)})"
        if any(a.weak or a.py for a in args):  # Python's min may return a Python number
            code = f"{CAST[ty]}({code})"
        if ty in FLOATS:
            return V(code, ty)
        pickf = min if fn == "min" else max
        return V(code, ty, pickf(a.lo for a in args), pickf(a.hi for a in args))

    def int_cast(self, ty: str, depth: int) -> V:
        src = self.pick(["i32", "i64", "f32", "f64", "b"])
        if src in FLOATS:
            f = self.float_expr(src, depth - 1)
            if self.chance(0.5):
                f = V(f"kmath.{self.pick(['floor', 'ceil', 'trunc'])}({f.code})", src)
            return V(f"{CAST[ty]}({f.code})", ty, *LIMITS[ty])
        a = self.expr(src, depth - 1)
        if not a.fits(ty):
            a = narrow(self.rng, a, -2**20, 2**20)
        name = self.pick([CAST[ty], "int"]) if ty == "i64" and not a.weak else CAST[ty]
        return V(f"{name}({a.code})", ty, a.lo, a.hi, py=name == "int")

    def conditional(self, ty: str, depth: int) -> V:
        c = self.bool_expr(depth - 1)
        a, b = self.expr(ty, depth - 1), self.expr(ty, depth - 1)
        a, b = a.typed(), b.typed()
        form = self.pick(["{a} if {c} else {b}", "select({c}, {a}, {b})"])
        code = form.format(a=paren(a), b=paren(b), c=paren(c))
        return V(code, ty, min(a.lo, b.lo), max(a.hi, b.hi), exact=a.exact and b.exact)

    def int_fn(self, ty: str, depth: int) -> V:
        a = self.int_expr(ty, depth - 1).typed()
        bits = 32 if ty == "i32" else 64
        fn = self.pick(["ctz", "popcount"])
        if self.chance(0.3):
            b = self.pick([b for b in self.bufs if not b.approx and b.dtype[0] in "iu"] or [None])
            if b is not None and b.dtype not in ("u64",) and b.compute == ty:
                idx = ", ".join(self.index(e, n, 0) for e, n in zip(b.extents, b.shape))
                return V(f"{CAST[ty]}(kmath.{fn}({b.name}[{idx}]))", ty, 0, 64)
        return V(f"kmath.{fn}({CAST[ty]}({a.code}))", ty, 0, bits, py=True)  # a Python int

    def call(self, ty: str, depth: int) -> V | None:
        """A helper's single returned value (writing helpers only with ``effects_in_expr``)."""
        found = [h for h in self.helpers if h.ret is not None and len(h.ret) == 1
                 and h.ret[0].ty == ty and (not h.writes or self.flags.effects_in_expr)]
        if not found or depth <= 0:
            return None
        h = self.pick(found)
        r = h.ret[0]
        return V(f"{h.name}({self.helper_args(h, depth - 1)})", ty, r.lo, r.hi)

    # -- floats -------------------------------------------------------------------------
    def float_expr(self, ty: str, depth: int, approx: bool = False) -> V:
        if depth <= 0 or self.chance(0.2):
            return self.leaf(ty, depth)
        kind = self.pick(["bin", "bin", "bin", "un", "minmax", "cast", "cond", "fn", "vec",
                          "call", "len"])
        if kind == "call":
            return self.call(ty, depth) or self.leaf(ty, depth)
        if kind == "len" and ty == "f64":
            a = self.int_expr(self.pick(INTS), depth - 1, (-2**20, 2**20))
            b = self.int_expr(a.ty, depth - 1)
            py = (a.py or a.weak) and (b.py or b.weak)  # Python ints: a Python float
            return V(f"{paren(a)} / ({paren(b)} % 13 + 1)", ty, py=py)
        if kind == "bin":
            return self.float_bin(ty, depth)
        if kind == "un":
            a = self.float_expr(ty, depth - 1)
            return V(self.pick([f"-{paren(a)}", f"abs({a.code})"]), ty, weak=a.weak, py=a.py)
        made = {"minmax": self.minmax, "cond": self.conditional,
                "cast": self.float_cast}.get(kind)
        if made is not None:
            return made(ty, depth)
        if kind == "fn":
            a = self.float_expr(ty, depth - 1).typed()
            fn = self.pick(["sqrt", "floor", "ceil", "trunc"])
            return V(f"kmath.{fn}({a.code})", ty)
        v = self.vec.lane_or_reduce(ty, depth) if self.vec else None
        return v or self.leaf(ty, depth)

    def float_bin(self, ty: str, depth: int) -> V:
        op = self.pick(["+", "-", "*", "/", "//", "%"])
        a = self.float_expr(ty, depth - 1)
        if ty == "f64" and self.chance(0.25):
            b = self.int_expr(self.pick(INTS), depth - 1, (-2**40, 2**40)).typed()
        else:
            b = self.float_expr(ty, depth - 1)
        if (a.weak or a.py) and (b.weak or b.py):  # Python floats: / 0.0 would raise
            a = a.typed()
        if op in ("/", "//", "%") and b.weak and b.code in ("0.0", "0"):
            b = V("0.5", ty, weak=True)
        return V(f"{paren(a)} {op} {paren(b)}", ty)

    def float_cast(self, ty: str, depth: int) -> V:
        src = self.pick(["i32", "i64", "f32", "f64", "b"])
        a = self.expr(src, depth - 1)
        if src in INTS:
            a = narrow(self.rng, a, -F32_EXACT, F32_EXACT)
        name = self.pick([CAST[ty], "float"]) if ty == "f64" else CAST[ty]
        return V(f"{name}({a.code})", ty, py=name == "float")  # float(): a Python float

    def approx_expr(self, ty: str, depth: int) -> V:
        """An inexact math function of exact operands, optionally plus an exact term."""
        a = self.float_expr(ty, depth - 1).typed()
        clamp = f"min(max({a.code}, -20.0), 20.0)"
        fn = self.pick(["exp", "log", "sin", "cos", "sigmoid", "atan2", "fma", "pow", "libm"])
        b = self.float_expr(ty, depth - 1).typed()
        unit = f"min(max({a.code}, -1.0), 1.0)"
        if fn == "libm":  # the rest of kmath (issue 28): one picked, its domain respected
            fn = self.pick(["asin", "acos", "atan", "tan", "sinh", "cosh", "tanh", "kpow",
                            "round", "hypot", "expm1", "log1p", "erf"])
        code = {"exp": f"kmath.exp({clamp})", "log": f"kmath.log(abs({a.code}) + 1.0)",
                "sin": f"kmath.sin({clamp})", "cos": f"kmath.cos({clamp})",
                "sigmoid": f"kmath.sigmoid({clamp})", "atan2": f"kmath.atan2({a.code}, {b.code})",
                "fma": f"kmath.fma({clamp}, {ty}(0.5), {ty}(0.25))",
                "pow": f"abs({clamp}) ** 1.5", "asin": f"kmath.asin({unit})",
                "acos": f"kmath.acos({unit})", "atan": f"kmath.atan({a.code})",
                "tan": f"kmath.tan({clamp})", "sinh": f"kmath.sinh({clamp})",
                "cosh": f"kmath.cosh({clamp})", "tanh": f"kmath.tanh({a.code})",
                "kpow": f"kmath.pow(abs({clamp}), {ty}(0.75))", "round": f"kmath.round({clamp})",
                "hypot": f"kmath.hypot({clamp}, {b.code})", "expm1": f"kmath.expm1({clamp})",
                "log1p": f"kmath.log1p(abs({a.code}))", "erf": f"kmath.erf({a.code})"}[fn]
        if self.chance(0.4):
            code = f"{code} + {paren(self.float_expr(ty, 0).typed())}"
        return V(code, ty, exact=False)

    # -- booleans -----------------------------------------------------------------------
    def bool_expr(self, depth: int) -> V:
        if depth <= 0 or self.chance(0.15):
            return self.leaf("b", depth)
        kind = self.pick(["cmp", "cmp", "cmp", "logic", "not", "isnan", "cast", "vec"])
        if kind == "cmp":
            return self.compare(depth)
        if kind == "logic":
            a, b = self.bool_expr(depth - 1), self.bool_expr(depth - 1)
            return V(f"{paren(a)} {self.pick(['and', 'or'])} {paren(b)}", "b", 0, 1)
        if kind == "not":
            return V(f"not {paren(self.bool_expr(depth - 1))}", "b", 0, 1)
        if kind == "isnan":
            return V(f"kmath.isnan({self.float_expr(self.pick(FLOATS), depth - 1).typed().code})",
                     "b", 0, 1)
        if kind == "cast":
            a = self.expr(self.pick(["i32", "i64", "f32", "f64"]), depth - 1).typed()
            return V(f"{self.pick(['boolean', 'bool'])}({a.code})", "b", 0, 1)
        v = self.vec.any_all(depth) if self.vec else None
        return v or self.compare(depth)

    def compare(self, depth: int) -> V:
        ty = self.pick(["i32", "i64", "f32", "f64"])
        a, b = self.expr(ty, depth - 1), self.expr(ty, depth - 1)
        if ty in INTS and self.chance(0.2):
            other = self.pick(FLOATS)
            b = self.expr(other, depth - 1)
            a = narrow(self.rng, a, -F32_EXACT, F32_EXACT)
        ops = ["<", "<=", ">", ">=", "==", "!="]
        if ty == "i32" and self.flags.wide_constants and "c_0" in self.scope.vars \
                and self.chance(0.3):
            b = V("c_big", "i64", weak=True)  # beyond i32: refused (test_lang_fuzz_findings)
        code = f"{paren(a)} {self.pick(ops)} {paren(b)}"
        if self.chance(0.2):
            c = self.expr(b.ty, depth - 1)
            code += f" {self.pick(ops)} {paren(c)}"
        return V(code, "b", 0, 1)
