"""The shape every counted loop shares: a header phi, one latch, the body in between
(`phi_loop`), its i64 counter variable (`loop_var`) and the body's ``break``/``continue``
targets (`loop_body`). Range and bits loops (`loop_lower`) and the chunk loop of a parallel
loop's outlined body (`prange_lower`) are lowered through it.
"""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import irutil as u
from .scope import Var
from .types import I64


def loop_body(lw, block, stmts, cont, brk, enter=None) -> None:
    """Lower ``stmts`` from ``block`` with ``cont``/``brk`` as the targets of `continue` and
    `break`; ``enter()`` first (binding the loop variable); falls through to ``cont``."""
    lw.b.position_at_end(block)
    lw.dead = False
    if enter is not None:
        enter()
    lw.frame.loops.append((cont, brk))
    lw.body(stmts)
    lw.frame.loops.pop()
    if not lw.dead:
        lw.b.branch(cont)


def phi_loop(lw, node: ast.For, kind: str, init: ir.Value, name: str, test, enter,
             advance) -> None:
    """The loop shape range and bits loops share (the canonical form LLVM's vectoriser
    recognises): a header phi from ``init`` tested by ``test(phi)``, ``enter(phi)`` where
    the body starts, ``advance(phi)`` in the one latch."""
    pre = lw.b.block
    head = lw.fn.append_basic_block(f"{kind}.head")
    body = lw.fn.append_basic_block(f"{kind}.body")
    latch = lw.fn.append_basic_block(f"{kind}.latch")
    done = lw.fn.append_basic_block(f"{kind}.end")
    lw.b.branch(head)
    lw.b.position_at_end(head)
    phi = lw.b.phi(init.type, name=name)
    phi.add_incoming(init, pre)
    lw.b.cbranch(test(phi), body, done)
    loop_body(lw, body, node.body, latch, done, enter=lambda: enter(phi))
    lw.b.position_at_end(latch)
    phi.add_incoming(advance(phi), latch)
    lw.b.branch(head)
    lw.b.position_at_end(done)
    lw.dead = False


def loop_var(lw, name: str, node):
    """The i64 local a range or bits loop counts in (created, or reused if ``name`` is
    one)."""
    var = lw.frame.env.get(name)
    if isinstance(var, Var):
        if var.ty != I64:
            lw.fail(node, f"loop variable '{name}' is {var.ty} elsewhere; range and "
                    f"bits loops count in i64", "another name for the loop variable")
        return var
    var = Var(lw.slot(u.I64, name), I64, node.lineno)
    lw.frame.env[name] = var
    return var
