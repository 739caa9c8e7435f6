"""Lowering of comparisons (chained too) and of `and` / `or`: what Python evaluates and
skips, with branch-free code where skipping cannot be observed."""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import irutil as u
from ...errors import CompileError
from .arith import compare, truth
from .fold_lower import fold_compare
from .scope import CMPOPS
from .slice_lower import calls_helper
from .types import BOOL, Scalar, VecType
from .values import Const, Val
from .vector_lower import vec_compare

# What an `and` / `or` operand may contain to be evaluated unconditionally: names, constants,
# casts and cheap arithmetic or comparisons - nothing that loads (`i < n and x[i] > 0` guards
# the load), calls a helper, divides or costs more than skipping it saves.
_CHEAP = (ast.Name, ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Call,
          ast.Load, ast.boolop, ast.unaryop, ast.cmpop, ast.Add, ast.Sub, ast.Mult, ast.BitAnd,
          ast.BitOr, ast.BitXor)
_CHEAP_SIZE = 24  # AST nodes


def chain(lw, left, left_node, first: int, node: ast.Compare):
    """The links ``first``.. of a comparison chain, ``left`` the value they start from.
    All operands are evaluated, joined by one branch-free `and` (so ``0 <= i < n``
    vectorises), except that an operand calling a helper or a kernel is evaluated only
    once the links before it hold, as Python does (the helper may write a buffer)."""
    result = None
    for k in range(first, len(node.ops)):
        op_node, right_node = node.ops[k], node.comparators[k]
        if isinstance(result, Val) and may_store(lw, right_node):
            return short_circuit(lw, result, True,
                                 lambda: chain(lw, left, left_node, k, node), node, "cmp")
        op = CMPOPS.get(type(op_node))
        if op is None:
            lw.fail(node, f"comparison {type(op_node).__name__}", "< <= > >= == !=")
        right = lw.expr(right_node)
        if any(isinstance(v, Val) and isinstance(v.ty, VecType) for v in (left, right)):
            if len(node.ops) > 1:
                lw.fail(node, "a chained comparison of vectors", "`(a < b) & (b < c)`")
            return vec_compare(lw, op, left, right, node)
        if isinstance(left, Const) and isinstance(right, Const):
            part = fold_compare(lw, op, left, right, node)
        else:
            part = compare(lw.b, op, *lw.operand_values(left, left_node, right, right_node))
        result = part if result is None else both(lw, result, part)
        if isinstance(result, Const) and not result.value:
            return result  # decided: Python evaluates no further operand
        left, left_node = right, right_node
    return result


def may_store(lw, tree: ast.AST) -> bool:
    """True if ``tree`` calls a helper or a kernel (`slice_lower.calls_helper`), which may
    store into a buffer."""
    return any(isinstance(sub, ast.Call) and calls_helper(lw, sub) for sub in ast.walk(tree))


def short_circuit(lw, cond: Val, is_and: bool, rest, node, label: str) -> Val:
    """``cond and rest()`` (``or`` if not ``is_and``): ``rest`` lowered in a block that runs
    only when ``cond`` does not decide the result."""
    start = lw.b.block
    more = lw.fn.append_basic_block(f"{label}.rhs")
    done = lw.fn.append_basic_block(f"{label}.end")
    lw.b.cbranch(cond.ir, *((more, done) if is_and else (done, more)))
    lw.b.position_at_end(more)
    other = truth(lw.b, lw.value(rest(), node))
    end = lw.b.block
    lw.b.branch(done)
    lw.b.position_at_end(done)
    phi = lw.b.phi(u.I1)
    phi.add_incoming(ir.Constant(u.I1, 0 if is_and else 1), start)
    phi.add_incoming(other.ir, end)
    return Val(phi, BOOL)


def both(lw, a, c):
    if isinstance(a, Const) and isinstance(c, Const):
        return Const(a.value and c.value)
    if isinstance(a, Const):
        return c if a.value else Const(False)
    if isinstance(c, Const):
        return a if c.value else Const(False)
    return Val(lw.b.and_(a.ir, c.ir), BOOL)


def cheap(lw, tree: ast.AST) -> bool:
    """Whether an operand of `and` / `or` can be evaluated whether or not Python would:
    no load, no helper call, no division, nothing but casts called, and small (see
    ``_CHEAP``). Skipping it cannot be observed, so it is, and the join is branch-free."""
    nodes = list(ast.walk(tree))
    if len(nodes) > _CHEAP_SIZE or not all(isinstance(n, _CHEAP) for n in nodes):
        return False
    for call in (n for n in nodes if isinstance(n, ast.Call)):
        if call.keywords or not isinstance(call.func, ast.Name) or \
                call.func.id in lw.frame.env:
            return False
        try:
            fn = lw.resolve(call.func).value
        except CompileError:  # reported where the operand is lowered
            return False
        if not isinstance(fn, Scalar):
            return False
    return True


def eager(lw, cond: Val, is_and: bool, rest: list) -> Val:
    """``cond and r1 and r2 ...`` (``or``) with every operand evaluated, joined by one
    `and` (`or`) of their truth values: what LLVM turns into selects or one branch
    (numba's IR of the same source reaches that form; short-circuit blocks kept one
    branch per operand: 1.1x slower on benchmarks/_user_kernels.voxel_centroids)."""
    result = cond.ir
    for operand in rest:
        value = lw.expr(operand)
        if isinstance(value, Const):
            if bool(value.value) != is_and:
                return Const(bool(value.value))
            continue
        part = truth(lw.b, lw.value(value, operand)).ir
        result = lw.b.and_(result, part) if is_and else lw.b.or_(result, part)
    return Val(result, BOOL)


def lower_compare(lw, node: ast.Compare):
    return chain(lw, lw.expr(node.left), node.left, 0, node)


def lower_boolop(lw, node: ast.BoolOp):
    is_and = isinstance(node.op, ast.And)
    first = lw.expr(node.values[0])
    rest = node.values[1:]
    if isinstance(first, Const):  # decided now: maybe the rest is not even lowered
        if bool(first.value) != is_and:
            return Const(bool(first.value))
        if len(rest) == 1:
            x = lw.expr(rest[0])
            return Const(bool(x.value)) if isinstance(x, Const) else truth(lw.b, x)
        return lower_boolop(lw, ast.BoolOp(node.op, rest, lineno=node.lineno,
                                        col_offset=node.col_offset))
    cond = truth(lw.b, lw.value(first, node.values[0]))
    if all(cheap(lw, value) for value in rest):
        return eager(lw, cond, is_and, rest)
    if len(rest) == 1:
        return short_circuit(lw, cond, is_and, lambda: lw.expr(rest[0]), rest[0], "bool")
    return short_circuit(lw, cond, is_and, lambda: lower_boolop(lw, ast.BoolOp(
        node.op, rest, lineno=node.lineno, col_offset=node.col_offset)), rest[0], "bool")
