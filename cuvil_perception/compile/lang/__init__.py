"""The kernel language: native kernels written as typed Python, compiled from their AST.

    from cuvil_perception.compile.lang import Buf, f32, i64, kernel, kmath

    @kernel
    def scale(x: Buf[f32, "n"], y: Buf[f32, "n"], a: f32, *, n: int):
        for i in range(n):
            y[i] = kmath.sqrt(x[i]) * a

Modules: `types` (scalars, ``Buf``, ``Vec``, ``local``, ``view``), `source` (AST with file
positions, errors), `values` / `arith` (typed values, Python-semantics arithmetic), `names`
(which names are assigned once), `expr` / `lower` / `calls` / `math_lower` / `simd_lower` /
`vector_lower` / `lane_lower` / `slice_lower` / `loop_lower` / `prange_lower` /
`atomic_lower` (AST -> llvmlite IR), `prange` (parallel loops: chunks, reductions, uncompiled),
`parallel` / `pool_ir` (the threads they run on), `kmath`
(the math module), `simd` (explicit vector memory operations and vector values), `slices`
(uncompiled slice reads as values), `kernel` (``@kernel``, specs, running), `markers` /
`signature` (role markers ``In Out InOut State Scratch`` in the annotations: the kernel's
documented signature, which library headers are written from).
Semantics that differ from Python are listed in `arith` (integer wrap-around, division by
zero) and `calls` (min/max with NaN); the language reference is docs/kernel-language.md.
"""

from __future__ import annotations

from . import kmath, simd
from .atomic_lower import atomic_add, atomic_max, atomic_min
from .calls import bits, inline, unroll
from .kernel import Kernel, kernel
from .markers import In, InOut, Out, Scratch, State
from .parallel import threads
from .prange import prange
from .types import (BOOL, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, Buf, BufType, Scalar,
                    Vec, VecType, address, local, select, view)

boolean, f32, f64, i8, i16, i32, i64 = BOOL, F32, F64, I8, I16, I32, I64
u8, u16, u32, u64 = U8, U16, U32, U64

__all__ = ["Buf", "BufType", "In", "InOut", "Kernel", "Out", "Scalar", "Scratch", "State",
           "address", "atomic_add", "atomic_max", "atomic_min", "bits", "boolean", "f32", "f64",
           "i8", "i16", "i32", "i64", "inline", "kernel", "kmath", "local", "prange", "select",
           "simd", "threads", "u8", "u16", "u32", "u64", "unroll", "Vec", "VecType", "view"]
