"""IR helpers and example kernels against their numpy references (random and real data)."""

from __future__ import annotations

import numpy as np
import pytest

from cuvil_perception.compile import get_kernel, host_target
from cuvil_perception.compile import examples as ex
from cuvil_perception.compile.codegen import compile_ir
from cuvil_perception.compile.render_ir import render
from cuvil_perception.compile.target import host_has

# The documented bounds (irutil module docstring).
EXP_MAX_REL = 1.5e-7
SIGMOID_MAX_ABS = 1e-7
SIGMOID_MAX_REL = 2e-7
SUBNORMAL_ULP = 2.0 ** -149


def _map(spec, x: np.ndarray) -> np.ndarray:
    """Run a map kernel (``n`` static) over ``x`` of any length, chunk by chunk."""
    n = spec.static["n"]
    k = get_kernel(spec)
    pad = np.zeros(-len(x) % n, np.float32)
    xs = np.ascontiguousarray(np.concatenate([x.astype(np.float32), pad]))
    ys = np.empty_like(xs)
    for start in range(0, len(xs), n):
        k(xs[start:].ctypes.data, ys[start:].ctypes.data)
    return ys[: len(x)]


EXP_BIG = ex.EXP_MAP.with_static(n=1 << 16)
SIG_BIG = ex.SIGMOID_MAP.with_static(n=1 << 16)


def test_vexp_relative_error_over_normal_range():
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-87.33, 88.72, 1 << 20, dtype=np.float32),
                        rng.uniform(-87.33, 88.72, 1 << 20).astype(np.float32),
                        rng.uniform(-1, 1, 1 << 16).astype(np.float32)])
    got = _map(EXP_BIG, x).astype(np.float64)
    ref = np.exp(x.astype(np.float64))
    rel = np.abs(got - ref) / ref
    assert rel.max() <= EXP_MAX_REL, f"max rel error {rel.max():.3g} at x={x[rel.argmax()]}"


def test_vexp_subnormal_and_saturation():
    x = np.linspace(-103.97, -87.34, 100_000, dtype=np.float32)
    got = _map(EXP_BIG, x).astype(np.float64)
    assert np.abs(got - np.exp(x.astype(np.float64))).max() <= SUBNORMAL_ULP
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -104.0, -500.0, 88.73, 1e30], np.float32)
    got = _map(EXP_BIG, special)
    assert got[0] == np.inf and got[1] == 0.0 and np.isnan(got[2]) and got[3] == 1.0
    assert got[4] == 0.0 and got[5] == 0.0 and got[6] == np.inf and got[7] == np.inf


def test_sigmoid_error_over_wide_range():
    x = np.linspace(-100, 100, 1 << 20, dtype=np.float32)
    got = _map(SIG_BIG, x).astype(np.float64)
    ref = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    assert np.abs(got - ref).max() <= SIGMOID_MAX_ABS
    normal = x >= -87
    rel = np.abs(got[normal] - ref[normal]) / ref[normal]
    assert rel.max() <= SIGMOID_MAX_REL
    special = _map(SIG_BIG, np.array([np.inf, -np.inf, np.nan, 0.0, -89.0], np.float32))
    assert special[0] == 1.0 and special[1] == 0.0 and np.isnan(special[2])
    assert special[3] == 0.5 and special[4] == 0.0


def test_example_kernels_match_reference_on_random_data():
    rng = np.random.default_rng(1)
    n = ex.AXPY.static["n"]
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    y_ref = y.copy()
    get_kernel(ex.AXPY)(x.ctypes.data, y.ctypes.data, 0.75)
    ex.axpy_ref(x, y_ref, 0.75)
    np.testing.assert_allclose(y, y_ref, rtol=1e-6, atol=1e-6)
    s = rng.uniform(-1, 1, ex.SUM.static["n"]).astype(np.float32)
    assert get_kernel(ex.SUM)(s.ctypes.data) == pytest.approx(ex.sum_ref(s), abs=1e-3)
    acc = np.zeros(ex.EXP_ACCUMULATE.static["n"], np.float32)
    acc_ref = acc.copy()
    e = rng.uniform(-5, 5, acc.size).astype(np.float32)
    get_kernel(ex.EXP_ACCUMULATE)(e.ctypes.data, acc.ctypes.data, 3)
    ex.exp_accumulate_ref(e, acc_ref, 3)
    np.testing.assert_allclose(acc, acc_ref, rtol=1e-6)


