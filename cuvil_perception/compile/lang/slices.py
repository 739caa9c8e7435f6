"""Buffer slices uncompiled: a read ``buf[i, a:b]`` must be a value, as compiled.

numpy slicing gives a *view*: bound to a name, it would follow later writes to ``buf``, and an
expression of views (``buf[i, :] * 2.0``) is a plain array that ``acc += v`` changes in place
under every other name bound to it. Compiled, both are vectors (values). So the function a
kernel or a helper runs uncompiled (``kernel.py_func``) is the user's function with each slice
read wrapped in `as_value` (a `simd.Vector` copy; vectors' in-place operators make new
vectors). Only functions that use a slice are rebuilt; the rebuilt one has the same file,
line numbers, globals, defaults and annotations (tracebacks and debuggers show the user's
source), and ``__wrapped__`` is the original (``inspect`` reads its source and signature).
Slice *stores* (``out[p, :] = v``) are left to numpy: they write the buffer in both modes.
An ``op=`` on a slice, ``out[p, :] += v``, reads its lanes before ``v`` is evaluated (Python's
order); numpy's read would be a view, so a ``v`` that writes those lanes (a helper's store) would
show through it. Its target is wrapped in `Lanes`, whose read is a `Current` copy: the lanes as
they were, as compiled. A tuple on the right (``+= (x, y)``) becomes the lanes of the buffer's
type, as compiled (numpy would add it as f64 and round the sum twice).

An element store ``out[i] = v`` wraps ``v`` to the element's type as compiled (numpy's
``astype``); numpy's ``__setitem__`` raises OverflowError for a Python int out of range (and for
a numpy int out of range of an ``i8`` or ``i16`` buffer). So the target buffer of every store is
wrapped in `Stores`, whose writes go through `stored`; a function that stores elements is rebuilt
for it.

A kernel's scalar arguments are cast to their declared types on entry (`as_param`: an ``f32``
parameter is a ``numpy.float32``, as compiled, not the caller's float64 ``0.1``), so the
function of a kernel with a scalar parameter is rebuilt too.

numpy also clamps a slice to the array (``x[k:k + 4]`` near the end gives fewer elements, a
negative ``k`` counts from the end), where the compiled code takes every lane (a debug build
raises `KernelIndexError`). So the index of every slice, read or stored, goes through
`checked_index`, which raises `IndexError` for a lane outside its axis, as `simd.load` does.

A ``for i in prange(...)`` loop runs its chunks in order, each reduction into its own partial
combined in the compiled tree order (`prange.Rewrite`), so float sums have the compiled bits.
"""

from __future__ import annotations

import __future__
import ast
import copy
import dis
import functools
import numbers

import numpy as np

from ...errors import KernelSourceError
from . import prange
from .simd import Vector
from .slice_lower import is_slice
from .source import Source
from .types import PARAM_KINDS, Scalar

_VALUE = "__cuvil_slice_value__"
_INDEX = "__cuvil_slice_index__"
_SLICE = "__cuvil_slice__"  # the builtin `slice` (the kernel's module may shadow the name)
_LANES = "__cuvil_slice_lanes__"
_STORES = "__cuvil_stores__"
_PARAM = "__cuvil_param__"
# the rebuilt function's closure (with `prange.HOOKS`: a prange loop's chunks, partials, tree)
_HOOKS = (_VALUE, _INDEX, _SLICE, _LANES, _STORES, _PARAM, *prange.HOOKS)
_SLICE_OPS = {"BUILD_SLICE", "BINARY_SLICE", "STORE_SLICE"}
_REBUILT_OPS = _SLICE_OPS | {"STORE_SUBSCR"}


def as_value(x):
    """A slice read uncompiled: a `simd.Vector` copy of a numpy view (anything else as is)."""
    return np.array(x, copy=True).view(Vector) if isinstance(x, np.ndarray) else x


