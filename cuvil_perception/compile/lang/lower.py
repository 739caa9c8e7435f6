"""Lowering a kernel's AST to LLVM IR: the function frame, variables and statements (loops are
in `loop_lower`).

Statements: assignment (names, ``buf[i, j]``, tuple unpacking), annotated assignment
(``x: f32 = 0.0`` fixes a variable's type), augmented assignment, ``if/elif/else`` (a constant
condition picks its branch at compile time), ``while``, ``for i in range(a, b, step)`` (a
counted loop in the canonical form the loop vectoriser recognises; ``step`` a constant),
``for bit in bits(word)`` (the set bits of an int, lowest first), ``for x in <static tuple>``
and ``for i in unroll(n)`` (unrolled, ``x``/``i`` constants), ``break``, ``continue``,
``return``, ``pass`` and calls.

A variable's type is the type of its first assignment (or its annotation); assigning a value
of another type is an error, except a literal, which takes the variable's type. A name assigned
exactly once with a compile-time value is a constant (shape arithmetic folds in Python).
"""

from __future__ import annotations

import ast
from llvmlite import ir

from .. import irutil as u
from .arith import binop, convert, fpow, power, truth
from .atomic_lower import AtomicMixin
from .constants import is_vector_constant
from .calls import CallsMixin
from .expr import ExprMixin
from .logic_lower import LogicMixin
from .lane_lower import LanesMixin
from .loop_lower import LoopMixin
from .math_lower import MathMixin
from .names import STMT_HINTS, binding_lines
from .prange_lower import PrangeMixin
from .region_lower import RegionMixin
from .scope import BINOPS, Frame, Var, named
from .simd_lower import SimdMixin
from .slice_lower import SliceMixin, is_slice
from .source import fail
from .types import BOOL, Scalar, VecType
from .values import BufRef, Const, Val, wrapped_operand
from .vector_lower import VectorMixin, is_vector


