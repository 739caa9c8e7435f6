"""``@inline`` helpers for the kernel-language fuzzer: a buffer parameter and scalars, a few
statements, early ``return``s inside branches and loops, one or two returned values. A *pure*
helper writes nothing and may be called inside any expression; one that writes its buffer is
called as a statement, or also inside expressions with the ``effects_in_expr`` flag (on by
default: subscript indices and slice ``op=`` around such a call are evaluated in Python's
order)."""

from __future__ import annotations

from dataclasses import dataclass

from lang_fuzz_expr import INTS, V, narrow
from lang_fuzz_gen import Buffer

SCALARS = ("i32", "i64", "f32", "f64")
RET_BUDGET = (-2**20, 2**20)


@dataclass
class Helper:
    name: str
    params: list          # buffer key (str) or a scalar budget (V)
    ret: list | None      # the returned values' types and intervals, or None
    writes: bool = False


def returned(sub, types: list) -> str:
    """``return`` of fresh expressions of ``types`` (ints inside `RET_BUDGET`)."""
    items = [narrow(sub.rng, sub.int_expr(t, 2), *RET_BUDGET).typed() if t in INTS
             else sub.expr(t, 2).typed() for t in types]
    return f"return {', '.join(v.code for v in items)}"


def make_helpers(rng, flags, bufs, g) -> str:
    """Zero to three helpers over the kernel's buffers (appended to ``g.helpers``)."""
    from lang_fuzz_stmt import StmtGen
    from lang_fuzz_vec import VecGen
    text = []
    for k in range(int(rng.integers(0, 4))):
        b = bufs[int(rng.integers(len(bufs)))]
        if b.approx:
            continue
        fixed = tuple(map(str, b.shape))  # the kernel's extent names are not the helper's
        dyn = tuple(k for k, e in enumerate(b.extents) if e.startswith("m_") or k in b.dyn)
        sub = StmtGen(rng, flags, [Buffer("p_buf", b.dtype, b.shape, fixed, dyn=dyn)], [], None)
        sub.vec, sub.in_helper = VecGen(sub), True
        sub.pure = rng.random() < 0.5
        sub.counter = 1000 * (k + 1)
        scal = [V(f"a_{j}", str(rng.choice(SCALARS))) for j in range(int(rng.integers(1, 3)))]
        scal = [V(v.code, v.ty, -1000, 1000) if v.ty[0] == "i" else v for v in scal]
        for v in scal:
            sub.scope.vars[v.code] = v
            sub.scope.mutable.add(v.code)  # rebinding a parameter leaves the caller's name
        types = [str(rng.choice(SCALARS)) for _ in range(int(rng.integers(0 if not sub.pure
                                                                         else 1, 3)))]
        sub.helper_ret = types or None
        sub.lines = []
        for _ in range(int(rng.integers(1, 4))):
            sub.statement(1, 1)
        if not sub.lines:
            sub.emit(1, "pass")
        if types:
            sub.emit(1, returned(sub, types))
        name = f"h_{k}"
        args = ", ".join(["p_buf"] + [v.code for v in scal])
        text.append(f"\n\n@inline\ndef {name}({args}):\n" + "\n".join(sub.lines) + "\n")
        rets = [V("", t, *RET_BUDGET) if t in INTS else V("", t) for t in types] or None
        g.helpers.append(Helper(name, [b.key()] + scal, rets, writes=not sub.pure))
    return "".join(text)
