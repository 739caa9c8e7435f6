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
`lower.STATEMENTS`' entries; the loop shape they share with prange loops is `counted`'s.
Every function takes the `lower.Lowerer` as ``lw`` (``b``, ``fn``, ``frame``, ``dead``,
``body``, ``expr`` and the rest).
"""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import irutil as u
from . import kmath
from .arith import truth
from .counted import loop_body, loop_var, phi_loop
from .math_lower import int_word
from .prange_lower import for_prange
from .statements import unpack
from .values import Const

MAX_UNROLL = 4096  # copies of an unrolled loop's body, like the elements of a `local` array


def jump_out(lw, node, which: int) -> None:
    if not lw.frame.loops:
        lw.fail(node, "`break`/`continue` outside a loop")
    target = lw.frame.loops[-1][which]
    if target is None:
        lw.fail(node, "`break`/`continue` inside an unrolled loop",
                "a `for i in range(...)` loop")
    lw.b.branch(target)
    lw.dead = True


def unrolled(lw, node: ast.For, items: list) -> None:
    """One copy of the body per item, the target bound to the item as a constant."""
    if len(items) > MAX_UNROLL:  # 100 000 copies took 12 s to compile, 1 M ~ a hang
        lw.fail(node, f"an unrolled loop of {len(items)} copies (at most {MAX_UNROLL})",
                "`for i in range(n)`: a loop (LLVM unrolls and vectorises it itself)")
    for item in items:
        if lw.dead:
            return
        bind_static(lw, node.target, item, node)
        lw.frame.loops.append((None, None))
        lw.body(node.body)
        lw.frame.loops.pop()


def bind_static(lw, target, item: Const, node) -> None:
    if isinstance(target, ast.Name):
        lw.frame.env[target.id] = item
        return
    if isinstance(target, ast.Tuple):
        for t, v in zip(target.elts, unpack(lw, item, len(target.elts), node)):
            bind_static(lw, t, v, node)
        return
    lw.fail(node, "loop target must be a name or a tuple of names")


def for_range(lw, node: ast.For) -> None:
    args = node.iter.args
    if not 1 <= len(args) <= 3 or node.iter.keywords:
        lw.fail(node.iter, "range() takes 1 to 3 positional arguments")
    step = lw.const_int(args[2], "a constant range step") if len(args) == 3 else 1
    if step == 0:
        lw.fail(args[2], "range() step must not be zero")
    start = lw.index_value(args[0], node) if len(args) > 1 else u.const_i64(0)
    stop = lw.index_value(args[1] if len(args) > 1 else args[0], node)
    if not isinstance(node.target, ast.Name):
        lw.fail(node.target, "a range loop needs one loop variable")
    var = loop_var(lw, node.target.id, node)
    phi_loop(lw, node, "for", start, node.target.id,
             lambda idx: lw.b.icmp_signed("<" if step > 0 else ">", idx, stop),
             lambda idx: lw.b.store(idx, var.slot),
             lambda idx: lw.b.add(idx, u.const_i64(step),
                                  name=f"{node.target.id}.next", flags=("nsw",)))


def for_bits(lw, node: ast.For) -> None:
    """``for bit in bits(word)``: the set bits of ``word``, lowest first (``bit`` an i64)."""
    it = node.iter
    if len(it.args) != 1 or it.keywords:
        lw.fail(it, "bits() takes one positional argument, the integer word",
                "`for bit in bits(word)`")
    word = int_word(lw, it.args[0], "bits()", "an integer word (i8 to i64, u8 to u64), "
                    "e.g. `bits(i64(x))`")
    if isinstance(word, Const):
        word = lw.value(word, it.args[0]).ir
    if not isinstance(node.target, ast.Name):
        lw.fail(node.target, "a bits loop needs one loop variable", "`for bit in bits(word)`")
    var = loop_var(lw, node.target.id, node)
    zero, one = ir.Constant(word.type, 0), ir.Constant(word.type, 1)

    def bind_bit(rest):  # rest != 0 here, so cttz may treat 0 as poison (a bare tzcnt/bsf)
        low = u.intrinsic(lw.b, kmath.INT_FUNCTIONS[kmath.ctz], rest, ir.Constant(u.I1, 1))
        lw.b.store(low if word.type.width == 64 else lw.b.zext(low, u.I64), var.slot)

    phi_loop(lw, node, "bits", word, f"{node.target.id}.rest",
             lambda rest: lw.b.icmp_unsigned("!=", rest, zero), bind_bit,
             lambda rest: lw.b.and_(rest, lw.b.sub(rest, one),
                                    name=f"{node.target.id}.next"))


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
    loop_body(lw, body, node.body, head, done)
    lw.b.position_at_end(done)
    lw.dead = False


def lower_break(lw, node) -> None:
    jump_out(lw, node, 1)


def lower_continue(lw, node) -> None:
    jump_out(lw, node, 0)


def lower_for(lw, node: ast.For) -> None:
    if node.orelse:
        lw.fail(node, "`for ... else`", "a flag variable")
    it = node.iter
    call = it.func.id if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) else None
    if call == "range":
        return for_range(lw, node)
    if call == "bits":
        return for_bits(lw, node)
    if call == "prange":
        return for_prange(lw, node)
    if call == "enumerate":
        seq = lw.expr(it.args[0]) if len(it.args) == 1 else None
        if not (isinstance(seq, Const) and isinstance(seq.value, (tuple, list))):
            lw.fail(it, "enumerate() of a run-time value", "`for i in range(n)`")
        return unrolled(lw, node, [Const(pair) for pair in enumerate(seq.value)])
    if call == "unroll":
        n = lw.const_int(it.args[0] if it.args else it, "unroll(n)")
        return unrolled(lw, node, [Const(k) for k in range(n)])
    seq = lw.expr(it)
    if isinstance(seq, Const) and isinstance(seq.value, (tuple, list)):
        return unrolled(lw, node, [Const(v) for v in seq.value])
    lw.fail(it, "a loop over this is not supported",
            "`for i in range(...)`, `for bit in bits(word)`, `for i in unroll(n)` or a "
            "loop over a static tuple")
