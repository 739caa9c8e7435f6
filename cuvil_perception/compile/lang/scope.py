"""What every lowering module shares, and imports from here (never from `lower`): a run-time
variable (`Var`), the function being lowered (`Frame`) and the operator tables that map Python's
AST operators to the spellings `arith` and `folding` take.

Nothing here lowers anything; it imports no lowering module, so a lowering module importing it
closes no import circle.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from llvmlite import ir

from .source import Source
from .types import Scalar
from .values import BufRef


@dataclass
class Var:
    """A run-time local: its stack slot (mem2reg makes it SSA) and its type."""

    slot: ir.Value
    ty: Scalar
    line: int


@dataclass
class Frame:
    """One function being lowered: the kernel itself, or a helper inlined into it."""

    src: Source
    env: dict
    once: set                       # names assigned exactly once (may become constants)
    ret_ty: object = None           # Scalar, tuple of Scalars, or None (inferred for helpers)
    ret_slots: list | None = None   # helpers: where `return` stores
    exit: ir.Block | None = None    # helpers: where `return` jumps
    loops: list = field(default_factory=list)   # (continue block, break block)


#: ``a op b`` and ``a op= b``: the operator's spelling in `arith.binop` and `folding`.
BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
          ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
          ast.RShift: ">>", ast.Pow: "**"}

#: ``a < b`` and the other comparisons (``in``/``is`` are not kernel operators).
CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}

#: ``-a``, ``+a``, ``not a``, ``~a``: the spelling `folding` takes for constants.
UNARYOPS = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not", ast.Invert: "~"}


def named(value, name: str):
    """``value``; a `local` array or a `view` bound to ``name`` for the first time takes it as
    its name: a debug build's KernelIndexError says 'tmp', the name the user wrote, not the
    'local@12' the call made."""
    if isinstance(value, BufRef) and value.name.startswith(("local@", "view@")):
        return replace(value, name=name)
    return value