def checked_index(buf, key, text: str):
    """``key`` (the index of ``text``, a slice of ``buf``), once every lane of its slice lies
    inside its axis: ``start >= 0`` and ``start + (lanes - 1) * step < extent``, with the lane
    count the compiled code takes from the bounds (``k:k + 4`` is 4 lanes, wherever ``k`` is),
    and neither bound is negative (``-4:`` counts from the end in numpy only)."""
    shape = np.shape(buf)
    for axis, item in enumerate(key if isinstance(key, tuple) else (key,)):
        if not isinstance(item, slice) or axis >= len(shape):
            continue  # (a non-array is numpy's to refuse)
        start, step = item.start or 0, item.step or 1
        if item.stop is None or item.stop < 0:  # (`:` and `a:` end at the extent)
            if start < 0 or item.stop is not None:  # (`-4:`, `0:-1`: compiled refuses them)
                raise IndexError(f"`{text}`: a negative bound on axis {axis} counts from the "
                                 "end in numpy, not in a compiled kernel")
            continue
        last = start + (-((start - item.stop) // step) - 1) * step
        if start < 0 or last >= shape[axis]:
            raise IndexError(f"`{text}`: elements {start} to {last} (step {step}) out of range "
                             f"for axis {axis} (extent {shape[axis]})")
    return key


def _taking_tuples(name: str):
    """`Vector`'s in-place operator ``name``, with a tuple operand made lanes of ``self``'s
    dtype first."""
    def operator(self, other):
        if isinstance(other, (tuple, list)):
            other = np.array(other, self.dtype)
        return getattr(Vector, name)(self, other)
    operator.__name__ = name
    return operator


class Current(Vector):
    """The lanes an ``op=`` on a slice read: a `Vector` whose in-place operators take a tuple
    as lanes of its own dtype."""

    __iadd__, __isub__ = _taking_tuples("__iadd__"), _taking_tuples("__isub__")
    __imul__, __itruediv__ = _taking_tuples("__imul__"), _taking_tuples("__itruediv__")
    __iand__, __ior__ = _taking_tuples("__iand__"), _taking_tuples("__ior__")
    __ixor__ = _taking_tuples("__ixor__")


class Lanes:
    """The target of ``buf[key] op= v`` uncompiled: reads ``buf[key]`` as a `Current` copy,
    writes to ``buf``."""

    def __init__(self, buf):
        self.buf = buf

    def __getitem__(self, key):
        return np.array(self.buf[key], copy=True).view(Current)

    def __setitem__(self, key, value):
        self.buf[key] = value


def stored(buf, value):
    """``value`` as an element of ``buf`` holds it compiled: an int truncated to the element's
    bits (two's complement, as numpy's ``astype``: 300 into a u8 is 44, 200 into an i8 -56)."""
    dtype = getattr(buf, "dtype", None)
    if dtype is None or dtype.kind not in "iu" or isinstance(value, (bool, np.bool_)) \
            or not isinstance(value, (int, np.integer)):
        return value
    bits = 8 * dtype.itemsize
    return np.array(int(value) & ((1 << bits) - 1), f"u{dtype.itemsize}").view(dtype)[()]


def as_param(ty, value):
    """A kernel's scalar argument as compiled code takes it: ``ty(value)``, a numpy scalar of
    the declared type (an ``f32`` rounds once, on entry), for an int or a float of a float
    type; anything else as is (the compiled kernel refuses it)."""
    if isinstance(ty, Scalar) and ty in PARAM_KINDS and isinstance(value, numbers.Real) \
            and (ty.is_float or isinstance(value, numbers.Integral)):
        return ty(value)
    return value


class Stores:
    """The target of ``buf[key] = v`` uncompiled: writes `stored` ``v`` to ``buf``, reads
    ``buf[key]`` (for ``buf[key] op= v``)."""

    def __init__(self, buf):
        self.buf = buf

    def __getitem__(self, key):
        return self.buf[key]

    def __setitem__(self, key, value):
        self.buf[key] = stored(self.buf, value)


class _WrapReads(ast.NodeTransformer):
    def __init__(self):
        self.found = False

    def visit_AugAssign(self, node: ast.AugAssign):
        sliced = isinstance(node.target, ast.Subscript) and is_slice(node.target)
        self.generic_visit(node)
        if sliced:  # (the target's value, a name, is evaluated once more by its checked index)
            target = node.target
            target.value = ast.copy_location(
                ast.Call(ast.Name(_LANES, ast.Load()), [_as_load(target.value)], []), target)
        return node

    def visit_Subscript(self, node: ast.Subscript):
        self.generic_visit(node)
        if not is_slice(node):
            return self._store(node)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        self.found = True
        text = ast.unparse(node)
        key = [ast.Call(ast.Name(_SLICE, ast.Load()), [i.lower or ast.Constant(None),
                                                       i.upper or ast.Constant(None),
                                                       i.step or ast.Constant(None)], [])
               if isinstance(i, ast.Slice) else i for i in items]
        key = ast.Tuple(key, ast.Load()) if isinstance(node.slice, ast.Tuple) else key[0]
        node.slice = ast.Call(ast.Name(_INDEX, ast.Load()), [
            _as_load(node.value), key, ast.Constant(text)], [])
        for new in ast.walk(node.slice):  # (a traceback shows the slice's own line)
            if "lineno" in new._attributes and not hasattr(new, "lineno"):
                ast.copy_location(new, node)
        if not isinstance(node.ctx, ast.Load):
            return self._store(node)  # numpy writes the buffer
        call = ast.Call(ast.Name(_VALUE, ast.Load()), [node], [])
        return ast.copy_location(call, node)

    def _store(self, node: ast.Subscript) -> ast.Subscript:
        """A store's target buffer wrapped in `Stores` (a load as is)."""
        if isinstance(node.ctx, ast.Store):
            self.found = True
            node.value = ast.copy_location(
                ast.Call(ast.Name(_STORES, ast.Load()), [_as_load(node.value)], []), node)
        return node


def _as_load(node: ast.expr) -> ast.expr:
    node = copy.deepcopy(node)
    for sub in ast.walk(node):
        if hasattr(sub, "ctx"):
            sub.ctx = ast.Load()
    return node


def _has_slices(code) -> bool:
    """Whether the bytecode stores an element, builds a slice or loads a constant one (cheap:
    parsing the source of every kernel at import would cost ~2 ms each). Python 3.14 folds
    constant bounds into the code's constants (``x[0, 0:4]`` loads ``(0, slice(0, 4,
    None))``): no slice opcode."""
    return any(ins.opname in _REBUILT_OPS for ins in dis.get_instructions(code)) \
        or any(_holds_slice(c) for c in code.co_consts)


def _holds_slice(const) -> bool:
    if isinstance(const, tuple):
        return any(_holds_slice(c) for c in const)
    return isinstance(const, slice)


def _scalar_params(fn) -> bool:
    """Whether ``fn`` annotates a parameter with a scalar type (``f32``, not ``Buf[...]``)."""
    return any(isinstance(ty, Scalar) or isinstance(ty, str) and "[" not in ty
               for name, ty in fn.__annotations__.items() if name != "return")


def _cast_params(tree: ast.FunctionDef) -> bool:
    """Prepend ``a = as_param(<a's annotation>, a)`` for every parameter annotated with a
    name (a scalar type; ``Buf[...]`` is a subscript); whether there was one."""
    casts = [ast.Assign([ast.Name(a.arg, ast.Store())], ast.Call(
        ast.Name(_PARAM, ast.Load()), [_as_load(a.annotation), ast.Name(a.arg, ast.Load())], []))
        for a in tree.args.args if isinstance(a.annotation, (ast.Name, ast.Attribute))]
    tree.body[:0] = [ast.copy_location(c, tree) for c in casts]
    return bool(casts)


def value_slices(fn, params: bool = False):
    """``fn``, or a rebuilt copy whose slice reads are values and whose element stores wrap,
    and with ``params`` (a kernel's function) whose scalar arguments are cast to their types
    (see the module docstring)."""
    cast = params and _scalar_params(fn)
    parallel = "prange" in fn.__code__.co_names
    if fn.__code__.co_freevars or not (cast or parallel or _has_slices(fn.__code__)):
        return fn  # (a closure cannot compile: kernels resolve module globals only)
    try:
        src = Source.of(fn)
    except KernelSourceError:  # no source: the compiler says so when the kernel is built
        return fn
    tree = copy.deepcopy(src.tree)
    tree.decorator_list = []
    wrap = _WrapReads()
    tree = wrap.visit(tree)
    chunked = prange.Rewrite(tree)
    tree = chunked.visit(tree) if parallel else tree
    if not (cast and _cast_params(tree)) and not wrap.found and not chunked.found:
        return fn
    # A factory binds the wrapper as a closure cell: the module's globals stay untouched.
    factory = ast.FunctionDef(
        name="__cuvil_factory__", args=ast.arguments(
            posonlyargs=[], args=[ast.arg(a) for a in _HOOKS], kwonlyargs=[], kw_defaults=[],
            defaults=[]), body=[tree, ast.Return(ast.Name(tree.name, ast.Load()))],
        decorator_list=[])
    for node in ast.walk(factory):  # new nodes sit on the def line; end columns are not
        if "lineno" in node._attributes:  # shifted like `Source` shifts starts: drop them
            if not hasattr(node, "lineno"):
                ast.copy_location(node, tree)
            node.end_lineno = node.end_col_offset = None
    module = ast.Module(body=[factory], type_ignores=[])
    code = compile(module, src.file, "exec", dont_inherit=True,
                   flags=__future__.annotations.compiler_flag)
    scope: dict = {}
    exec(code, fn.__globals__, scope)  # noqa: S102 - the user's own kernel source
    rebuilt = scope["__cuvil_factory__"](as_value, checked_index, slice, Lanes, Stores,
                                         as_param, *prange.HOOKS.values())
    functools.update_wrapper(rebuilt, fn)
    rebuilt.__cuvil_prange__ = chunked.found
    rebuilt.__kwdefaults__, rebuilt.__defaults__ = fn.__kwdefaults__, fn.__defaults__
    return rebuilt


__all__ = ["as_param", "as_value", "checked_index", "stored", "value_slices"]
