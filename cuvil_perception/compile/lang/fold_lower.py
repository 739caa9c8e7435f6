"""Constant expressions in a lowering: numbers fold with the run-time semantics (`folding`),
other constants (tuples) with Python's operators; a constant expression without a value is a
compile error at its line."""

from __future__ import annotations

import ast
import operator

from . import folding
from .values import Const

_PYTHON = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "&": operator.and_, "|": operator.or_,
           "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift, "**": operator.pow,
           "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq, "!=": operator.ne}
_UNARY = {"-": operator.neg, "+": operator.pos, "not": operator.not_, "~": operator.invert}


def fold(lw, op: str, x: Const, y: Const, node) -> Const:
    """``x op y`` of two constants (op: an arithmetic operator)."""
    if folding.is_number(x.value) and folding.is_number(y.value):
        return fold_call(lw, node, folding.binary, op, x.value, y.value)
    return fold_call(lw, node, _PYTHON[op], x.value, y.value)


def fold_compare(lw, op: str, x: Const, y: Const, node) -> Const:
    if folding.is_number(x.value) and folding.is_number(y.value):
        return fold_call(lw, node, folding.compare, op, x.value, y.value)
    return fold_call(lw, node, _PYTHON[op], x.value, y.value)


def fold_unary(lw, op: str, x: Const, node) -> Const:
    """``op x``, op one of - + ~ not."""
    if op == "not" or not folding.is_number(x.value):
        return fold_call(lw, node, _UNARY[op], x.value)
    return fold_call(lw, node, folding.unary, op, x.value)


def fold_call(lw, node, fn, *args) -> Const:
    """``Const(fn(*args))``, or the compile error at ``node`` saying why it has no value."""
    try:
        return Const(fn(*args))
    except folding.FoldError as exc:
        lw.fail(node, f"constant expression `{ast.unparse(node)}`: {exc.args[0]}",
                exc.args[1])
    except Exception as exc:  # TypeError on a tuple...: a static mistake
        not_a_number(lw, node)
        lw.fail(node, f"constant expression `{ast.unparse(node)}` fails: {exc}")


def not_a_number(lw, node: ast.expr) -> None:
    """The compile error at the operand of ``node`` (an operator, a comparison, a call)
    that is a constant tuple (``-PAIR``, ``i32(PAIR)``, ``kmath.isnan(TAB)``), if one is:
    what the operation fails on (Python's TypeError, numpy's truth value of an array)."""
    operands = node.args if isinstance(node, ast.Call) else [
        n for n in ast.iter_child_nodes(node) if isinstance(n, ast.expr)]
    for operand in operands:  # (evaluated again: the compile fails here anyway)
        x = lw.expr(operand)
        if isinstance(x, Const) and isinstance(x.value, (tuple, list)):
            text = ast.unparse(operand)
            lw.fail(operand, f"`{text}` is a tuple, not a number",
                    f"one element of it, `{text}[k]`")
