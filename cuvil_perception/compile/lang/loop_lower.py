"""Lowering a kernel's loops to LLVM IR: ``while``, counted ``for i in range(a, b, step)``,
set-bit ``for bit in bits(word)``, parallel ``for i in prange(n)`` (in `prange_lower`),
unrolled ``for`` (over a static tuple, ``enumerate`` of one, or ``unroll(n)``), ``break`` and
``continue``.

A range loop is emitted in the canonical form LLVM's loop vectoriser recognises (a header phi
counting in i64 by a constant step, ``nsw`` increment, one latch). A bits loop's header phi
carries the bits not yet visited (the word, evaluated once before the loop): it runs while they
are not zero, binds ``bit = cttz(rest)`` and clears the lowest one (``rest & (rest - 1)``) in
its latch. An unrolled loop is one copy of the body per item with the loop target bound to the
item as a compile-time constant, so ``break``/``continue`` have nowhere to jump in it and are
refused. ``lower_while``, ``lower_for``, ``lower_break`` and ``lower_continue`` are
`lower.STATEMENTS`' entries; the loop helpers are a mixin of `lower.Lowerer` (which provides
``b``, ``fn``, ``frame``, ``dead``, ``body``, ``expr`` and the rest).
"""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import irutil as u
from . import kmath
from .arith import truth
from .scope import Var
from .statements import unpack
from .types import I64
from .values import Const

MAX_UNROLL = 4096  # copies of an unrolled loop's body, like the elements of a `local` array


class LoopMixin:
    """Loop statements of `lower.Lowerer`."""

    def loop_body(self, block, stmts, cont, brk, enter=None) -> None:
        self.b.position_at_end(block)
        self.dead = False
        if enter is not None:
            enter()
        self.frame.loops.append((cont, brk))
        self.body(stmts)
        self.frame.loops.pop()
        if not self.dead:
            self.b.branch(cont)

    def jump_out(self, node, which: int) -> None:
        if not self.frame.loops:
            self.fail(node, "`break`/`continue` outside a loop")
        target = self.frame.loops[-1][which]
        if target is None:
            self.fail(node, "`break`/`continue` inside an unrolled loop",
                      "a `for i in range(...)` loop")
        self.b.branch(target)
        self.dead = True

    def unrolled(self, node: ast.For, items: list) -> None:
        """One copy of the body per item, the target bound to the item as a constant."""
        if len(items) > MAX_UNROLL:  # 100 000 copies took 12 s to compile, 1 M ~ a hang
            self.fail(node, f"an unrolled loop of {len(items)} copies (at most {MAX_UNROLL})",
                      "`for i in range(n)`: a loop (LLVM unrolls and vectorises it itself)")
        for item in items:
            if self.dead:
                return
            self.bind_static(node.target, item, node)
            self.frame.loops.append((None, None))
            self.body(node.body)
            self.frame.loops.pop()

    def bind_static(self, target, item: Const, node) -> None:
        if isinstance(target, ast.Name):
            self.frame.env[target.id] = item
            return
        if isinstance(target, ast.Tuple):
            for t, v in zip(target.elts, unpack(self, item, len(target.elts), node)):
                self.bind_static(t, v, node)
            return
        self.fail(node, "loop target must be a name or a tuple of names")

    def for_range(self, node: ast.For) -> None:
        args = node.iter.args
        if not 1 <= len(args) <= 3 or node.iter.keywords:
            self.fail(node.iter, "range() takes 1 to 3 positional arguments")
        step = self.const_int(args[2], "a constant range step") if len(args) == 3 else 1
        if step == 0:
            self.fail(args[2], "range() step must not be zero")
        start = self.index_value(args[0], node) if len(args) > 1 else u.const_i64(0)
        stop = self.index_value(args[1] if len(args) > 1 else args[0], node)
        if not isinstance(node.target, ast.Name):
            self.fail(node.target, "a range loop needs one loop variable")
        var = self.loop_var(node.target.id, node)
        self.phi_loop(node, "for", start, node.target.id,
                      lambda idx: self.b.icmp_signed("<" if step > 0 else ">", idx, stop),
                      lambda idx: self.b.store(idx, var.slot),
                      lambda idx: self.b.add(idx, u.const_i64(step),
                                             name=f"{node.target.id}.next", flags=("nsw",)))

    def phi_loop(self, node: ast.For, kind: str, init: ir.Value, name: str, test, enter,
                 advance) -> None:
        """The loop shape range and bits loops share (the canonical form LLVM's vectoriser
        recognises): a header phi from ``init`` tested by ``test(phi)``, ``enter(phi)`` where
        the body starts, ``advance(phi)`` in the one latch."""
        pre = self.b.block
        head = self.fn.append_basic_block(f"{kind}.head")
        body = self.fn.append_basic_block(f"{kind}.body")
        latch = self.fn.append_basic_block(f"{kind}.latch")
        done = self.fn.append_basic_block(f"{kind}.end")
        self.b.branch(head)
        self.b.position_at_end(head)
        phi = self.b.phi(init.type, name=name)
        phi.add_incoming(init, pre)
        self.b.cbranch(test(phi), body, done)
        self.loop_body(body, node.body, latch, done, enter=lambda: enter(phi))
        self.b.position_at_end(latch)
        phi.add_incoming(advance(phi), latch)
        self.b.branch(head)
        self.b.position_at_end(done)
        self.dead = False

    def for_bits(self, node: ast.For) -> None:
        """``for bit in bits(word)``: the set bits of ``word``, lowest first (``bit`` an i64)."""
        it = node.iter
        if len(it.args) != 1 or it.keywords:
            self.fail(it, "bits() takes one positional argument, the integer word",
                      "`for bit in bits(word)`")
        word = self.int_word(it.args[0], "bits()", "an integer word (i8 to i64, u8 to u64), "
                             "e.g. `bits(i64(x))`")
        if isinstance(word, Const):
            word = self.value(word, it.args[0]).ir
        if not isinstance(node.target, ast.Name):
            self.fail(node.target, "a bits loop needs one loop variable", "`for bit in bits(word)`")
        var = self.loop_var(node.target.id, node)
        zero, one = ir.Constant(word.type, 0), ir.Constant(word.type, 1)

        def bind_bit(rest):  # rest != 0 here, so cttz may treat 0 as poison (a bare tzcnt/bsf)
            low = u.intrinsic(self.b, kmath.INT_FUNCTIONS[kmath.ctz], rest, ir.Constant(u.I1, 1))
            self.b.store(low if word.type.width == 64 else self.b.zext(low, u.I64), var.slot)

        self.phi_loop(node, "bits", word, f"{node.target.id}.rest",
                      lambda rest: self.b.icmp_unsigned("!=", rest, zero), bind_bit,
                      lambda rest: self.b.and_(rest, self.b.sub(rest, one),
                                               name=f"{node.target.id}.next"))

    def loop_var(self, name: str, node):
        """The i64 local a range or bits loop counts in (created, or reused if ``name`` is
        one)."""
        var = self.frame.env.get(name)
        if isinstance(var, Var):
            if var.ty != I64:
                self.fail(node, f"loop variable '{name}' is {var.ty} elsewhere; range and "
                          f"bits loops count in i64", "another name for the loop variable")
            return var
        var = Var(self.slot(u.I64, name), I64, node.lineno)
        self.frame.env[name] = var
        return var