def test_example_kernels_match_reference_on_kitti_points(kitti_frames):
    # The float32 references are themselves rounded (0.5 ulp = 3e-8 relative), hence the margin.
    tol = 6e-8
    pts = np.fromfile(kitti_frames[0], dtype=np.float32).reshape(-1, 4)
    for column in range(4):
        v = np.ascontiguousarray(pts[:, column] - pts[:, column].mean())
        ref = np.empty_like(v)
        ex.sigmoid_map_ref(v, ref)
        np.testing.assert_allclose(_map(SIG_BIG, v), ref, rtol=SIGMOID_MAX_REL + tol, atol=1e-30)
        ex.exp_map_ref(v / 4, ref)
        np.testing.assert_allclose(_map(EXP_BIG, v / 4), ref, rtol=EXP_MAX_REL + tol)
    n = len(pts)
    x = np.ascontiguousarray(pts[:, 0])
    total = get_kernel(ex.SUM.with_static(n=n))(x.ctypes.data)
    assert total == pytest.approx(ex.sum_ref(x), rel=1e-5)


@pytest.mark.skipif(not (host_has("avx2") or host_has("avx512f")), reason="host has no AVX2")
def test_simple_kernel_assembly_is_vectorised():
    asm = compile_ir(render(ex.AXPY), host_target(), want_text=True).asm
    # At least 256-bit vectors: on AVX-512 hosts LLVM may still prefer ymm (Intel's tuning
    # for Ice Lake / Rocket Lake sets prefer-256-bit to avoid the 512-bit frequency drop).
    wide = ("ymm", "zmm")
    assert any(r in asm for r in wide), "no ymm/zmm register in the axpy assembly"
    assert "vfmadd" in asm  # ``contract`` produced FMAs
    exp_asm = compile_ir(render(ex.EXP_MAP), host_target(), want_text=True).asm
    assert any(r in exp_asm for r in wide)  # the polynomial vectorised,
    assert "expf" not in exp_asm  # with no call to libm


def _build_helpers(module, fn_name, *, lanes):
    """``void f(ptr x, ptr out)``: x holds 2*lanes floats (read at an odd offset 1), out gets
    clamp/floor of the vector x[1:1+lanes] lane-wise, then the indices visited by a step -3 loop
    (as floats)."""
    from llvmlite import ir
    from cuvil_perception.compile import irutil as u
    fn = ir.Function(module, ir.FunctionType(u.VOID, [u.PTR, u.PTR]), name=fn_name)
    x, out = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vty = u.vec(u.F32, lanes)
    v = u.load_vec(b, x, 1, vty)  # misaligned on purpose
    rows = [u.clamp(b, v, u.splat(-1.0, vty), u.splat(1.0, vty)),
            u.intrinsic(b, "llvm.floor", v)]
    for r, row in enumerate(rows):
        b.store(row, u.gep(b, out, r * lanes, u.F32), align=4)
    slot = u.entry_alloca(b, u.I64, "slot", init=u.const_i64(2 * lanes))
    with u.for_range(b, 10, 0, step=-3) as i:
        at = b.load(slot, typ=u.I64)
        u.store_at(b, b.sitofp(i, u.F32), out, at)
        b.store(b.add(at, u.const_i64(1)), slot)
    b.ret_void()


def _helpers_ref(x, lanes):
    v = x[1:1 + lanes]
    return np.concatenate([np.clip(v, -1, 1), np.floor(v), [10, 7, 4, 1]]).astype(np.float32)


@pytest.mark.parametrize("lanes", [4, 16])
def test_vector_helpers_and_loops(lanes):
    from cuvil_perception.compile import KernelSpec
    spec = KernelSpec("test.helpers", _build_helpers, {"lanes": lanes}, ("ptr", "ptr"))
    x = np.random.default_rng(lanes).uniform(-3, 3, 2 * lanes).astype(np.float32)
    ref = _helpers_ref(x, lanes)
    out = np.full(len(ref), np.nan, np.float32)
    get_kernel(spec)(x.ctypes.data, out.ctypes.data)
    np.testing.assert_array_equal(out, ref)
