"""Lowering statements other than loops (`loop_lower`): assignment (names, ``buf[i, j]``,
tuple unpacking; a region store ``img[:, :] = v`` is `region_lower`'s), annotated assignment
(``x: f32 = 0.0`` fixes a variable's type), augmented assignment, ``if/elif/else`` (a constant
condition picks its branch at compile time), ``return``, ``pass`` and calls.

Each ``lower_*`` function is `lower.STATEMENTS`' entry for its node type; it takes the
`lower.Lowerer` as ``lw``.
"""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import irutil as u
from .arith import convert, truth
from .calls import helper_return
from .constants import is_vector_constant
from .lane_lower import constant_vector
from .names import binding_lines
from .region_lower import region_store
from .scope import BINOPS, Var, named
from .slice_lower import is_slice, slice_load, slice_operand, slice_run
from .types import VecType
from .values import BufRef, Const, Val
from .vector_lower import assign_vector, is_vector, local_type


def lower_pass(lw, node) -> None:
    pass


def lower_expr_stmt(lw, node: ast.Expr) -> None:
    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return  # a docstring
    if not isinstance(node.value, ast.Call):
        lw.fail(node, "an expression statement does nothing here",
                "an assignment or a call")
    lw.expr(node.value)


def lower_assign(lw, node: ast.Assign) -> None:
    if len(node.targets) == 1 and region_store(lw, node.targets[0], node.value, None, node):
        return  # (`img[:, :] = -1`: loops, `region_lower`)
    value = lw.expr(node.value)
    for target in node.targets:  # `a = b = v`: as Python, v once, bound left to right
        assign(lw, target, value, node)


def lower_ann_assign(lw, node: ast.AnnAssign) -> None:
    if not isinstance(node.target, ast.Name):
        lw.fail(node, "only a plain name can be annotated")
    ty = local_type(lw, node.annotation)
    name = node.target.id
    current = lw.frame.env.get(name)
    if current is not None and not (isinstance(current, Var) and current.ty == ty):
        lw.fail(node, f"variable '{name}' already exists with another type; annotate "
                f"its first assignment")
    if current is None:  # (an unrolled loop lowers the same annotation again)
        lw.frame.env[name] = Var(lw.slot(ty.ir, name), ty, node.lineno)
    if node.value is not None:
        assign(lw, node.target, lw.expr(node.value), node)


def lower_aug_assign(lw, node: ast.AugAssign) -> None:
    op = BINOPS.get(type(node.op))
    if op is None:
        lw.fail(node, f"operator {type(node.op).__name__} in `op=`")
    if not isinstance(node.target, (ast.Name, ast.Subscript)):
        lw.fail(node, "`op=` on this target is not supported", "`x = x op y`")
    if region_store(lw, node.target, node.value, op, node):
        return None
    if isinstance(node.target, ast.Subscript):
        return aug_item(lw, node.target, op, node)
    current = lw.expr(node.target)
    value = lw.arith(op, current, lw.expr(node.value), node)
    assign(lw, node.target, value, node)


def aug_item(lw, target: ast.Subscript, op: str, node) -> None:
    """``buf[i, j] op= v``: the element's address (a slice's lanes) computed once, as Python
    evaluates the target once (an index with a side effect, ``out[bump(n)] += 1.0``, must
    not read one element and write another)."""
    base = lw.expr(target.value)
    if not isinstance(base, BufRef):
        return lw.store_item(target, None, base)  # (refused there)
    if is_slice(target):  # (the lanes are read before the value is evaluated, as Python)
        at = slice_run(lw, base, target)
        current = slice_load(lw, base, target, at)
        operand = slice_operand(lw, base, target, lw.expr(node.value), current.ty)
    else:
        at = lw.element(base, target)
        ty = base.ty.dtype
        current = convert(lw.b, Val(lw.b.load(at, typ=ty.ir), ty), ty.compute)
        operand = lw.expr(node.value)
    value = lw.arith(op, current, operand, node)
    lw.store_item(target, value, base, at)


def assign(lw, target: ast.expr, value, node) -> None:
    if isinstance(target, ast.Name):
        return assign_name(lw, target.id, value, node)
    if isinstance(target, ast.Subscript):
        return lw.store_item(target, value)
    if isinstance(target, ast.Tuple):
        items = unpack(lw, value, len(target.elts), node)
        for t, v in zip(target.elts, items):
            assign(lw, t, v, node)
        return None
    lw.fail(node, f"cannot assign to `{ast.unparse(target)}`")