def lower_while(lw, node: ast.While) -> None:
    if node.orelse:
        lw.fail(node, "`while ... else`", "a flag variable")
    head = lw.fn.append_basic_block("while.head")
    body = lw.fn.append_basic_block("while.body")
    done = lw.fn.append_basic_block("while.end")
    lw.b.branch(head)
    lw.b.position_at_end(head)
    cond = lw.expr(node.test)
    if isinstance(cond, Const) and not cond.value:
        lw.b.branch(done)
    else:
        lw.b.cbranch(truth(lw.b, lw.value(cond, node.test)).ir, body, done)
    lw.loop_body(body, node.body, head, done)
    lw.b.position_at_end(done)
    lw.dead = False


def lower_break(lw, node) -> None:
    lw.jump_out(node, 1)


def lower_continue(lw, node) -> None:
    lw.jump_out(node, 0)


def lower_for(lw, node: ast.For) -> None:
    if node.orelse:
        lw.fail(node, "`for ... else`", "a flag variable")
    it = node.iter
    call = it.func.id if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) else None
    if call == "range":
        return lw.for_range(node)
    if call == "bits":
        return lw.for_bits(node)
    if call == "prange":
        return lw.for_prange(node)
    if call == "enumerate":
        seq = lw.expr(it.args[0]) if len(it.args) == 1 else None
        if not (isinstance(seq, Const) and isinstance(seq.value, (tuple, list))):
            lw.fail(it, "enumerate() of a run-time value", "`for i in range(n)`")
        return lw.unrolled(node, [Const(pair) for pair in enumerate(seq.value)])
    if call == "unroll":
        n = lw.const_int(it.args[0] if it.args else it, "unroll(n)")
        return lw.unrolled(node, [Const(k) for k in range(n)])
    seq = lw.expr(it)
    if isinstance(seq, Const) and isinstance(seq.value, (tuple, list)):
        return lw.unrolled(node, [Const(v) for v in seq.value])
    lw.fail(it, "a loop over this is not supported",
            "`for i in range(...)`, `for bit in bits(word)`, `for i in unroll(n)` or a "
            "loop over a static tuple")
