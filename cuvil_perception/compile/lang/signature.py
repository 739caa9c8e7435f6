"""A kernel's documented signature: the `Arg` of each run-time parameter, read from its annotation.

The type gives the name, the ABI kind, a buffer's element type and its extents (an open extent
is written ``?``); the role marker (`markers`) the role, unit, doc, a documented shape and a
scalar's largest value. The spec carries the result (``KernelSpec.arg_docs``), from which
``compile --library`` writes the C header (`cheader`), the entry points' checks (`cabi`) and the
library's manifest (`library`). A marker that contradicts its type is a `KernelSourceError` at
the parameter's annotation.
"""

from __future__ import annotations

from ..cheader import eval_dim
from ..spec import Arg
from .arguments import buffer_type
from .markers import Role
from .source import Source, fail
from .types import BY_NAME, PARAM_KINDS, BufType, resolve_dtype


def kernel_args(runtime: list, roles: tuple, static: dict, fn=None) -> tuple[Arg, ...]:
    """The `Arg` of each run-time parameter ``(name, Scalar | BufType)`` with its role marker
    (None: documented from the type alone) for the static values ``static``. ``fn``: the
    kernel's function, where a dtype naming a static parameter that is missing or holds no type
    name, or a marker that does not fit its type, is a compile error."""
    docs = []
    for (name, ty), role in zip(runtime, roles or (None,) * len(runtime)):
        if isinstance(ty, BufType):
            ty = buffer_type(fn, name, ty, static) if fn is not None else resolve_dtype(ty, static)
            dims = tuple("?" if d is None else d for d in ty.dims)
            if role is None:
                docs.append(Arg(name, "ptr", ty.dtype.name, dims, role="inout"))
                continue
            _check_buffer(fn, name, ty, role, static)
            if role.shape is not None:
                dims = role.shape
            elif role.rows is not None:
                dims = (role.rows,) + dims[1:]
            docs.append(Arg(name, "ptr", role.dtype or ty.dtype.name, dims, role.unit,
                            role.role, role.doc))
        elif role is None:
            docs.append(Arg(name, PARAM_KINDS[ty]))
        else:
            _check_scalar(fn, name, ty, role)
            docs.append(Arg(name, PARAM_KINDS[ty], unit=role.unit, doc=role.doc, most=role.most))
    return tuple(docs)


def _check_buffer(fn, name: str, ty: BufType, role: Role, static: dict) -> None:
    if role.most is not None:
        _fail(fn, name, f"buffer '{name}': most= bounds a scalar", "shape= or rows=")
    other = BY_NAME.get(role.dtype) if role.dtype is not None else ty.dtype
    if other is None or other.kind == "b" or other.bits != ty.dtype.bits:
        _fail(fn, name, f"buffer '{name}': dtype={role.dtype!r} is not a buffer type of "
              f"{ty.dtype}'s size", f"a type of {ty.dtype.bits} bits (u64 for i64) or no dtype=")
    if role.rows is not None and ty.dims[0] is not None:
        _fail(fn, name, f"buffer '{name}': rows= sizes an open first extent (None), and its "
              f"first extent is {ty.dims[0]!r}", f"`Buf[{ty.dtype}, None, ...]`")
    if role.shape is None:
        return
    stated, given = _elements(ty.dims, static), _elements(role.shape, static)
    if stated is not None and given is not None and stated != given:
        _fail(fn, name, f"buffer '{name}': shape={role.shape!r} holds {given} elements, the "
              f"annotation's extents {stated}", "a shape of the same size")


def _check_scalar(fn, name: str, ty, role: Role) -> None:
    if role.role != "in":
        _fail(fn, name, f"scalar '{name}' is passed by value: its role is In",
              f"`{ty}[In(unit, doc)]`")
    if role.rows is not None or role.shape is not None or role.dtype is not None:
        _fail(fn, name, f"scalar '{name}': rows=, shape= and dtype= describe buffers",
              "most= or nothing")
    if role.most is not None and not ty.is_int:
        _fail(fn, name, f"scalar '{name}': most= bounds an int scalar", "no most=")


def _elements(dims: tuple, static: dict) -> int | None:
    """Elements of a shape whose every extent is static, else None."""
    total = 1
    for d in dims:
        value = None if d is None else eval_dim(d, static)
        if value is None:
            return None
        total *= value
    return total


def _fail(fn, name: str, message: str, instead: str) -> None:
    if fn is None:
        raise TypeError(message)
    src = Source.of(fn)
    node = next((a.annotation for a in src.tree.args.args if a.arg == name), src.tree)
    fail(src, node, message, instead)
