"""Numpy buffers for a kernel's arguments, shaped and typed by the kernel's own signature.

A binding that preallocates a kernel's buffers asks the spec for them instead of restating their
shapes and dtypes: ``allocate(spec, "voxels", align=64)`` is a zeroed array of the argument's
element type with the shape its documented signature states (``KernelSpec.arg_docs``: a
``@kernel``'s annotations and role markers), each dim evaluated over the spec's static params
and the ``sizes`` given by keyword (a scalar argument such as ``count=max_pillars``: the rows
the binding provides for).
"""

from __future__ import annotations

import numpy as np

from ..errors import CompileError
from .cheader import eval_dim
from .spec import KernelSpec


def allocate(spec: KernelSpec, name: str, *, fill=0, align: int = 0, **sizes) -> np.ndarray:
    """A C-contiguous array for ``spec``'s pointer argument ``name`` (module docstring), every
    element ``fill``. ``align``: the data starts on a multiple of that many bytes, and every page
    is written now (np.zeros maps pages lazily: the first call would otherwise page-fault
    through a large buffer inside a deadline). A dim the static params and ``sizes`` do not
    determine is a `CompileError` naming it (a bug in the binding, not a user error)."""
    arg = next((a for a in spec.arg_docs if a.name == name and a.kind == "ptr"), None)
    if arg is None:
        raise CompileError(f"kernel {spec.name} has no buffer argument {name!r}")
    env = {**spec.static, **sizes}
    shape = tuple(eval_dim(d, env) for d in arg.shape)
    if not shape or None in shape:
        raise CompileError(f"kernel {spec.name}: buffer {name!r} has shape {arg.shape}; give "
                           f"the sizes its dims name by keyword")
    dtype = np.dtype({"f": "float", "i": "int", "u": "uint"}[arg.dtype[0]] + arg.dtype[1:])
    if not align:
        return np.zeros(shape, dtype) if fill == 0 else np.full(shape, fill, dtype)
    size = int(np.prod(shape))
    raw = np.empty(size + align // dtype.itemsize, dtype)
    raw.fill(fill)
    skip = (-raw.ctypes.data % align) // dtype.itemsize
    return raw[skip:skip + size].reshape(shape)