def assign_name(lw, name: str, value, node) -> None:
    env = lw.frame.env
    current = env.get(name)
    if (current is None and isinstance(value, BufRef)) or (
            isinstance(value, (Const, BufRef)) and name in lw.frame.once
            and (current is None or isinstance(current, (Const, BufRef)))):
        # (re-binding a constant: the one assignment runs again in an unrolled loop)
        env[name] = named(value, name)  # a compile-time constant or a buffer alias
        return
    if isinstance(value, BufRef) or isinstance(current, BufRef):
        lw.fail(node, f"'{name}' would be both a buffer and a scalar, or two buffers",
                "a new name for the second value")
    if isinstance(value, Const) and not isinstance(value.value, (bool, int, float)):
        lines = binding_lines(lw.frame.src.tree, name)
        where = (f"more than once to '{name}' (lines {', '.join(map(str, lines))})"
                 if len(lines) > 1 else f"to '{name}' in an `if`, `while` or run-time loop "
                 "inside an unrolled loop (the copy that ran last would decide)")
        lw.fail(node, f"a tuple assigned {where}: a tuple name is a compile-time constant",
                "one name per tuple, or a local array: `x = local(f32, n)`")
    want = current.ty if isinstance(current, Var) else None
    if isinstance(want, VecType) or is_vector(value):
        return assign_vector(lw, name, current, value, node)
    val = lw.value(value, node, want=want)
    if current is None or isinstance(current, Const):
        current = Var(lw.slot(val.ty.ir, name), val.ty, node.lineno)
        env[name] = current
    elif val.ty != current.ty:
        if not val.weak or (val.ty.is_float and not current.ty.is_float):
            lw.fail(node, f"'{name}' is {current.ty} (from line {current.line}) but this "
                    f"assigns {val.ty}", f"`{name} = {current.ty}(...)` or declare "
                    f"`{name}: {val.ty} = ...` at line {current.line}")
        val = convert(lw.b, val, current.ty)
    lw.b.store(val.ir, current.slot)


def unpack(lw, value, n: int, node) -> list:
    if isinstance(value, Val) and isinstance(value.ty, VecType):  # numpy unpacks a row
        if value.ty.lanes != n:
            lw.fail(node, f"cannot unpack a {value.ty} into {n} names",
                    f"a vector of {n} lanes, e.g. `buf[i, 0:{n}]`")
        return [Val(lw.b.extract_element(value.ir, u.const_i32(k)), value.ty.elem)
                for k in range(n)]
    items = value.value if isinstance(value, Const) else value
    if not isinstance(items, (tuple, list)) or len(items) != n:
        lw.fail(node, f"cannot unpack this into {n} names")
    if isinstance(value, Const):  # a static tuple's items (module-level vectors among them)
        return [constant_vector(lw, v, node) if is_vector_constant(v) else Const(v)
                for v in items]
    return list(items)


def lower_if(lw, node: ast.If) -> None:
    cond = lw.expr(node.test)
    if isinstance(cond, Const):  # decided at compile time: only one branch exists
        lw.body(node.body if cond.value else node.orelse)
        return
    cond = truth(lw.b, lw.value(cond, node.test))
    then = lw.fn.append_basic_block("if.then")
    other = lw.fn.append_basic_block("if.else") if node.orelse else None
    done = lw.fn.append_basic_block("if.end")
    lw.b.cbranch(cond.ir, then, other or done)
    reach = branch_body(lw, then, node.body, done)
    if other is not None:
        reach |= branch_body(lw, other, node.orelse, done)
    else:
        reach = True
    lw.b.position_at_end(done)
    lw.dead = not reach
    if not reach:
        lw.b.unreachable()


def branch_body(lw, block: ir.Block, stmts: list, done: ir.Block) -> bool:
    """Lower ``stmts`` from ``block``; True if control reaches ``done``."""
    lw.b.position_at_end(block)
    lw.dead = False
    lw.body(stmts)
    if lw.dead:
        return False
    lw.b.branch(done)
    return True


def lower_return(lw, node: ast.Return) -> None:
    frame = lw.frame
    value = lw.expr(node.value) if node.value is not None else None
    if frame.exit is not None:  # an inlined helper
        helper_return(lw, value, node)
        return
    if frame.ret_ty is None:
        if value is not None:
            lw.fail(node, "the kernel returns a value but has no return annotation",
                    "`-> i64` (or f32, ...) on the def line")
        lw.b.ret_void()
    else:
        if value is None:
            lw.fail(node, f"the kernel must return a {frame.ret_ty}")
        val = lw.value(value, node, want=frame.ret_ty)
        lw.b.ret(lw.coerce(val, frame.ret_ty, node, "return value").ir)
    lw.dead = True
