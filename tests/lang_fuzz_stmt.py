"""Statements of the kernel-language fuzzer: declarations, assignments, buffer and slice stores,
if / for / while / bits loops, break / continue / return, helper calls. Each method appends
source lines at ``indent`` and keeps ``self.scope`` (see `lang_fuzz_gen.Scope`) truthful:
a name declared in a block is visible in that block only."""

from __future__ import annotations

import re

from lang_fuzz_expr import CAST, FLOATS, INTS, V, int_binop, narrow, paren
from lang_fuzz_gen import STORAGE, WRAPS, ExprGen

#: names whose value is known when the kernel is compiled (statics, unrolled loop indices)
RUNTIME_NAME = re.compile(r"\b(?:v|i|w|q|b|s|m|t|h|r|a)_\d+\b")
BUDGET = {"i32": (-2**20, 2**20), "i64": (-2**40, 2**40)}


def is_const(code: str) -> bool:
    return RUNTIME_NAME.search(code) is None


class StmtGen(ExprGen):
    def __init__(self, rng, flags, bufs, helpers, ret: str | None):
        super().__init__(rng, flags, bufs, helpers)
        self.lines: list[str] = []
        self.ret = ret
        self.counter = 0
        self.in_helper = False
        self.pure = False         # a helper that writes nothing
        self.helper_ret = None    # a helper's returned types

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def block(self, indent: int, n: int, depth: int) -> None:
        """``n`` random statements in a child scope (at least one line)."""
        outer = self.scope
        self.scope = outer.child()
        start = len(self.lines)
        for _ in range(n):
            self.statement(indent, depth)
        if len(self.lines) == start:
            self.emit(indent, "pass")
        self.scope = outer

    def statement(self, indent: int, depth: int) -> None:
        kinds = ["decl", "decl", "assign", "assign", "store", "store", "approx", "swap", "chain",
                 "region"]
        if depth > 0:
            kinds += ["if", "for", "for", "static_for", "while", "bits", "ifassign"]
        if self.scope.loops and depth >= 0:
            kinds += ["jump"]
        if self.ret or self.helper_ret:
            kinds += ["ret"]
        if self.helpers:
            kinds += ["call", "call"]
        if self.flags.simd:
            kinds += ["vdecl", "vstore", "vstore", "unpack", "fill"]
        if self.pure:
            kinds = [k for k in kinds if k not in ("store", "approx", "vstore", "call", "fill",
                                                   "chain", "region")]
        getattr(self, "s_" + self.pick(kinds))(indent, depth)

    # -- scalars ------------------------------------------------------------------------
    def s_decl(self, indent, depth):
        ty = self.pick(["i32", "i64", "f32", "f64", "b"])
        name = self.fresh("v")
        if ty in INTS:
            e = self.int_expr(ty, depth + 1, BUDGET[ty]).typed()
            lo, hi = BUDGET[ty]
        else:
            e, (lo, hi) = self.expr(ty, depth + 1).typed(), (0, 1)
        form = self.pick(["{n} = {e}", "{n}: {t} = {e}", "{n} = {m} = {e}", "{n}, {m} = {e}, {e}"])
        other = self.fresh("v")
        t = {"b": "boolean"}.get(ty, ty)
        self.emit(indent, form.format(n=name, m=other, e=e.code, t=t))
        self.scope.vars[name] = V(name, ty, lo, hi) if ty in INTS else V(name, ty)
        self.scope.mutable.add(name)
        if "{m}" in form:
            self.scope.vars[other] = self.scope.vars[name]
            self.scope.mutable.add(other)

    def s_assign(self, indent, depth):
        names = [n for n in self.scope.mutable if n in self.scope.vars]
        if not names:
            return self.s_decl(indent, depth)
        name = self.pick(sorted(names))
        var = self.scope.vars[name]
        if var.ty == "b":
            return self.emit(indent, f"{name} = {self.bool_expr(depth + 1).code}")
        if var.ty in FLOATS:
            op = self.pick(["", "+", "-", "*", "/"])
            rhs = self.float_expr(var.ty, depth + 1)
            if op == "/" and rhs.weak and rhs.code in ("0.0", "0"):
                rhs = V("2.0", var.ty, weak=True)
            return self.emit(indent, f"{name} {op}= {rhs.code}")
        op = self.pick(["", "+", "-", "*", "//", "%", ">>", "&", "|", "^"])
        rhs = self.int_expr(var.ty, depth, (-2**10, 2**10)) if op else \
            self.int_expr(var.ty, depth + 1, (var.lo, var.hi))
        if not op:
            return self.emit(indent, f"{name} = {rhs.typed().code}")
        if op in ("//", "%") and rhs.lo <= 0 <= rhs.hi:
            rhs = V(str(int(self.pick([2, 3, -4, 7]))), var.ty, weak=True)
            rhs = V(rhs.code, var.ty, int(rhs.code), int(rhs.code), weak=True)
        if op == ">>":
            rhs = V(str(int(self.rng.integers(0, 8))), var.ty, weak=True)
            rhs = V(rhs.code, var.ty, int(rhs.code), int(rhs.code), weak=True)
        iv = int_binop(op, var, rhs)
        if iv is not None and var.lo <= iv[0] and iv[1] <= var.hi:
            return self.emit(indent, f"{name} {op}= {rhs.code}")
        if iv is None:
            return None
        whole = narrow(self.rng, V(f"{name} {op} {paren(rhs)}", var.ty, *iv), var.lo, var.hi)
        self.emit(indent, f"{name} = {whole.code}")

    def store_value(self, b, depth, same_type: bool = False) -> str:
        """A value for an element of ``b`` (its kept interval; wrapping dtypes any int);
        ``same_type``: of the element type (a slice store's broadcast or lane)."""
        comp, lo, hi, _ = STORAGE[b.dtype]
        if comp in FLOATS:
            if self.chance(0.15) and not same_type:
                return narrow(self.rng, self.int_expr(self.pick(INTS), depth), -2**20, 2**20).code
            return self.float_expr(comp, depth + 1).code
        v = self.int_expr(comp, depth + 1)
        if b.dtype in WRAPS and not is_const(v.code):
            return v.typed().code
        return narrow(self.rng, v, lo, hi).code

    def target(self, b, depth) -> str:
        idx = ", ".join(self.index(e, n, depth) for e, n in zip(b.extents, b.shape))
        return f"{b.name}[{idx}]"

    def s_store(self, indent, depth):
        bufs = [b for b in self.bufs if not b.approx]
        if not bufs:
            return None
        b = self.pick(bufs)
        comp = STORAGE[b.dtype][0]
        tgt = self.target(b, depth)
        r = self.rng.random()
        if comp in FLOATS and r < 0.3:
            op = self.pick(["+", "-", "*", "/", "//", "%"])
            rhs = self.float_expr(comp, depth)
            if op in ("/", "//", "%"):
                rhs = V(self.pick(["2.0", "0.25", "-3.0"]), comp, weak=True)
            return self.emit(indent, f"{tgt} {op}= {rhs.code}")
        if comp in INTS and r < 0.3:
            if b.dtype in WRAPS:
                op = self.pick(["+", "-", "*", "^", "|"])
                rhs = self.int_expr(comp, depth, (-2**10, 2**10)).typed()
            else:
                op = self.pick(["//", "%", ">>", "&"])
                k = int(self.pick([1, 2, 3, 5, 8]))
                rhs = V(str(k - 1 if op == "&" else k), comp, weak=True)
            return self.emit(indent, f"{tgt} {op}= {rhs.code}")
        self.emit(indent, f"{tgt} = {self.store_value(b, depth)}")

    def s_region(self, indent, depth):
        """A region store (issue 28): ``b[:, 1:3] = v``, ``b[2] = v`` of a 2-d ``b``, constant
        bounds inside the shape, a number of the element's type broadcast (an op= at times)."""
        bufs = [b for b in self.bufs if not b.approx and not b.unknown]
        if not bufs:
            return self.s_store(indent, depth)
        b = self.pick(bufs)
        items = []
        for axis, n in enumerate(b.shape):
            r = self.rng.random()
            if r < 0.4 and axis not in b.dyn:  # (a helper's view may not know the extent)
                items.append(":")
            elif r < 0.7:
                a = int(self.rng.integers(0, n))
                items.append(f"{a}:{int(self.rng.integers(a + 1, n + 1))}")
            else:
                items.append(str(int(self.rng.integers(0, n))))
        if len(items) > 1 and len(b.shape) - 1 not in b.dyn and self.chance(0.3):
            items.pop()  # (the axes not indexed are `:`)
        elif ":" not in "".join(items):
            items[0] = f"0:{b.shape[0]}"
        comp = STORAGE[b.dtype][0]
        op = "+" if comp in FLOATS and self.chance(0.3) else ""
        value = self.store_value(b, depth, same_type=True)
        self.emit(indent, f"{b.name}[{', '.join(items)}] {op}= {value}")

    def s_approx(self, indent, depth):
        outs = [b for b in self.bufs if b.approx]
        if not outs:
            return None
        b = self.pick(outs)
        k = int(self.rng.integers(b.shape[0]))
        self.emit(indent, f"{b.name}[{k}] = {self.approx_expr(b.dtype, depth + 1).code}")

    # -- control flow -------------------------------------------------------------------
    def s_if(self, indent, depth):
        self.emit(indent, f"if {self.bool_expr(depth + 1).code}:")
        self.block(indent + 1, int(self.rng.integers(1, 4)), depth - 1)
        for _ in range(int(self.rng.integers(0, 3))):
            self.emit(indent, f"elif {self.bool_expr(depth).code}:")
            self.block(indent + 1, int(self.rng.integers(1, 3)), depth - 1)
        if self.chance(0.5):
            self.emit(indent, "else:")
            self.block(indent + 1, int(self.rng.integers(1, 3)), depth - 1)

    def range_header(self) -> tuple[str, int, int, bool]:
        """(the ``range(...)`` text, lowest index, highest index, sure to run at least once)."""
        g = self.rng
        long_ok = self.scope.loops == 0 and not self.in_helper  # keep py_func's trips bounded
        runtime = [v for v in self.scope.vars.values() if v.code.startswith("m_")
                   and (v.hi <= 16 or long_ok)]
        statics = [v for v in self.scope.vars.values() if v.code.startswith("n_")
                   and (v.hi <= 16 or long_ok)]
        r = g.random()
        step = int(self.pick([1, 1, 2, 3, -1, -2, -3]))
        if r < 0.2 and runtime + statics:
            v = self.pick(runtime + statics)
            return f"range({v.code})", 0, int(v.hi) - 1, True
        if r < 0.4:  # run-time bounds, evaluated once
            a, b = (narrow(self.rng, self.int_expr(self.pick(INTS), 1), -8, 8) for _ in "ab")
            text = f"range({a.code}, {b.code}, {step})" if step != 1 else \
                f"range({a.code}, {b.code})"
            return text, min(a.lo, b.lo), max(a.hi, b.hi), False
        a = int(g.integers(-6, 6))
        n = int(g.integers(1, 9))
        if r < 0.5:
            return f"range({n})", 0, n - 1, True
        b = a + step * n
        last = a + step * (n - 1)
        text = f"range({a}, {b})" if step == 1 and self.chance(0.5) else f"range({a}, {b}, {step})"
        return text, min(a, last), max(a, last), True

    def s_for(self, indent, depth):
        text, lo, hi, sure = self.range_header()
        name = self.fresh("i")
        self.emit(indent, f"for {name} in {text}:")
        index = V(name, "i64", lo, hi, py=True)
        self.loop_body(indent, depth, {name: index})
        if sure and self.chance(0.3):  # Python keeps the last index after the loop
            self.scope.vars[name] = index

    def s_swap(self, indent, depth):
        names = sorted(n for n in self.scope.mutable if n in self.scope.vars)
        if len(names) < 2:
            return self.s_decl(indent, depth)
        x = self.scope.vars[self.pick(names)]
        same = [n for n in names if self.scope.vars[n].ty == x.ty and n != x.code]
        if not same:
            return self.s_decl(indent, depth)
        y = self.scope.vars[self.pick(same)]
        if x.ty in INTS and self.chance(0.5):
            both = V(f"{x.code} + {y.code}", x.ty, x.lo + y.lo, x.hi + y.hi)
            rhs = narrow(self.rng, both, max(x.lo, y.lo), min(x.hi, y.hi)).code
            return self.emit(indent, f"{x.code}, {y.code} = {y.code}, {rhs}")
        self.emit(indent, f"{x.code}, {y.code} = {y.code}, {x.code}")

    def s_chain(self, indent, depth):
        """``v = buf[v % n] = e``: Python binds ``v`` first, then indexes with its new value."""
        names = sorted(n for n in self.scope.mutable if n in self.scope.vars
                       and self.scope.vars[n].ty in INTS)
        bufs = [b for b in self.bufs if not b.approx and b.dtype != "u64"]
        if not names or not bufs:
            return self.s_decl(indent, depth)
        v = self.scope.vars[self.pick(names)]
        b = self.pick(bufs)
        e = narrow(self.rng, self.int_expr(v.ty, depth + 1), 0, 100).typed()
        idx = [self.index(x, n, 0) for x, n in zip(b.extents, b.shape)]
        axis = int(self.rng.integers(len(idx)))
        idx[axis] = f"{v.code} % {b.extents[axis]}"
        self.emit(indent, f"{v.code} = {b.name}[{', '.join(idx)}] = {e.code}")

    def s_ifassign(self, indent, depth):
        """A new name assigned on every path of an if/elif/else, read after it."""
        ty = self.pick(["i32", "i64", "f32", "f64", "b"])
        name = self.fresh("v")
        arms = ["if"] + ["elif"] * int(self.rng.integers(0, 2)) + ["else"]
        for arm in arms:
            head = "else:" if arm == "else" else f"{arm} {self.bool_expr(depth + 1).code}:"
            self.emit(indent, head)
            self.block(indent + 1, int(self.rng.integers(0, 2)), depth - 1)
            value = self.int_expr(ty, depth, BUDGET[ty]) if ty in INTS else self.expr(ty, depth)
            self.emit(indent + 1, f"{name} = {value.typed().code}")
        self.scope.vars[name] = V(name, ty, *BUDGET[ty]) if ty in INTS else V(name, ty)

    def loop_body(self, indent, depth, names: dict, runtime: bool = True) -> None:
        outer = self.scope
        self.scope = outer.child()
        self.scope.vars.update(names)
        self.scope.loops = self.scope.loops + 1 if runtime else 0  # no break out of unroll
        self.block(indent + 1, int(self.rng.integers(1, 5)), depth - 1)
        self.scope = outer

    def s_static_for(self, indent, depth):
        r = self.rng.random()
        u = self.fresh("u")
        if r < 0.4:
            n = int(self.rng.integers(1, 4))
            self.emit(indent, f"for {u} in unroll({n}):")
            return self.loop_body(indent, depth, {u: V(u, "i64", 0, n - 1, weak=True)}, False)
        tab = "TAB" if r < 0.7 or self.in_helper else "c_tup"
        if self.chance(0.5):
            e = self.fresh("u")
            self.emit(indent, f"for {e}, {u} in enumerate({tab}):")
            names = {u: V(u, "i64", -9, 9, weak=True), e: V(e, "i64", 0, 3, weak=True)}
            return self.loop_body(indent, depth, names, False)
        self.emit(indent, f"for {u} in {tab}:")
        self.loop_body(indent, depth, {u: V(u, "i64", -9, 9, weak=True)}, False)

    def s_while(self, indent, depth):
        w = self.fresh("w")
        n = int(self.rng.integers(1, 7))
        self.emit(indent, f"{w} = 0")
        cond = f"{w} < {n}"
        if self.chance(0.4):
            cond += f" and {paren(self.bool_expr(depth))}"
        self.emit(indent, f"while {cond}:")
        self.emit(indent + 1, f"{w} += 1")
        self.loop_body(indent, depth, {w: V(w, "i64", 1, n, py=True)})

    def s_bits(self, indent, depth):
        q = self.fresh("q")
        wrap = self.pick(["i32", "i64", "buf"])
        word = None
        if wrap == "buf":
            ints = [b for b in self.bufs if b.dtype[0] in "iu" and not b.approx]
            if ints:
                word = self.target(self.pick(ints), 0)
        if word is None:
            ty = "i32" if wrap == "i32" else "i64"
            word = f"{ty}({self.int_expr(ty, depth).code})"
        self.emit(indent, f"for {q} in bits({word}):")
        self.loop_body(indent, depth, {q: V(q, "i64", 0, 63, py=True)})

    def s_jump(self, indent, depth):
        self.emit(indent, f"if {self.bool_expr(1).code}:")
        self.emit(indent + 1, self.pick(["break", "continue"]))

    def s_ret(self, indent, depth):
        if self.helper_ret:
            from lang_fuzz_helpers import returned
            self.emit(indent, f"if {self.bool_expr(1).code}:")
            return self.emit(indent + 1, returned(self, self.helper_ret))
        value = self.expr(self.ret, depth + 1)
        code = f"{CAST[self.ret]}({value.code})"
        if depth > 0 or self.chance(0.3):
            self.emit(indent, f"if {self.bool_expr(1).code}:")
            self.emit(indent + 1, f"return {code}")

    def s_call(self, indent, depth):
        h = self.pick(self.helpers)
        args = self.helper_args(h, depth)
        if h.ret is None or self.chance(0.3):
            return self.emit(indent, f"{h.name}({args})")
        names = [self.fresh("v") for _ in h.ret]
        self.emit(indent, f"{', '.join(names)} = {h.name}({args})")
        for n, v in zip(names, h.ret):
            self.scope.vars[n] = V(n, v.ty, v.lo, v.hi)

    def helper_args(self, h, depth) -> str:
        out = []
        for kind in h.params:
            if isinstance(kind, str):     # a buffer of this dtype and shape
                out.append(self.pick([b.name for b in self.bufs if b.key() == kind]))
            elif kind.ty == "i64" and self.chance(0.3):  # a constant or Python int argument
                out.append(self.int_expr(kind.ty, depth, (kind.lo, kind.hi)).code)
            else:
                out.append(self.int_expr(kind.ty, depth, (kind.lo, kind.hi)).typed().code
                           if kind.ty in INTS else self.expr(kind.ty, depth).typed().code)
        return ", ".join(out)

    def s_vdecl(self, indent, depth):
        self.vec.s_vdecl(indent, depth)

    def s_fill(self, indent, depth):
        self.vec.s_fill(indent, depth)

    def s_vstore(self, indent, depth):
        self.vec.s_vstore(indent, depth)

    def s_unpack(self, indent, depth):
        self.vec.s_unpack(indent, depth)
