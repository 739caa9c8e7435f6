"""Parallel loops (``for i in prange(n)``): the same bits on 1, 2 and 4 threads and uncompiled,
reductions combined in the fixed tree, atomics, the thread count rules, and the errors for a
prange body that cannot run in parallel (compile/lang/prange.py, prange_lower.py)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception import config
from cuvil_perception.compile import get_kernel
from cuvil_perception.compile.lang import (Buf, atomic_add, atomic_max, atomic_min, f32, f64,
                                           i32, i64, inline, kernel, local, prange, threads,
                                           u8)
from cuvil_perception.compile.lang import parallel
from cuvil_perception.compile.lang.prange import chunk_bounds, tree
from cuvil_perception.errors import KernelIndexError, UsageError
from test_lang_simd import assert_compile_error

THIS = Path(__file__)
THREADS = (1, 2, 4)


@kernel(name="prange_test.sums")
def sums(x: Buf[f32, "n"], n: i64, lo: i64) -> f32:
    total = f32(0.0)
    for i in prange(lo, n):
        total += x[i] * x[i]
    return total


@kernel(name="prange_test.row_sums")
def row_sums(x: Buf[f32, "rows", "cols"], out: Buf[f32, "rows"], *, rows: int, cols: int) -> f64:
    """Per-row sums (each row's own sum, in order) and their f64 total (a reduction)."""
    total = 0.0
    for r in prange(rows, chunks=16):
        s = f32(0.0)
        for c in range(cols):
            s += x[r, c]
        out[r] = s
        total += f64(s)
    return total


@kernel(name="prange_test.extremes")
def extremes(x: Buf[f64, "n"], k: Buf[i64, "n"], out: Buf[f64, 4], n: i64):
    lo, hi, prod = f64(1e300), f64(-1e300), 1.0
    kmin, kor = i64(0), i64(0)
    for i in prange(n, chunks=7):
        lo = min(lo, x[i])
        hi = max(hi, x[i])
        prod *= 1.0 + x[i] * 1e-3
        kmin = min(kmin, k[i])
        kor |= k[i]
    out[0], out[1], out[2], out[3] = lo, hi, prod, f64(kmin + kor)


@kernel(name="prange_test.range_image")
def range_image(points: Buf[f32, "n", 4], img: Buf[f32, 16, 64], hits: Buf[i32, 16, 64],
                n: i64):
    """Nearest range per (ring, azimuth) cell, and points per cell, with atomics."""
    for p in prange(n):
        x, y, z = points[p, 0], points[p, 1], points[p, 2]
        rng = f32(x * x + y * y + z * z) ** 0.5
        if rng <= 0.0:
            continue
        col = i64((y / rng + 1.0) * 31.99)
        row = i64((z / rng + 1.0) * 7.99)
        atomic_min(img, (row, col), rng)
        atomic_add(hits, (row, col), 1)


@inline
def scaled_sum(x, n, scale):
    acc = 0.0
    for i in prange(n):
        tmp = local(f64, 2)
        tmp[0] = x[i] * scale
        acc += tmp[0]
    return acc


@kernel(name="prange_test.helper")
def through_helper(x: Buf[f64, "n"], n: i64, scale: f64) -> f64:
    return scaled_sum(x, n, scale)


@kernel(name="prange_test.hist")
def histogram(v: Buf[u8, "n"], out: Buf[i64, 256], mx: Buf[f32, 2], n: i64):
    for i in prange(n):
        atomic_add(out, i64(v[i]), 1)
        atomic_max(mx, 0, (f32(v[i] % 2) - 0.5) * 0.0)  # ties of -0.0 and 0.0: +0.0 wins


def _each_threads(call):
    outs = []
    for t in THREADS:
        with threads(t):
            outs.append(call())
    return outs


def test_float_sums_have_the_same_bits_on_1_2_4_threads_and_uncompiled():
    rng = np.random.default_rng(5)
    for n in (0, 1, 63, 64, 65, 1000, 100_003):
        x = (rng.normal(size=n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
        for lo in (0, 3):
            got = _each_threads(lambda: sums(x, n, lo))
            want = sums.py_func(x, n, lo)
            assert all(g.tobytes() == np.float32(want).tobytes() for g in map(np.float32, got))
    x = rng.normal(size=10).astype(np.float32)
    assert sums(x, 10, 20) == 0.0 == sums.py_func(x, 10, 20)  # an empty range: as it was


def test_the_tree_order_is_the_documented_one():
    assert chunk_bounds(0, 10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert chunk_bounds(5, 3, 2) == [(5, 5), (5, 5)]
    parts = [np.float32(v) for v in (1e8, 1.0, -1e8, 1.0, 0.5)]
    assert tree("+", parts) == 0.5  # ((p0 + p1) + (p2 + p3)) + p4: 1e8 + 1.0 rounds to 1e8
    assert ((parts[0] + parts[1]) + parts[2] + parts[3]) + parts[4] == 1.5  # (in order)


def test_a_per_row_sum_kernel_matches_numpy_rows_on_any_threads():
    x = np.random.default_rng(1).normal(size=(300, 57)).astype(np.float32)
    outs = []
    for t in THREADS:
        out = np.zeros(300, np.float32)
        with threads(t):
            total = row_sums(x, out, rows=300, cols=57)
        outs.append((out, total))
    want = np.zeros(300, np.float32)
    want_total = row_sums.py_func(x, want, rows=300, cols=57)
    for out, total in outs:
        assert np.array_equal(out, want) and total == want_total
    np.testing.assert_allclose(want, x.sum(axis=1), rtol=1e-5, atol=1e-5)
    want.flags.writeable = False  # written inside the prange body: still refused read-only
    with pytest.raises(ValueError, match="'out' is a read-only array"):
        row_sums(x, want, rows=300, cols=57)


def test_min_max_product_and_int_reductions():
    rng = np.random.default_rng(2)
    x = rng.normal(size=500)
    k = rng.integers(-1000, 1000, 500)
    want = np.zeros(4)
    extremes.py_func(x, k, want, 500)
    for got in _each_threads(lambda: (extremes(x, k, out := np.zeros(4), 500), out)[1]):
        assert np.array_equal(got, want)
    assert want[0] == x.min() and want[1] == x.max()


def test_atomics_build_a_range_image_deterministically():
    rng = np.random.default_rng(3)
    pts = rng.normal(size=(20000, 4)).astype(np.float32)
    results = []
    for t in THREADS:
        img, hits = np.full((16, 64), np.inf, np.float32), np.zeros((16, 64), np.int32)
        with threads(t):
            range_image(pts, img, hits, len(pts))
        results.append((img, hits))
    img, hits = np.full((16, 64), np.inf, np.float32), np.zeros((16, 64), np.int32)
    range_image.py_func(pts, img, hits, len(pts))
    for got_img, got_hits in results:
        assert np.array_equal(got_img, img) and np.array_equal(got_hits, hits)
    assert hits.sum() == len(pts) and np.isfinite(img[hits > 0]).all()


def test_int_atomic_add_is_a_histogram_and_float_ties_settle_by_sign():
    v = np.random.default_rng(4).integers(0, 256, 50_000).astype(np.uint8)
    for t in THREADS:
        out, mx = np.zeros(256, np.int64), np.array([-0.0, 0.0], np.float32)
        with threads(t):
            histogram(v, out, mx, len(v))
        assert np.array_equal(out, np.bincount(v, minlength=256))
        assert not np.signbit(mx[0])  # +0.0 is above -0.0 whatever the order
    out, mx = np.zeros(256, np.int64), np.array([-0.0, 0.0], np.float32)
    histogram.py_func(v, out, mx, len(v))
    assert np.array_equal(out, np.bincount(v, minlength=256)) and not np.signbit(mx[0])


def test_a_helper_with_a_prange_loop_and_private_local_arrays():
    x = np.random.default_rng(6).normal(size=777)
    got = _each_threads(lambda: through_helper(x, 777, 0.5))
    assert got == [through_helper.py_func(x, 777, 0.5)] * 3


def test_a_null_thread_record_runs_on_the_caller():
    """What a C caller of a library kernel passes when it has no pool."""
    x = np.random.default_rng(7).normal(size=5000).astype(np.float32)
    fn = get_kernel(sums.spec())
    assert sums.spec().args == ("ptr", "i64", "i64", "ptr")
    assert fn.native(x.ctypes.data, 5000, 0, 0) == sums.py_func(x, 5000, 0)


def test_thread_counts_per_thread_with_override_and_default(monkeypatch):
    with threads(3):
        assert parallel.thread_count() == 3
        with threads(1):
            assert parallel.thread_count() == 1
        assert parallel.thread_count() == 3
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads: a positive int"):
            parallel.set_threads(bad)
    monkeypatch.setenv("CUVIL_KERNEL_THREADS", "3")
    assert parallel.default_threads() == 3
    monkeypatch.delenv("CUVIL_KERNEL_THREADS")
    assert parallel.default_threads() == parallel.usable_cpus()
    for bad in ("0", "-2", "two", "nan", "1e9x"):
        monkeypatch.setenv("CUVIL_KERNEL_THREADS", bad)
        with pytest.raises(UsageError, match="CUVIL_KERNEL_THREADS"):
            config.kernel_threads()


@kernel(name="prange_test.checked", debug=True)
def checked(x: Buf[f32, "n"], n: i64, k: i64) -> f32:
    s = f32(0.0)
    for i in prange(n):
        s += x[i + k]  # marker: checked-prange
    return s


def test_a_bounds_checked_build_stops_at_an_index_error_inside_a_chunk():
    x = np.ones(100, np.float32)
    assert checked(x, 100, 0) == 100.0
    for t in THREADS:
        with threads(t), pytest.raises(KernelIndexError, match="index 100 out of range"):
            checked(x, 100, 1)


# -- misuse -------------------------------------------------------------------------------------
@kernel
def nested(x: Buf[f32, "n"], *, n: int) -> f32:
    s = f32(0.0)
    for i in prange(n):
        for j in prange(n):  # marker: nested
            s += x[j]
    return s


@kernel
def breaks(x: Buf[f32, "n"], *, n: int):
    for i in prange(n):
        if x[i] > 0.0:
            break  # marker: break
        x[i] = 1.0


@kernel
def reads_reduction(x: Buf[f32, "n"], *, n: int) -> f32:
    s = f32(0.0)
    for i in prange(n):
        s += x[i]
        x[i] = s  # marker: read-reduction
    return s


@kernel
def assigns_outer(x: Buf[f32, "n"], *, n: int) -> f32:
    last = f32(0.0)
    for i in prange(n):
        last = x[i]  # marker: assigns-outer
    return last


@kernel
def returns(x: Buf[f32, "n"], *, n: int) -> f32:
    for i in prange(n):
        if x[i] > 0.0:
            return x[i]  # marker: return
    return 0.0


@kernel
def float_atomic_add(x: Buf[f32, "n"], *, n: int):
    for i in prange(n):
        atomic_add(x, 0, x[i])  # marker: float-atomic


@kernel
def mixed_ops(x: Buf[f32, "n"], *, n: int) -> f32:
    s = f32(0.0)
    for i in prange(n):
        s += x[i]
        s *= x[i]  # marker: mixed
    return s


def test_prange_misuse_is_a_compile_error_at_its_line():
    assert_compile_error(nested, "nested", "a prange loop inside a prange loop", THIS)
    assert_compile_error(breaks, "break", "`break` out of a prange loop", THIS)
    assert_compile_error(reads_reduction, "read-reduction",
                         "'s' is a reduction of this prange loop", THIS)
    assert_compile_error(assigns_outer, "assigns-outer",
                         "'last' is assigned before the prange loop", THIS)
    assert_compile_error(returns, "return", "`return` inside a prange loop", THIS)
    assert_compile_error(float_atomic_add, "float-atomic",
                         "the rounding of a float sum depends on the order", THIS)
    assert_compile_error(mixed_ops, "mixed", "'s' is reduced with `+`", THIS)


def test_prange_called_directly_is_range():
    assert list(prange(2, 5)) == [2, 3, 4]
    assert i32 and i64 and f32  # (the names the kernels above use)


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_a_pipeline_thread_gets_its_share_of_the_cores(workers):
    """Compute workers: the cores divided by the workers (an ONNX network's share); io: 1."""
    from cuvil_perception.rt import RunOptions, intra_op_threads
    from cuvil_perception.rt.knobs import RtKnobs
    from cuvil_perception.rt.threads import StageThreads

    stages = StageThreads([], [], {}, RunOptions(workers=workers), RtKnobs(), print, None)
    try:
        got = stages.compute.submit(parallel.thread_count).result()
    finally:
        stages.shutdown()
    assert got == intra_op_threads(workers) == max(1, parallel.usable_cpus() // workers)


def test_the_documented_example_runs(tmp_path):
    """docs/kernel-language.md "Parallel loops": its example (its asserts included)."""
    import importlib.util

    doc = (THIS.parents[1] / "docs" / "kernel-language.md").read_text()
    block = doc.split("## Parallel loops", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "prange_doc_example.py"
    path.write_text(block)
    spec = importlib.util.spec_from_file_location("prange_doc_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.hits.sum() == 2000


def test_prewarm_brings_the_pool_with_a_prange_kernel():
    from cuvil_perception.compile.kernel_prewarm import prewarm

    names = [row.name for row in prewarm([sums.spec()])]
    assert names == ["prange_test.sums", "lang.prange_launch", "lang.prange_worker"]
    assert [row.name for row in prewarm([plain.spec()])] == ["prange_test.plain"]


@kernel(name="prange_test.plain")
def plain(x: Buf[f32, "n"], n: i64) -> f32:
    return x[0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_prange_loops_on_a_pool_of_its_own():
    x = np.random.default_rng(8).normal(size=20000).astype(np.float32)
    with threads(2):
        want = sums(x, 20000, 0)  # the parent's pool is running
    pid = os.fork()
    if pid == 0:  # the child: its pool's threads did not come along
        signal.alarm(60)  # a hang ends the child, not the suite
        try:
            with threads(2):
                os._exit(0 if sums(x, 20000, 0) == want else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@kernel
def shared_local(x: Buf[f32, "n"], *, n: int) -> f32:
    tmp = local(f32, 4)
    s = f32(0.0)
    for i in prange(n):
        tmp[0] = x[i]  # marker: shared-local
        s += tmp[0]
    return s


@kernel(name="prange_test.reads_local")
def reads_local(x: Buf[f32, "n"], n: i64) -> f32:
    table = local(f32, 4)
    table[1] = 2.0
    s = f32(0.0)
    for i in prange(n):
        s += x[i] * table[1]
    return s


def test_a_local_array_from_before_the_loop_is_read_only_in_it():
    assert_compile_error(shared_local, "shared-local",
                         "'tmp' is a local array declared before the prange loop", THIS)
    x = np.arange(100, dtype=np.float32)
    assert _each_threads(lambda: reads_local(x, 100)) == [reads_local.py_func(x, 100)] * 3


def test_a_library_kernel_takes_a_null_thread_record_from_c(tmp_path):
    """`compile --target` / libraries: the record is a documented last argument; NULL runs the
    chunks on the calling thread (the header declares it, the buffer read only stays const)."""
    import ctypes

    from cuvil_perception.compile.library import build_library
    from cuvil_perception.compile.toolchain import find_toolchain, host_arch
    from cuvil_perception.errors import ToolchainError

    triple = f"{host_arch()}-linux-gnu"
    try:
        find_toolchain(triple)
    except ToolchainError as exc:
        pytest.skip(str(exc))
    lib = build_library([sums.spec()], triple, tmp_path / "lib", "cuvil_pt")
    header = lib.header.read_text()
    assert "int cuvil_pt_prange_test_sums(const float *x, int64_t n, int64_t lo, " \
           "const uint64_t *par, float *result);" in header
    fn = ctypes.CDLL(str(lib.shared)).cuvil_pt_prange_test_sums
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                             ctypes.c_void_p, ctypes.c_void_p]
    x = np.random.default_rng(9).normal(size=3000).astype(np.float32)
    result = ctypes.c_float()
    assert fn(x.ctypes.data, 3000, 0, None, ctypes.byref(result)) == 0
    assert result.value == sums.py_func(x, 3000, 0)
    assert fn(None, 3000, 0, None, ctypes.byref(result)) < 0  # NULL x: an error code
    assert fn(x.ctypes.data, 3000, 0, None, None) < 0  # NULL result too


@kernel
def private_after(x: Buf[f32, "n"], *, n: int) -> f32:
    for i in prange(n):
        last = x[i]
    return last  # marker: private-after


def test_a_name_first_assigned_in_the_body_has_no_value_after_the_loop():
    assert_compile_error(private_after, "private-after",
                         "'last' is first assigned inside the prange loop at line", THIS)


@kernel
def atomic_value(x: Buf[i64, "n"], *, n: int) -> i64:
    return atomic_add(x, 0, 1)  # marker: atomic-value


def test_an_atomic_is_a_statement():
    assert_compile_error(atomic_value, "atomic-value", "atomic_add() is a statement", THIS)


def test_concurrent_callers_share_the_pool_and_keep_their_bits():
    """Four threads launch at once (each asking for 3): helpers are taken, taken back and
    shared; every result is the 1-thread one."""
    import threading

    rng = np.random.default_rng(10)
    xs = [rng.normal(size=int(n)).astype(np.float32) for n in rng.integers(1, 40000, 8)]
    want = [sums.py_func(x, len(x), 0) for x in xs]
    bad = []

    def caller(k):
        with threads(3):
            for rep in range(60):
                j = (k + rep) % len(xs)
                if sums(xs[j], len(xs[j]), 0) != want[j]:
                    bad.append((k, rep))

    workers = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not any(w.is_alive() for w in workers) and bad == []
