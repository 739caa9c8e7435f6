"""The module-level values a kernel reads, as part of its identity.

A kernel reads a module-level name (``THRESH``, ``params.EPS``) as a compile-time constant. If
the program assigns it a new value after the kernel was first compiled (``mymod.THRESH =
0.7``), the next call must not run the code built for the old one, and the disk cache must not
file code built for the new value under the old one. So `Kernel.spec` puts the current values
of the names the kernel and the helpers it can reach refer to into the source digest: a changed
value is another kernel (compiled, or taken from the disk cache), the same value the same one.
The names are found once from the functions' code objects (``co_names``); reading their values
is a few dict lookups a call.

A helper or kernel defined where there is no source file (a notebook cell, ``exec``) has no
file for the source digest to hash, so the same goes for its source text: a cell that
redefines it is another kernel, not the machine code of the cell before (`fileless_source`).
"""

from __future__ import annotations

import functools
import inspect
import os
import types

import numpy as np


def is_constant(value) -> bool:
    """A value a kernel may read as a compile-time constant (numbers, strings, constant
    vectors, tuples of them)."""
    if isinstance(value, tuple):
        return all(is_constant(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, bytes, np.generic)) \
        or is_vector_constant(value)


def _key(value):
    """A constant as a hashable value that is equal exactly when the kernel it builds is: a
    vector by its dtype, shape and bytes (a 2-d array with a 1-d one's bytes is refused, not
    the 1-d one's code)."""
    if is_vector_constant(value):
        return ("vector", str(value.dtype), value.shape, value.tobytes())
    if isinstance(value, tuple):
        return tuple(_key(v) for v in value)
    return value


def is_vector_constant(value) -> bool:
    """A module-level `simd.Vector` (``simd.vector(f64, (0.5, -0.5))``), a constant vector."""
    from .simd import Vector

    return isinstance(value, Vector)


def reachable(fn) -> list:
    """``fn`` and the helpers and kernels it can call (through its globals and the modules it
    names), as functions, each once."""
    out, pending, seen = [], [fn], set()
    while pending:
        f = pending.pop()
        code = getattr(f, "__code__", None)
        if code is None or id(code) in seen:
            continue
        seen.add(id(code))
        out.append(f)
        for _, obj in _named(f):
            helper = getattr(obj, "py_func", obj)  # a Kernel calls its function
            if getattr(helper, "__cuvil_inline__", False) or hasattr(helper, "__cuvil_kernel__"):
                pending.append(helper)
    return out


def _named(f) -> list[tuple[tuple[dict, str], object]]:
    """((namespace, name), value) of the globals ``f`` names, and of the attributes named in
    its code of the modules among them (``params.EPS``)."""
    scope, names = f.__globals__, f.__code__.co_names
    out = []
    for name in names:
        value = scope.get(name)
        out.append(((scope, name), value))
        if isinstance(value, types.ModuleType):
            space = vars(value)
            out += [((space, attr), space[attr]) for attr in names if attr in space]
    return out


def referenced(fn) -> tuple[tuple[dict, str], ...]:
    """(namespace, name) of every global ``fn`` and the helpers it can reach refer to, and of
    the attributes named in their code of the modules they refer to (``params.EPS``)."""
    refs = {}
    for f in reachable(fn):
        for (scope, name), _ in _named(f):
            refs[id(scope), name] = (scope, name)
    return tuple(refs.values())


def current(refs: tuple[tuple[dict, str], ...]) -> tuple:
    """The constant values of ``refs`` now, as a hashable key ((name, value), ...)."""
    out = []
    for scope, name in refs:
        value = scope.get(name)
        if is_constant(value):  # (a vector's bytes: a few hundred ns, this runs every call)
            out.append((name, type(value).__name__, _key(value)))
            continue
        helper = getattr(value, "py_func", value)
        if getattr(helper, "__cuvil_inline__", False) or hasattr(helper, "__cuvil_kernel__"):
            text = fileless_source(helper.__code__)
            if text is not None:
                out.append((name, "source", text))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def fileless_source(code: types.CodeType) -> str | None:
    """The source text of a function whose file does not exist (a notebook cell, ``exec``),
    or None when it has a file (which the source digest hashes); once per code object."""
    if os.path.isfile(code.co_filename):
        return None
    try:
        return inspect.getsource(code)
    except (OSError, TypeError):
        return f"<no source: {code.co_filename}:{code.co_firstlineno}:{code.co_code.hex()}>"
