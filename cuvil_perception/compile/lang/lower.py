"""The lowering's dispatcher: `Lowerer` holds the state of one kernel being lowered (its
llvmlite function and builder, the frames of the kernel and the helpers inlined into it, what
it writes), and `STATEMENTS` / `EXPRESSIONS` map each AST node type the language has to the
function that lowers it. A node type missing from the tables is an error naming it.

The functions live with their concept: statements (`statements`), loops (`loop_lower`,
`counted`, `prange_lower`), expressions (`expressions`), comparisons and ``and``/``or``
(`logic_lower`), calls (`calls`), and they call the helpers of other concepts as plain functions
from their modules: slices (`slice_lower`), regions (`region_lower`), vectors (`vector_lower`,
`lane_lower`, `simd_lower`), math (`math_lower`), constant folding (`fold_lower`), atomics
(`atomic_lower`). Each takes the `Lowerer` as ``lw``; what every one of them needs - the
dispatch (``lw.expr``, ``lw.stmt``, ``lw.body``), errors (``lw.fail``), values and arithmetic
(``lw.value``, ``lw.arith``, ...: `expr.Values`, the Lowerer's one base) - are its methods.
`scope` holds what they all share (`Var`, `Frame`, the operator tables). The modules import
one another one way (no cycle: tests/test_import_cycles.py); none imports this one. The passes
around this one are listed in `passes`.

A variable's type is the type of its first assignment (or its annotation); assigning a value
of another type is an error, except a literal, which takes the variable's type. A name assigned
exactly once with a compile-time value is a constant (shape arithmetic folds in Python).
"""

from __future__ import annotations

import ast

from llvmlite import ir

from . import calls, expressions as ex, logic_lower as logic, loop_lower as loops, statements as st
from .constants import is_vector_constant
from .expr import Values
from .lane_lower import constant_vector
from .names import EXPR_HINTS, STMT_HINTS
from .prange_lower import prange_check_write
from .scope import Frame
from .source import fail
from .values import Const

#: Statement node type -> its lowering function ``f(lw, node) -> None``.
STATEMENTS = {
    ast.Pass: st.lower_pass,
    ast.Expr: st.lower_expr_stmt,           # a call (a docstring is skipped)
    ast.Assign: st.lower_assign,            # names, ``buf[i, j]``, regions, tuple unpacking
    ast.AnnAssign: st.lower_ann_assign,     # ``x: f32 = 0.0`` fixes x's type
    ast.AugAssign: st.lower_aug_assign,
    ast.If: st.lower_if,                    # a constant condition picks its branch
    ast.Return: st.lower_return,
    ast.While: loops.lower_while,
    ast.For: loops.lower_for,               # range, bits, prange, unroll, static tuples
    ast.Break: loops.lower_break,
    ast.Continue: loops.lower_continue,
}

#: Expression node type -> its lowering function ``f(lw, node)`` -> a `Val` (run time), a
#: `Const` (compile time), a `BufRef` or a tuple of them.
EXPRESSIONS = {
    ast.Constant: ex.lower_constant,
    ast.Name: ex.lower_name,
    ast.Attribute: ex.lower_attribute,      # ``buf.shape``, module attributes
    ast.Tuple: ex.lower_tuple,
    ast.BinOp: ex.lower_binop,
    ast.UnaryOp: ex.lower_unaryop,
    ast.IfExp: ex.lower_ifexp,
    ast.Subscript: ex.lower_subscript,      # elements, slices, lanes, static items
    ast.Compare: logic.lower_compare,
    ast.BoolOp: logic.lower_boolop,
    ast.Call: calls.lower_call,             # builtins, casts, kmath, simd, helpers
}


class Lowerer(Values):
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
        prange_check_write(self, buf)
        if isinstance(buf.ptr, ir.Argument):
            self.written.add(buf.ptr.name)

    # -- the dispatcher --------------------------------------------------------------------
    def body(self, stmts: list) -> None:
        for stmt in stmts:
            if self.dead:
                return  # unreachable code after return/break/continue is not lowered
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        self.at = node  # (for errors found below an expression: `prange_check_write`)
        lower = STATEMENTS.get(type(node))
        if lower is None:
            self.fail(node, f"`{type(node).__name__}` statements are not supported in kernels",
                      STMT_HINTS.get(type(node).__name__))
        lower(self, node)

    def expr(self, node: ast.expr):
        lower = EXPRESSIONS.get(type(node))
        if lower is None:
            self.fail(node, f"`{type(node).__name__}` expressions are not supported in kernels",
                      EXPR_HINTS.get(type(node).__name__))
        out = lower(self, node)
        if isinstance(out, Const) and is_vector_constant(out.value):
            # an item of a module-level tuple of vectors (`PAIRS[0]`, `for v in PAIRS`)
            return constant_vector(self, out.value, node)
        return out
