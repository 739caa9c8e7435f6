"""FMA without a libm call: ``llvm.fma`` split into a multiply and an add where the target has
no fused multiply-add instruction.

Why: LLVM lowers ``llvm.fma`` on a CPU without FMA (x86-64 before Haswell / Zen 1, e.g. the
``x86-64-v2`` baseline) to a call of the C library's ``fmaf`` per lane: PFN's 832 calls a pillar
made it 51.3 ms against 0.94 ms on a 7,935-pillar frame (AMD EPYC Zen 4, x86-64-v2 vs znver4
code). Exactness is not what the kernels use FMAs for (they want one instruction per
multiply-add), so there the product and the sum round separately: results move by at most one
rounding per step, inside every kernel's documented tolerance (PFN rtol 1e-5, atol 1e-6 x the
largest feature; tests/test_library_abi.py holds an x86-64-v2 build to it).

How: each ``llvm.fma.<type>`` the module declares becomes a module-internal ``alwaysinline``
function of the same type doing ``fmul`` then ``fadd`` (no fast-math flags, so LLVM never
contracts them back), and the calls are renamed to it; O3 inlines it. ``llvm.fmuladd`` needs
nothing: the backend splits it itself where there is no FMA.
"""

from __future__ import annotations

import functools
import re

import llvmlite.binding as llvm

from .target import Target

# declare <ret type> @"llvm.fma.<suffix>"(...) or @llvm.fma.<suffix>(...)
_DECLARE = re.compile(r'^declare (?:[a-z_]+ )*(?P<ty>.+?) @"?llvm\.fma\.(?P<suffix>[\w.]+?)"?\(.*$',
                      re.M)
_PROBE = """
declare float @llvm.fma.f32(float, float, float)
define float @probe(float %a, float %b, float %c) {
  %r = call float @llvm.fma.f32(float %a, float %b, float %c)
  ret float %r
}
"""


@functools.lru_cache(maxsize=16)
def has_native_fma(target: Target) -> bool:
    """True when ``target`` (triple, CPU, features) computes ``llvm.fma.f32`` in an instruction
    rather than a call of ``fmaf`` (asked of LLVM itself: no CPU table to keep)."""
    module = llvm.parse_assembly(_PROBE)
    module.triple = target.triple
    asm = target.machine().emit_assembly(module)
    return re.search(r"\bfmaf\b", asm) is None


def split_fma(ir_text: str) -> str:
    """``ir_text`` with every ``llvm.fma`` replaced by a multiply then an add (module docstring)."""
    defined = []
    for found in _DECLARE.finditer(ir_text):
        ty, suffix = found.group("ty"), found.group("suffix")
        name = f'"cuvil.split_fma.{suffix}"'
        defined.append(f"define internal {ty} @{name}({ty} %a, {ty} %b, {ty} %c) alwaysinline {{\n"
                       f"  %p = fmul {ty} %a, %b\n  %s = fadd {ty} %p, %c\n  ret {ty} %s\n}}")
        ir_text = ir_text.replace(found.group(0), "")
        ir_text = re.sub(rf'@"?llvm\.fma\.{re.escape(suffix)}"?(?=\()', f"@{name}", ir_text)
    return ir_text + "\n" + "\n\n".join(defined) + "\n" if defined else ir_text


def without_libm_fma(ir_text: str, target: Target) -> str:
    """``ir_text`` as it is when the target has FMA (or the IR uses none), else `split_fma`."""
    if "llvm.fma." not in ir_text or has_native_fma(target):
        return ir_text
    return split_fma(ir_text)
