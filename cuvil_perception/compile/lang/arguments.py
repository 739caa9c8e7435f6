"""Checks of the arguments ``kernel(...)`` passes to compiled code (what numpy or Python would
have refused, the machine code cannot): the buffer's dtype, order, rank and shape; scalars of
the parameter's kind; a read-only array the kernel writes; and buffers sharing memory that a
``noalias`` kernel writes (LLVM assumes they do not, and vectorised code then gives other
numbers than the Python function); the alignment streaming stores need. Errors name the kernel
and the parameter."""

from __future__ import annotations

import numbers

import numpy as np

from .source import Source, fail
from .types import PARAM_KINDS, BufType, Scalar, resolve_dtype


def checked_arguments(k, spec, args: tuple) -> list:
    """The raw arguments (addresses, Python numbers) for the callable of kernel ``k``'s
    ``spec``, every check above made; the first failing one raises."""
    runtime = k.params()[0]
    if len(args) != len(runtime):
        raise TypeError(f"kernel {k.name} takes {len(runtime)} run-time arguments, "
                        f"got {len(args)}")
    keep, raw = [], []
    scalars = {p: check_scalar(k.name, p, t, a) for (p, t), a in zip(runtime, args)
               if not isinstance(t, BufType)}
    sizes = {**spec.static, **scalars}
    for (pname, ty), arg in zip(runtime, args):
        if isinstance(ty, BufType):
            ty = resolve_dtype(ty, spec.static)
            arr = check_buffer(k.name, pname, ty, arg, sizes)
            if not arr.flags.writeable and pname in k.written(spec):
                raise ValueError(f"kernel {k.name}: argument '{pname}' is a read-only "
                                 f"array and the kernel writes it; pass a writeable copy "
                                 f"(`{pname}.copy()`)")
            keep.append((pname, arr))
            raw.append(arr.ctypes.data)
        else:
            raw.append(scalars[pname])
    if k.noalias:
        check_aliasing(k.name, keep, lambda: k.written(spec))
    check_alignment(k.name, keep, k.stream_alignment(spec))
    return raw


def check_buffer(kname: str, pname: str, ty: BufType, arr, sizes: dict) -> np.ndarray:
    """``arr`` if it is a C-contiguous array of ``ty``'s dtype, rank and extents (``sizes``:
    the static and scalar values extents name), else a `TypeError`."""
    if not isinstance(arr, np.ndarray) or arr.dtype != ty.dtype.dtype \
            or not arr.flags.c_contiguous or arr.ndim != ty.rank:
        raise TypeError(f"kernel {kname}: argument '{pname}' must be a C-contiguous "
                        f"{ty.dtype.dtype} array of {ty.rank} axes, got "
                        f"{getattr(arr, 'dtype', type(arr).__name__)} "
                        f"{getattr(arr, 'shape', '')}")
    want = tuple(d if isinstance(d, int) or d is None else int(sizes[d]) for d in ty.dims)
    if any(w is not None and w != s for w, s in zip(want, arr.shape)):
        raise TypeError(f"kernel {kname}: argument '{pname}' has shape {arr.shape}, the kernel "
                        f"expects {tuple('?' if w is None else w for w in want)}")
    return arr


def check_scalar(kname: str, pname: str, ty: Scalar, value):
    """``value`` as the Python int or float a scalar parameter of type ``ty`` takes (from an
    int, or any real number for a float, numpy's included), else a `TypeError` naming the
    parameter (ctypes would say only "wrong type"); an int outside the type's range is a
    `ValueError`."""
    if ty.is_int and isinstance(value, numbers.Integral):
        low, high = -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
        if not low <= int(value) <= high:  # ctypes would wrap it silently
            raise ValueError(f"kernel {kname}: argument '{pname}' is {ty}; {int(value)} is "
                             f"outside its range [{low}, {high}]")
        return int(value)
    if ty.is_float and isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"kernel {kname}: argument '{pname}' is {ty}, got "
                    f"{type(value).__name__} {value!r}")


def overlapping(named: list[tuple[str, np.ndarray]]) -> list[tuple[str, str]]:
    """Pairs of names whose arrays' memory ranges overlap (empty arrays never do)."""
    spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes, name)
                   for name, a in named if a.nbytes)
    pairs = []
    for k, (start, _, name) in enumerate(spans):
        pairs += [(other, name) for _, end, other in spans[:k] if start < end]
    return pairs


def check_aliasing(kname: str, named: list[tuple[str, np.ndarray]], written) -> None:
    """A `ValueError` when two buffers of a ``noalias`` kernel share memory and it writes one
    (``written()``: the names it writes, computed only when an overlap is found)."""
    pairs = overlapping(named) if len(named) > 1 else []
    if not pairs:
        return
    names = written()
    for a, b in pairs:
        if a in names or b in names:
            raise ValueError(f"kernel {kname}: arguments '{a}' and '{b}' share memory and the "
                             f"kernel writes one; its buffers are noalias (compiled code "
                             f"assumes they do not overlap): pass separate arrays, or declare "
                             f"@kernel(noalias=False)")


def plain_static(value):
    """A static value with numpy scalars as the Python numbers they hold (``nx=np.int64(70)``,
    ``cell=np.float32(0.2)``: JSON, and so a spec's identity, takes only Python's)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list)):
        return type(value)(plain_static(v) for v in value)
    return value


def check_alignment(kname: str, named: list[tuple[str, np.ndarray]], need: dict) -> None:
    """A `ValueError` when an array the kernel stream-stores into does not start at a multiple
    of the store's size (``need``: name -> bytes). numpy aligns arrays to 16 bytes only, and a
    64-byte non-temporal store at a misaligned address is a segfault, not an exception."""
    for name, arr in named:
        align = need.get(name, 1)
        if arr.ctypes.data % align:
            raise ValueError(f"kernel {kname}: argument '{name}' starts at address mod {align} "
                             f"= {arr.ctypes.data % align}; the kernel's streaming stores into "
                             f"it need {align}-byte alignment: pass an array that starts "
                             f"{align}-byte aligned (a slice of a larger one)")


def buffer_type(fn, name: str, ty: BufType, static: dict) -> BufType:
    """``ty`` with a dtype named by a static parameter (``Buf["gty", 4]``) resolved; a name
    that is not a static parameter of ``fn``, or one whose value is not a buffer type's name,
    is a `KernelSourceError` at the parameter's annotation."""
    try:
        return resolve_dtype(ty, static)
    except TypeError as exc:
        src = Source.of(fn)
        node = next((a.annotation for a in src.tree.args.args if a.arg == name), src.tree)
        if ty.dtype not in static:
            fail(src, node, f"buffer '{name}': its dtype names '{ty.dtype}', which is not a "
                 f"static parameter", f"`*, {ty.dtype}: str` after the run-time parameters "
                 f"(and `{ty.dtype}=\"f32\"` in the call), or a type, `Buf[f32, ...]`")
        fail(src, node, f"buffer '{name}': {exc}", f"`{ty.dtype}=\"f32\"` (a type name)")
