"""`compile.elf_map`: cached objects mapped without LLVM run exactly as MCJIT maps them, and
what it does not take is refused before anything runs (the loader then uses MCJIT)."""

from __future__ import annotations

import platform

import numpy as np
import pytest

from cuvil_perception.compile import elf_map, host_target, loader, registry
from cuvil_perception.compile.codegen import compile_ir
from cuvil_perception.compile.lang import Buf, f32, i32, kernel, kmath

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64" or platform.system() != "Linux",
                                reason="elf_map maps x86-64 Linux objects")


@kernel(name="t.elf_polar")
def polar(p: Buf[f32, "n", 2], out: Buf[f32, "n", 2], *, n: int):
    """libm calls (PLT32 to a stub) and constant pools (PC32 into .rodata)."""
    for i in range(n):
        out[i, 0] = kmath.atan2(p[i, 1], p[i, 0]) * 0.3183099
        out[i, 1] = kmath.sqrt(p[i, 0] * p[i, 0] + p[i, 1] * p[i, 1]) + 0.25


@kernel(name="t.elf_fill")
def fill(img: Buf[i32, "h", "w"], *, h: int, w: int):
    """A whole-array fill (memset) and a counted loop."""
    img[:, :] = 0
    for r in range(h):
        img[r, r % w] = r + 7


def _run_both(monkeypatch, call):
    """``call()``'s result with the kernels mapped by elf_map, then by MCJIT."""
    out = []
    for use_elf in (True, False):
        monkeypatch.setattr(loader, "_ELF_MAP", use_elf)
        registry.clear_memory()
        polar._entries.clear()
        fill._entries.clear()
        out.append(call())
    return out


def test_mapped_kernels_equal_mcjit_bitwise(cache_dir, monkeypatch):
    rng = np.random.default_rng(3)
    pts = rng.standard_normal((1000, 2)).astype(np.float32) * 50

    def call():
        o = np.zeros((1000, 2), np.float32)
        polar(pts, o)
        img = np.full((37, 29), -5, np.int32)
        fill(img)
        engines = {type(get.engine) for get in (registry.get_kernel(polar.spec(n=1000)),
                                                registry.get_kernel(fill.spec(h=37, w=29)))}
        return o.tobytes(), img.tobytes(), engines

    (a_o, a_img, a_kind), (b_o, b_img, b_kind) = _run_both(monkeypatch, call)
    assert a_kind == {elf_map.Image} and elf_map.Image not in b_kind
    assert a_o == b_o and a_img == b_img


def test_unknown_external_or_foreign_object_is_refused():
    ir = """
    declare void @cuvil_test_no_such_symbol()
    define void @cuvil_t_calls() {
      call void @cuvil_test_no_such_symbol()
      ret void
    }"""
    obj = compile_ir(ir, host_target()).obj
    with pytest.raises(elf_map.Unsupported, match="cuvil_test_no_such_symbol"):
        elf_map.map_objects([obj])
    with pytest.raises(elf_map.Unsupported):
        elf_map.map_objects([b"not an object"])
    ok = compile_ir("define i32 @cuvil_t_seven() {\n  ret i32 7\n}", host_target()).obj
    with pytest.raises(elf_map.Unsupported):
        elf_map.map_objects([ok[:100]])  # the header names section headers that are cut off
    image = elf_map.map_objects([ok])
    assert image.get_function_address("cuvil_t_seven") and \
        not image.get_function_address("absent")
