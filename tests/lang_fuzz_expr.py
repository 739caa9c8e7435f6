"""Random well-typed scalar expressions of the kernel language, for the differential fuzzer
(`lang_fuzz_prog` builds programs from them, `lang_fuzz_check` runs them).

Every int expression carries an interval [lo, hi] of the values it can take, so the generator
never writes an integer overflow (the kernel wraps, Python does not: documented), a zero
divisor, an out-of-range index or shift; an expression whose interval would leave its type is
narrowed (`% m`, `& mask`, a clamp) instead. Floats carry no interval (they may be inf or NaN:
both modes round alike); a float that went through an inexact math function (`exp`, `sin`,
...) is marked ``exact=False`` and only ever stored to a tolerance-compared output.
Literals are *weak* (``weak=True``): they take the other operand's type, as in the kernel and
under numpy's NEP 50 rules in ``py_func``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

INF = float("inf")
LIMITS = {"b": (0, 1), "i32": (-2**31, 2**31 - 1), "i64": (-2**63, 2**63 - 1),
          "f32": (-INF, INF), "f64": (-INF, INF)}
INTS, FLOATS = ("i32", "i64"), ("f32", "f64")
CAST = {"b": "boolean", "i32": "i32", "i64": "i64", "f32": "f32", "f64": "f64"}
#: ints inside this magnitude convert to f32 exactly (mixed int/float compares and casts)
F32_EXACT = 2**24


@dataclass(frozen=True)
class V:
    """A generated scalar expression: source text, type, value interval (ints), flags."""

    code: str
    ty: str
    lo: float = -INF
    hi: float = INF
    weak: bool = False   # a literal or static value: adapts to the other operand's type
    exact: bool = True   # False: went through an inexact math function
    py: bool = False     # a Python int in ``py_func`` (a loop index), the kernel's i64

    def fits(self, ty: str | None = None) -> bool:
        lo, hi = LIMITS[ty or self.ty]
        return lo <= self.lo and self.hi <= hi

    def typed(self) -> "V":
        """This expression with its own type in both modes (a weak one cast explicitly)."""
        if not (self.weak or self.py):
            return self
        return replace(self, code=f"{CAST[self.ty]}({self.code})", weak=False, py=False)


def paren(v: V) -> str:
    return v.code if v.code.isidentifier() or v.code.isdigit() else f"({v.code})"


def join_ty(a: V, b: V) -> str:
    """The type of ``a op b`` (same-type operands or a weak literal)."""
    if a.weak and not b.weak:
        return b.ty
    if b.weak and not a.weak:
        return a.ty
    if a.ty == b.ty:
        return a.ty
    order = ("b", "i32", "i64", "f32", "f64")
    return max(a.ty, b.ty, key=order.index)


def int_binop(op: str, a: V, b: V) -> tuple[float, float] | None:
    """The interval of ``a op b`` for ints, or None when it may trap or is ill-defined."""
    corners = lambda f: [f(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]  # noqa: E731
    if op in "+-*":
        fn = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}[op]
        c = corners(fn)
        return min(c), max(c)
    if op in ("//", "%"):
        if b.lo <= 0 <= b.hi:
            return None
        if op == "//":
            c = corners(lambda x, y: x // y)
            return min(c), max(c)
        return (0, b.hi - 1) if b.lo > 0 else (b.lo + 1, 0)
    if op in ("<<", ">>"):
        if not (b.weak and b.lo == b.hi and 0 <= b.lo < 31):
            return None if op == "<<" or b.lo < 0 or b.hi > 31 else (min(a.lo, 0), max(a.hi, 0))
        k = int(b.lo)
        return (a.lo * 2**k, a.hi * 2**k) if op == "<<" else (a.lo // 2**k, a.hi // 2**k)
    if op in "&|^":
        if op == "&" and (a.lo >= 0 or b.lo >= 0):
            return 0, min(x.hi for x in (a, b) if x.lo >= 0)
        width = max(abs(a.lo), abs(a.hi) + 1, abs(b.lo), abs(b.hi) + 1)
        k = max(1, int(width - 1).bit_length())
        return (0, 2**k - 1) if a.lo >= 0 and b.lo >= 0 else (-2**k, 2**k - 1)
    raise ValueError(op)


def int_unop(op: str, a: V) -> tuple[float, float]:
    if op == "-":
        return -a.hi, -a.lo
    if op == "~":
        return -a.hi - 1, -a.lo - 1
    if op == "abs":
        return (0 if a.lo <= 0 <= a.hi else min(abs(a.lo), abs(a.hi)), max(abs(a.lo), abs(a.hi)))
    raise ValueError(op)


def narrow(rng, v: V, lo: float, hi: float) -> V:
    """``v`` brought inside [lo, hi] (lo <= 0 < hi) by a Python-semantics `%`, a mask, a shift
    or a clamp; ``v`` itself when it already fits."""
    if lo <= v.lo and v.hi <= hi:
        return v
    ty = v.ty
    m = int(min(hi + 1, 2 ** rng.integers(1, 20)))
    pick = rng.integers(4)
    if pick == 0 and m > 1:
        return V(f"{paren(v)} % {m}", ty, 0, m - 1, v.weak, py=v.py)
    if pick == 1 and m > 1:
        return V(f"{paren(v)} & {m - 1}", ty, 0, m - 1, v.weak, py=v.py)
    c = int(min(-lo, hi, 2**20))
    if pick == 2 and c >= 1 and (v.lo >= -2**62 and v.hi < 2**62):
        k = max(0, int(max(abs(v.lo), abs(v.hi))).bit_length() - c.bit_length() + 1)
        if k < 31:
            return V(f"{paren(v)} >> {k}", ty, v.lo // 2**k, v.hi // 2**k, v.weak, py=v.py)
    c = int(min(-lo, hi, 2**20))
    lit = c if ty == "i64" or v.weak else f"{CAST[ty]}({c})"
    neg = -c if ty == "i64" or v.weak else f"{CAST[ty]}({-c})"
    return V(f"min(max({v.code}, {neg}), {lit})", ty, max(v.lo, -c), min(v.hi, c), v.weak,
             py=v.py or ty == "i64")
