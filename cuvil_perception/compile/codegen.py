"""Step 2 of 3, compile: IR text -> optimised module -> object-file bytes (and, on request, the
optimised IR and assembly text for ``CUVIL_DUMP_IR``)."""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.binding as llvm

from ..errors import CompileError
from .fma_split import without_libm_fma
from .optimize import DEFAULT_OPTIONS, OptOptions, optimize
from .target import Target, ensure_llvm


@dataclass(frozen=True)
class Compiled:
    """Result of one LLVM compilation. ``obj`` is a relocatable ELF object for ``target``."""

    obj: bytes
    optimized_ir: str | None = None
    asm: str | None = None


def compile_ir(ir_text: str, target: Target, name: str = "<kernel>",
               opts: OptOptions = DEFAULT_OPTIONS, want_text: bool = False) -> Compiled:
    """Parse, verify, optimise and emit ``ir_text`` for ``target``.

    ``want_text`` also returns the optimised IR and the assembly (costs a second code-gen pass).
    Raises `CompileError` naming ``name`` when the IR does not parse or verify. A target
    without FMA gets ``llvm.fma`` as a multiply and an add, never a libm call (`fma_split`).
    Not thread-safe on its own: callers serialise compilations (see `registry`).
    """
    ensure_llvm()
    tm = target.machine(opt=min(opts.speed_level, 3))
    try:
        mod = llvm.parse_assembly(without_libm_fma(ir_text, target))
        mod.triple = target.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
    except RuntimeError as exc:
        raise CompileError(f"kernel {name}: invalid IR: {exc}") from exc
    optimize(mod, tm, opts)
    obj = tm.emit_object(mod)
    if not want_text:
        return Compiled(obj=obj)
    return Compiled(obj=obj, optimized_ir=str(mod), asm=tm.emit_assembly(mod))