class Lowerer(ExprMixin, LogicMixin, CallsMixin, MathMixin, SimdMixin, VectorMixin, LanesMixin,
              SliceMixin, RegionMixin, LoopMixin, PrangeMixin, AtomicMixin):
    """Lowers one kernel (and the helpers it calls) into ``fn`` of an llvmlite module."""

    def __init__(self, fn: ir.Function, flags: tuple, debug: bool):
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.flags = tuple(flags)
        self.debug = debug
        self.err = None           # debug builds: the i64[4] error record parameter
        self.sites: list = []     # debug builds: (location, message) per check, by site id
        self.frames: list[Frame] = []
        self.dead = False         # the current position is unreachable (after return/break)
        self.inline_depth = 0
        self.local_bytes = 0      # stack bytes of the local() arrays so far
        self.written: set[str] = set()  # buffer parameters stored to (or whose address escapes)
        self.streamed: dict[str, int] = {}  # buffer parameter -> alignment its stream stores need
        self.par = None           # kernels with prange loops: the thread-pool record parameter
        self.in_prange = False    # lowering a prange body (outlined: `prange_lower`)
        self.prange_count = 0
        self.shared_locals: set = set()  # ids of the pointers of local arrays a prange captured
        self.prange_private: dict = {}  # name first bound in a prange body -> (message, instead)
        self.at = None            # the statement being lowered

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def fail(self, node, message: str, instead: str | None = None):
        fail(self.frame.src, node, message, instead)

    def slot(self, ty: ir.Type, name: str) -> ir.Value:
        """A variable's stack slot, zeroed in the entry block: a variable read on a path that
        did not assign it (``for i in range(n)`` with n = 0, then ``i``; Python: an
        UnboundLocalError) reads 0, the same every run, never an undefined value."""
        entry = self.b.function.entry_basic_block
        with self.b.goto_block(entry):
            if entry.instructions:
                self.b.position_before(entry.instructions[0])
            slot = self.b.alloca(ty, name=name)
            self.b.store(ir.Constant(ty, None), slot)
        return slot

    def mark_written(self, buf) -> None:
        """Record that the kernel may write ``buf`` (when it is a parameter): `kernel(...)`
        refuses a read-only array there instead of writing into memory numpy guards."""
        self.prange_check_write(buf)
        if isinstance(buf.ptr, ir.Argument):
            self.written.add(buf.ptr.name)

    # -- statements ---------------------------------------------------------------------
    def body(self, stmts: list) -> None:
        for stmt in stmts:
            if self.dead:
                return  # unreachable code after return/break/continue is not lowered
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        self.at = node  # (for errors found below an expression: `prange_check_write`)
        handler = getattr(self, f"s_{type(node).__name__}", None)
        if handler is None:
            self.fail(node, f"`{type(node).__name__}` statements are not supported in kernels",
                      STMT_HINTS.get(type(node).__name__))
        handler(node)

    def s_Pass(self, node) -> None:
        pass

    def s_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        if not isinstance(node.value, ast.Call):
            self.fail(node, "an expression statement does nothing here",
                      "an assignment or a call")
        self.expr(node.value)

    def s_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and self.region_store(node.targets[0], node.value, None, node):
            return  # (`img[:, :] = -1`: loops, `region_lower`)
        value = self.expr(node.value)
        for target in node.targets:  # `a = b = v`: as Python, v once, bound left to right
            self.assign(target, value, node)

    def s_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name):
            self.fail(node, "only a plain name can be annotated")
        ty = self.local_type(node.annotation)
        name = node.target.id
        current = self.frame.env.get(name)
        if current is not None and not (isinstance(current, Var) and current.ty == ty):
            self.fail(node, f"variable '{name}' already exists with another type; annotate "
                      f"its first assignment")
        if current is None:  # (an unrolled loop lowers the same annotation again)
            self.frame.env[name] = Var(self.slot(ty.ir, name), ty, node.lineno)
        if node.value is not None:
            self.assign(node.target, self.expr(node.value), node)

    def s_AugAssign(self, node: ast.AugAssign) -> None:
        op = BINOPS.get(type(node.op))
        if op is None:
            self.fail(node, f"operator {type(node.op).__name__} in `op=`")
        if not isinstance(node.target, (ast.Name, ast.Subscript)):
            self.fail(node, "`op=` on this target is not supported", "`x = x op y`")
        if self.region_store(node.target, node.value, op, node):
            return None
        if isinstance(node.target, ast.Subscript):
            return self.aug_item(node.target, op, node)
        current = self.expr(node.target)
        value = self.arith(op, current, self.expr(node.value), node)
        self.assign(node.target, value, node)

    def aug_item(self, target: ast.Subscript, op: str, node) -> None:
        """``buf[i, j] op= v``: the element's address (a slice's lanes) computed once, as Python
        evaluates the target once (an index with a side effect, ``out[bump(n)] += 1.0``, must
        not read one element and write another)."""
        base = self.expr(target.value)
        if not isinstance(base, BufRef):
            return self.store_item(target, None, base)  # (refused there)
        if is_slice(target):  # (the lanes are read before the value is evaluated, as Python)
            at = self.slice_run(base, target)
            current = self.slice_load(base, target, at)
            operand = self.slice_operand(base, target, self.expr(node.value), current.ty)
        else:
            at = self.element(base, target)
            ty = base.ty.dtype
            current = convert(self.b, Val(self.b.load(at, typ=ty.ir), ty), ty.compute)
            operand = self.expr(node.value)
        value = self.arith(op, current, operand, node)
        self.store_item(target, value, base, at)

    def assign(self, target: ast.expr, value, node) -> None:
        if isinstance(target, ast.Name):
            return self.assign_name(target.id, value, node)
        if isinstance(target, ast.Subscript):
            return self.store_item(target, value)
        if isinstance(target, ast.Tuple):
            items = self.unpack(value, len(target.elts), node)
            for t, v in zip(target.elts, items):
                self.assign(t, v, node)
            return None
        self.fail(node, f"cannot assign to `{ast.unparse(target)}`")

    def assign_name(self, name: str, value, node) -> None:
        env = self.frame.env
        current = env.get(name)
        if (current is None and isinstance(value, BufRef)) or (
                isinstance(value, (Const, BufRef)) and name in self.frame.once
                and (current is None or isinstance(current, (Const, BufRef)))):
            # (re-binding a constant: the one assignment runs again in an unrolled loop)
            env[name] = named(value, name)  # a compile-time constant or a buffer alias
            return
        if isinstance(value, BufRef) or isinstance(current, BufRef):
            self.fail(node, f"'{name}' would be both a buffer and a scalar, or two buffers",
                      "a new name for the second value")
        if isinstance(value, Const) and not isinstance(value.value, (bool, int, float)):
            lines = binding_lines(self.frame.src.tree, name)
            where = (f"more than once to '{name}' (lines {', '.join(map(str, lines))})"
                     if len(lines) > 1 else f"to '{name}' in an `if`, `while` or run-time loop "
                     "inside an unrolled loop (the copy that ran last would decide)")
            self.fail(node, f"a tuple assigned {where}: a tuple name is a compile-time constant",
                      "one name per tuple, or a local array: `x = local(f32, n)`")
        want = current.ty if isinstance(current, Var) else None
        if isinstance(want, VecType) or is_vector(value):
            return self.assign_vector(name, current, value, node)
        val = self.value(value, node, want=want)
        if current is None or isinstance(current, Const):
            current = Var(self.slot(val.ty.ir, name), val.ty, node.lineno)
            env[name] = current
        elif val.ty != current.ty:
            if not val.weak or (val.ty.is_float and not current.ty.is_float):
                self.fail(node, f"'{name}' is {current.ty} (from line {current.line}) but this "
                          f"assigns {val.ty}", f"`{name} = {current.ty}(...)` or declare "
                          f"`{name}: {val.ty} = ...` at line {current.line}")
            val = convert(self.b, val, current.ty)
        self.b.store(val.ir, current.slot)

    def unpack(self, value, n: int, node) -> list:
        if isinstance(value, Val) and isinstance(value.ty, VecType):  # numpy unpacks a row
            if value.ty.lanes != n:
                self.fail(node, f"cannot unpack a {value.ty} into {n} names",
                          f"a vector of {n} lanes, e.g. `buf[i, 0:{n}]`")
            return [Val(self.b.extract_element(value.ir, u.const_i32(k)), value.ty.elem)
                    for k in range(n)]
        items = value.value if isinstance(value, Const) else value
        if not isinstance(items, (tuple, list)) or len(items) != n:
            self.fail(node, f"cannot unpack this into {n} names")
        if isinstance(value, Const):  # a static tuple's items (module-level vectors among them)
            return [self.constant_vector(v, node) if is_vector_constant(v) else Const(v)
                    for v in items]
        return list(items)

    def s_If(self, node: ast.If) -> None:
        cond = self.expr(node.test)
        if isinstance(cond, Const):  # decided at compile time: only one branch exists
            self.body(node.body if cond.value else node.orelse)
            return
        cond = truth(self.b, self.value(cond, node.test))
        then = self.fn.append_basic_block("if.then")
        other = self.fn.append_basic_block("if.else") if node.orelse else None
        done = self.fn.append_basic_block("if.end")
        self.b.cbranch(cond.ir, then, other or done)
        reach = self.branch_body(then, node.body, done)
        if other is not None:
            reach |= self.branch_body(other, node.orelse, done)
        else:
            reach = True
        self.b.position_at_end(done)
        self.dead = not reach
        if not reach:
            self.b.unreachable()

    def branch_body(self, block: ir.Block, stmts: list, done: ir.Block) -> bool:
        """Lower ``stmts`` from ``block``; True if control reaches ``done``."""
        self.b.position_at_end(block)
        self.dead = False
        self.body(stmts)
        if self.dead:
            return False
        self.b.branch(done)
        return True

    def s_Return(self, node: ast.Return) -> None:
        frame = self.frame
        value = self.expr(node.value) if node.value is not None else None
        if frame.exit is not None:  # an inlined helper
            self.helper_return(value, node)
            return
        if frame.ret_ty is None:
            if value is not None:
                self.fail(node, "the kernel returns a value but has no return annotation",
                          "`-> i64` (or f32, ...) on the def line")
            self.b.ret_void()
        else:
            if value is None:
                self.fail(node, f"the kernel must return a {frame.ret_ty}")
            val = self.value(value, node, want=frame.ret_ty)
            self.b.ret(self.coerce(val, frame.ret_ty, node, "return value").ir)
        self.dead = True

    def coerce(self, val: Val, ty: Scalar, node, what: str) -> Val:
        """``val`` as ``ty`` where that is safe implicitly (literals, int -> wider int or float,
        f64 -> f32 stores); anything else needs an explicit cast."""
        if val.ty == ty:
            return val
        if isinstance(val.ty, VecType) or isinstance(ty, VecType):
            self.fail(node, f"{what} is {val.ty}, expected {ty}")
        ok = ((val.weak and (ty.is_float or not val.ty.is_float))  # 0.5 never becomes 0
              or (ty.is_float and not (val.ty.is_float and val.ty.bits > ty.bits))
              or (ty.is_int and val.ty.is_int and ty.bits >= val.ty.bits) or val.ty == BOOL)
        if not ok:
            self.fail(node, f"{what} is {val.ty}, expected {ty}", f"`{ty}(...)`")
        return convert(self.b, val, ty)

    def joins(self, a: Val, c: Val, a_node: ast.expr, c_node: ast.expr) -> None:
        """A constant operand that does not fit the i32 it joins is a compile error at the
        constant, not wrapped to 32 bits (`values.wrapped_operand`)."""
        if (bad := wrapped_operand(a, c)) is not None:
            at, message, ty = bad
            node, other = (a_node, c_node) if at == 0 else (c_node, a_node)
            lo, hi = -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
            self.fail(node, f"{message}, the type of `{ast.unparse(other)}` it joins",
                      f"`i64({ast.unparse(other)})` to compute in i64, or a value in [{lo}, {hi}]")

    def operand_values(self, x, x_node: ast.expr, y, y_node: ast.expr) -> tuple[Val, Val]:
        """The values of the operands ``x`` and ``y`` of a comparison (`joins`)."""
        a, c = self.value(x, x_node), self.value(y, y_node)
        self.joins(a, c, x_node, y_node)
        return a, c

    def arith(self, op: str, x, y, node):
        """``x op y`` on constants (folded) or values."""
        if isinstance(x, Const) and isinstance(y, Const):
            return self.fold(op, x, y, node)
        if is_vector(x) or is_vector(y):
            return self.vec_arith(op, x, y, node)
        xv = self.value(x, node)
        if op == "**":
            exponent = y.value if isinstance(y, Const) else None
            out = power(self.b, xv, exponent, self.flags)
            return out if out is not None else fpow(self.b, xv, self.value(y, node), self.flags)
        yv = self.value(y, node)
        self.joins(xv, yv, *_operand_nodes(node))
        try:
            return binop(self.b, op, xv, yv, self.flags)
        except TypeError as exc:
            self.fail(node, f"{exc} (operands {xv.ty} and {yv.ty})", "an explicit int cast")


def _operand_nodes(node) -> tuple:
    """The left and right operand of ``a op b`` or ``a op= b``."""
    if isinstance(node, ast.BinOp):
        return node.left, node.right
    return node.target, node.value
