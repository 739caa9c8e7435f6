"""Memory safety, wrong results and stale results at the edges of the kernel language: read-only
arrays a kernel writes, constant indexes outside a buffer, float floor division, module-level
values changed between calls."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile.lang import (Buf, InOut, Out, address, f32, f64, i32, i64, inline,
                                           kernel, local, simd, u8, u64, unroll)
from cuvil_perception.compile import get_kernel
from cuvil_perception.errors import KernelIndexError, KernelSourceError

THIS = Path(__file__).resolve()
SCALE = 3          # a module-level constant the kernels below read; tests assign it
OFFSET = 0.5


@kernel(name="safety.fill")
def fill(x: Buf[f32, "n"], n: i64):
    for i in range(n):
        x[i] = 1.0


@kernel(name="safety.vector_store")
def vector_store(x: Buf[f32, 4], src: Buf[f32, 4]):
    simd.copy(x, 0, src, 0, 4)


@kernel(name="safety.declared_store")
def declared_store(x: Buf[f32, 4, Out()], src: Buf[f32, 4, InOut()]):
    simd.copy(x, 0, src, 0, 4)


@kernel(name="safety.escape")
def escape(x: Buf[f32, 4]) -> i64:
    return address(x)


@kernel(name="safety.total")
def total(x: Buf[f32, "n"], n: i64) -> f32:
    s = f32(0.0)
    for i in range(n):
        s += x[i]
    return s


@pytest.mark.parametrize("call", [
    lambda ro, rw: fill(ro, 4),
    lambda ro, rw: vector_store(ro, rw),
    lambda ro, rw: escape(ro),
], ids=["store", "simd_copy", "address"])
def test_a_read_only_array_the_kernel_writes_is_refused(call):
    """numpy guards a read-only array (a frame from a bag, bytes, a read-only mapping): the
    compiled kernel wrote it anyway, through the guard, or faulted on a read-only page."""
    ro = np.frombuffer(bytes(16), np.float32)      # memory of an immutable bytes object
    with pytest.raises(ValueError, match="'x' is a read-only array and the kernel writes it"):
        call(ro, np.ones(4, np.float32))
    assert not ro.any()


def test_a_read_only_array_the_kernel_only_reads_is_accepted():
    ro = np.frombuffer(np.arange(4, dtype=np.float32).tobytes(), np.float32)
    assert total(ro, 4) == 6.0
    src = np.frombuffer(np.full(4, 2, np.float32).tobytes(), np.float32)
    out = np.zeros(4, np.float32)
    vector_store(out, src)                          # src read-only: only read
    assert out.tolist() == [2.0] * 4


def _compile_error(fn, **static) -> str:
    with pytest.raises(KernelSourceError) as err:
        fn(*[np.zeros(s, np.float32) for s in [(8, 3)]], 8, **static)
    return str(err.value)


@kernel(name="safety.last")
def last(x: Buf[f32, "n", 3], n: i64) -> f32:
    return x[n - 1, -1]  # @negative


@kernel(name="safety.past")
def past(x: Buf[f32, "n", 3], n: i64) -> f32:
    return x[0, 3]  # @past


@kernel(name="safety.local_past")
def local_past(x: Buf[f32, "n", 3], n: i64) -> f32:
    t = local(f32, 4)
    t[4] = x[0, 0]  # @local
    return t[0]


def _line(marker: str) -> int:
    return next(n for n, text in enumerate(THIS.read_text().splitlines(), 1)
                if text.rstrip().endswith(marker))


@pytest.mark.parametrize("fn, marker, message", [
    (last, "@negative", "negative index -1 on axis 1 of 'x': kernels do not count from the end "
                        "as Python does; write `2` instead"),
    (past, "@past", "index 3 out of range for axis 1 of 'x' (extent 3)"),
    (local_past, "@local", "index 4 out of range for axis 0 of 't'"),
])
def test_a_constant_index_outside_the_buffer_is_a_compile_error(fn, marker, message):
    """x[-1] read the element before the buffer (Python's py_func gave the last one)."""
    text = _compile_error(fn)
    assert f"{THIS}:{_line(marker)}:" in text and message in text


@inline
def scaled(v):
    return v * SCALE + OFFSET


@kernel(name="safety.scaled")
def apply_scale(x: Buf[f32, "n"], out: Buf[f32, "n"], n: i64):
    for i in range(n):
        out[i] = scaled(x[i])


def test_a_module_constant_assigned_between_calls_is_not_stale(monkeypatch):
    """The kernel read SCALE as a constant when first compiled and kept returning the old
    result after the program assigned it (and could file that code under the new value)."""
    x = np.arange(4, dtype=np.float32)
    got, want = np.zeros(4, np.float32), np.zeros(4, np.float32)
    apply_scale(x, got, 4)
    assert got.tolist() == [0.5, 3.5, 6.5, 9.5]
    before = apply_scale.spec()
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 5)
    apply_scale(x, got, 4)
    apply_scale.py_func(x, want, 4)
    assert got.tolist() == want.tolist() == [0.5, 5.5, 10.5, 15.5]
    assert apply_scale.spec().identity() != before.identity()
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 3)
    assert apply_scale.spec().identity() == before.identity()   # the same value: same kernel





@kernel(name="safety.floor_divmod")
def floor_divmod(a: Buf["ftype", "n"], b: Buf["ftype", "n"], out: Buf["ftype", 2, "n"], n: i64,
                 *, ftype: str):
    for i in range(n):
        out[0, i] = a[i] // b[i]
        out[1, i] = a[i] % b[i]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_floor_division_and_modulo_are_pythons_bit_for_bit(dtype):
    """``floor(a / b)`` gave 10.0 for ``1.0 // 0.1`` (Python and numpy: 9.0; so a voxel index
    was one off from py_func), inf for ``inf // 2`` and -0.0 for ``-0.0 % 3``."""
    special = [-0.0, 0.0, 1.0, -1.0, 0.1, -0.1, 3.0, -5.0, np.inf, -np.inf, np.nan, 1e30, 7.5]
    a, b = (g.ravel() for g in np.meshgrid(special, special))
    rng = np.random.default_rng(3)
    a = np.concatenate([a, rng.normal(0, 100, 2000), np.arange(1, 501) * 0.1]).astype(dtype)
    b = np.concatenate([b, rng.normal(0, 1, 2000), np.full(500, 0.1)]).astype(dtype)
    out = np.zeros((2, len(a)), dtype)
    floor_divmod(a, b, out, len(a), ftype="f64" if dtype is np.float64 else "f32")
    with np.errstate(all="ignore"):
        want = np.stack([a // b, a % b])
    assert out.tobytes() == want.tobytes() or np.array_equal(out, want, equal_nan=True) and \
        np.array_equal(np.signbit(out), np.signbit(want))
    one = np.zeros((2, 1), dtype)
    floor_divmod(np.ones(1, dtype), np.full(1, 0.1, dtype), one, 1,
                 ftype="f64" if dtype is np.float64 else "f32")
    assert one[0, 0] == 9.0                         # 1.0 / 0.1 rounds to 10.0


@kernel(name="safety.shift")
def shift(x: Buf[f32, "n"], y: Buf[f32, "n"], n: i64):
    for i in range(1, n):
        y[i] = x[i - 1] + 1.0


@kernel(name="safety.shift_aliased", noalias=False)
def shift_aliased(x: Buf[f32, "n"], y: Buf[f32, "n"], n: i64):
    for i in range(1, n):
        y[i] = x[i - 1] + 1.0


def test_buffers_sharing_memory_that_a_noalias_kernel_writes_are_refused():
    """shift(a, a) ran vectorised code that assumes x and y are apart: [0, 1, 1, 1, ...]
    where py_func gives [0, 1, 2, 3, ...]."""
    a = np.zeros(64, np.float32)
    with pytest.raises(ValueError, match="arguments 'x' and 'y' share memory and the kernel "
                                         "writes one"):
        shift(a, a, 64)
    with pytest.raises(ValueError, match="share memory"):
        shift(a[:32], a[16:48], 32)
    shift(a[:32], a[32:], 32)                       # halves of one array: apart, accepted
    assert a[32:].tolist() == [0.0] + [1.0] * 31
    b, want = np.zeros(64, np.float32), np.zeros(64, np.float32)
    shift_aliased(b, b, 64)                         # declared noalias=False: allowed, right
    shift_aliased.py_func(want, want, 64)
    assert b.tolist() == want.tolist() == [float(i) for i in range(64)]
    ro = np.frombuffer(np.ones(8, np.float32).tobytes(), np.float32)
    assert total(ro, 8) == 8.0 and total.py_func(ro, 8) == 8.0


@pytest.mark.parametrize("n", [4.0, "4", None, np.float32(4)])
def test_a_scalar_of_the_wrong_kind_names_its_parameter(n):
    """ctypes said only `argument 2: TypeError: wrong type` (or int() failed on None)."""
    with pytest.raises(TypeError, match=r"kernel safety.total: argument 'n' is i64, got"):
        total(np.ones(4, np.float32), n)
    assert total(np.ones(4, np.float32), np.int32(4)) == 4.0


@kernel(name="safety.grid")
def grid_cells(n: i64, *, nx: int, cell: float, size: tuple) -> f32:
    return f32(nx * cell + size[0] + n)


def test_numpy_scalars_are_accepted_as_static_values():
    """``nx=np.int64(70)`` failed with 'static params are not JSON-serialisable'."""
    spec = grid_cells.spec(nx=np.int64(70), cell=np.float64(0.5), size=(np.int32(2),))
    assert spec.identity() == grid_cells.spec(nx=70, cell=0.5, size=(2,)).identity()
    assert grid_cells(1, nx=np.int64(70), cell=np.float64(0.5), size=(np.int32(2),)) == 38.0


@kernel(name="safety.twice")
def twice(a: i64) -> i64:
    return a * 2


@kernel(name="safety.calls_a_kernel")
def calls_a_kernel(a: i64) -> i64:
    return twice(a) + 1


@kernel(name="safety.recursive")
def recursive(a: i64) -> i64:
    return a if a <= 1 else a * recursive(a - 1)  # @recursive


def test_a_kernel_calls_another_kernel_and_recursion_is_a_clear_error():
    """The documented "another @kernel may be called" failed: `twice` cannot be called from a
    kernel; write @inline on that function."""
    assert calls_a_kernel(5) == calls_a_kernel.py_func(5) == 11
    with pytest.raises(KernelSourceError, match=r"recursion\?\); write a loop instead\n") as err:
        recursive(3)
    assert f"{THIS}:{_line('@recursive')}:" in str(err.value)


@kernel(name="safety.float_literal")
def float_literal(n: i64) -> i64:
    c = n
    c = 0.5  # @literal
    return c


@kernel(name="safety.float_return")
def float_return(n: i64) -> i64:
    return 2.7  # @return


@pytest.mark.parametrize("fn, marker, message", [
    (float_literal, "@literal", "'c' is i64 (from line"),
    (float_return, "@return", "return value is f64, expected i64; write `i64(...)` instead"),
])
def test_a_float_literal_never_becomes_an_int_silently(fn, marker, message):
    """``c = 0.5`` into an int variable compiled to ``c = 0`` ('literals adapt'), and
    ``return 2.7`` from ``-> i64`` returned 2; Python keeps 0.5 / 2.7."""
    with pytest.raises(KernelSourceError, match=re.escape(message)) as err:
        fn(1)
    assert f"{THIS}:{_line(marker)}:" in str(err.value)


@kernel(name="safety.byte_literal")
def byte_literal(x: Buf[u8, 4]):
    x[0] = -1  # @byte


@kernel(name="safety.int32_literal")
def int32_literal(x: Buf[i32, 4]):
    big: i32 = 3_000_000_000  # @int32
    x[0] = big


@kernel(name="safety.lane_literal")
def lane_literal(x: Buf[i32, 4]):
    x[0:2] = simd.vector(i32, (2**40, 2))  # @lane


@kernel(name="safety.int64_literal")
def int64_literal(x: Buf[i64, 4]):
    x[0] = 2**63  # @int64


@kernel(name="safety.edge_literals")
def edge_literals(a: Buf[u8, 2], b: Buf[i32, 2], c: Buf[u64, 2], d: Buf[i64, 2]):
    a[0], a[1] = 0, 255
    b[0], b[1] = -2**31, 2**31 - 1
    c[0], c[1] = 0, 2**64 - 1
    d[0], d[1] = -2**63, 2**63 - 1


@pytest.mark.parametrize("fn, marker, message", [
    (byte_literal, "@byte", "the constant -1 does not fit u8; write a value in [0, 255] instead"),
    (int32_literal, "@int32", "the constant 3000000000 does not fit i32; write a value in "
                              "[-2147483648, 2147483647] (or make the other operand wider"),
    (lane_literal, "@lane", "the constant 1099511627776 does not fit i32"),
    (int64_literal, "@int64", "the constant 9223372036854775808 does not fit i64; write a "
                              "value in [-9223372036854775808, 9223372036854775807] instead"),
])
def test_an_int_constant_that_does_not_fit_is_a_compile_error_not_wrapped(fn, marker, message):
    """``x[0] = -1`` into a u8 buffer stored 255 and ``big: i32 = 3_000_000_000`` held a
    wrapped negative number. Uncompiled (``py_func``), a store wraps as a run-time value's
    does (numpy's ``astype``) and numpy refuses the vector constant."""
    args = {byte_literal: [np.zeros(4, np.uint8)], int32_literal: [np.zeros(4, np.int32)],
            lane_literal: [np.zeros(4, np.int32)], int64_literal: [np.zeros(4, np.int64)]}[fn]
    with pytest.raises(KernelSourceError, match=re.escape(message)) as err:
        fn(*args)
    assert f"{THIS}:{_line(marker)}:" in str(err.value)
    if fn is lane_literal:
        with pytest.raises(OverflowError):
            fn.py_func(*args)
        return
    fn.py_func(*args)
    assert args[0][0] == {byte_literal: 255, int32_literal: 3_000_000_000 - 2**32,
                          int64_literal: -2**63}[fn]


def test_int_constants_at_the_edges_of_their_types_are_stored_exactly():
    dtypes = (np.uint8, np.int32, np.uint64, np.int64)
    got = [np.zeros(2, t) for t in dtypes]
    want = [np.zeros(2, t) for t in dtypes]
    edge_literals(*got)
    edge_literals.py_func(*want)
    for g, w, t in zip(got, want, dtypes):
        np.testing.assert_array_equal(g, w)
        assert g.tolist() == [np.iinfo(t).min, np.iinfo(t).max]


def test_the_tutorials_try_a_mistake_fails_as_it_says(tmp_path):
    """docs/custom-kernel-op.md: assign `c = 0.5` after `c = cell_of(...)` and the build fails
    naming the line; it compiled (c = 0) and ran. The lines are those of the kernel.py the page
    shows (it once quoted the example file's, 34:9 where the typed file gives 20:9)."""
    import importlib.util

    doc = (THIS.parents[1] / "docs" / "custom-kernel-op.md").read_text()
    source = next(block for block in doc.split("```python\n")[1:] if "@kernel(" in block)
    source = source.split("```", 1)[0]
    lines = source.splitlines()
    at = next(k for k, text in enumerate(lines) if "c = cell_of(" in text)
    lines.insert(at + 1, " " * 8 + "c = 0.5")
    path = tmp_path / "kernel.py"
    path.write_text("\n".join(lines) + "\n")
    spec = importlib.util.spec_from_file_location("tutorial_mistake_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    static = dict(x0=0.0, y0=-39.68, cell=1.0, nx=70, ny=80, height=0.25, capacity=8,
                  cells=70 * 80)
    with pytest.raises(KernelSourceError) as err:
        module.remove_ground(np.zeros((4, 4), np.float32), 4, np.zeros(5600, np.float32),
                             np.zeros((8, 4), np.float32), **static)
    claim = doc.split("`kernel.py:", 1)[1].split(" is i32", 1)[0]   # 20:9: ... 'c'
    assert f"{path}:{claim}" in str(err.value) and "but this assigns f64" in str(err.value)


@kernel(name="safety.huge_unroll")
def huge_unroll(n: i64) -> i64:
    s = 0
    for k in unroll(100000):  # @unroll
        s += k * n
    return s


def test_a_huge_unrolled_loop_is_a_compile_error_not_a_long_hang():
    """unroll(100000) compiled for 12 s (a million copies: minutes) before any message."""
    with pytest.raises(KernelSourceError, match=r"an unrolled loop of 100000 copies \(at most "
                                                r"4096\); write `for i in range\(n\)`") as err:
        huge_unroll(1)
    assert f"{THIS}:{_line('@unroll')}:" in str(err.value)


@kernel(name="safety.fill_before")
def fill_before(x: Buf[f32, 4, 8]):
    simd.fill(x, -8, 8, 0.0)  # @fill


@kernel(name="safety.load_past")
def load_past(x: Buf[f32, 4, 8]) -> f32:
    return simd.reduce_add(simd.load(x, 30, 4))  # @load


@pytest.mark.parametrize("fn, marker, message", [
    (fill_before, "@fill", "elements [-8, 0) out of range for 'x' (32 elements)"),
    (load_past, "@load", "elements [30, 34) out of range for 'x' (32 elements)"),
])
def test_a_constant_simd_run_outside_the_buffer_is_a_compile_error(fn, marker, message):
    """simd.fill(x, -8, 8, 0.0) wrote 32 bytes before the buffer (py_func: nothing, a clamped
    slice); simd.load(x, 30, 4) read past its end."""
    with pytest.raises(KernelSourceError, match=re.escape(message)) as err:
        fn(np.zeros((4, 8), np.float32))
    assert f"{THIS}:{_line(marker)}:" in str(err.value)
    with pytest.raises(IndexError, match="out of range for a buffer of 32"):
        fn.py_func(np.zeros((4, 8), np.float32))


def test_uncompiled_simd_fill_and_copy_refuse_a_run_outside_the_buffer():
    x, src = np.zeros(8, np.float32), np.ones(8, np.float32)
    with pytest.raises(IndexError, match=r"simd.fill: elements \[6, 10\)"):
        simd.fill(x, 6, 4, 1.0)
    with pytest.raises(IndexError, match=r"simd.copy: elements \[6, 10\)"):
        simd.copy(x, 0, src, 6, 4)
    simd.copy(x, 4, src, 4, 4)
    assert x.tolist() == [0.0] * 4 + [1.0] * 4


@kernel(name="safety.widen")
def widen(n: i32) -> i64:
    return i64(n)


def test_an_int_argument_outside_its_type_is_refused_not_wrapped():
    """ctypes passed 3_000_000_000 to an i32 parameter as -1294967296, 2**40 as 0."""
    assert widen(2**31 - 1) == 2**31 - 1 and widen(-2**31) == -2**31
    for value in (2**31, 3_000_000_000, -2**31 - 1):
        with pytest.raises(ValueError, match=rf"argument 'n' is i32; {value} is outside its "
                                             r"range \[-2147483648, 2147483647\]"):
            widen(value)
    with pytest.raises(ValueError, match="is outside its range"):
        total(np.ones(4, np.float32), 2**63)


def _import_as(name: str, path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_a_kernel_installed_in_site_packages_is_keyed_by_its_source(tmp_path, monkeypatch):
    """A user's op package installed with pip (the tutorial's distribution path) lives in
    site-packages, which the source digest skipped: after an upgrade that changed the kernel,
    the warm start loaded the old machine code (2 where py_func gave 101)."""
    import importlib

    from cuvil_perception.compile import source_digests

    kernel_module = importlib.import_module("cuvil_perception.compile.lang.kernel")

    folder = tmp_path / "site-packages" / "safety_user_pkg"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    path = folder / "kern.py"
    text = ("from cuvil_perception.compile.lang import i64, kernel\n\n\n"
            "@kernel(name='safety_user_pkg.answer')\n"
            "def answer(n: i64) -> i64:\n    return n + 1\n")
    results = []
    for body in ("n + 1", "n + 100"):                  # version 1, then the upgrade
        path.write_text(text.replace("n + 1", body))
        source_digests.forget()
        kernel_module._module_closure.cache_clear()
        module = _import_as("safety_user_pkg.kern", path)
        results.append((module.answer(1), module.answer.py_func(1)))
    monkeypatch.delitem(sys.modules, "safety_user_pkg.kern")
    assert results == [(2, 2), (101, 101)]


def test_a_kernel_file_edited_before_the_first_call_compiles_what_was_imported(
        tmp_path, cache_dir, monkeypatch):
    """Editing a kernel's file between the import and the first call (a long-lived session)
    had the kernel compiled from the new text at the old line numbers - another function, or
    half of one - while ``py_func`` ran the imported code."""
    import importlib
    import subprocess

    from cuvil_perception.compile import source_digests

    importlib.import_module("cuvil_perception.compile.lang.kernel")._module_closure.cache_clear()
    source_digests.forget()
    path = tmp_path / "safety_edited.py"
    text = ("from cuvil_perception.compile.lang import i64, inline, kernel\n\n\n"
            "@inline\ndef step(n):\n    return n + 1\n\n\n"
            "@kernel(name='safety_edited.f')\ndef f(n: i64) -> i64:\n    return step(n) * 2\n")
    path.write_text(text)
    module = _import_as("safety_edited", path)
    monkeypatch.delitem(sys.modules, "safety_edited")
    path.write_text("LIMIT = 3\n\n\n" + text.replace("n + 1", "n + 5").replace("* 2", "* 3"))
    assert (module.f(1), module.f.py_func(1)) == (4, 4)
    # A new process imports the new text: its own code, not the one filed for the old text.
    run = subprocess.run([sys.executable, "-c", "import safety_edited; print(safety_edited.f(1))"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "18", run.stderr


def _cell(source: str, filename: str) -> dict:
    """Run ``source`` as a notebook cell does: its lines in linecache, no file on disk."""
    import linecache

    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "safety_notebook"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def test_a_kernel_redefined_in_a_notebook_cell_is_not_the_old_machine_code(tmp_path):
    """A cell has no file for the source digest: redefining a kernel (or a helper it calls)
    in a later cell kept running the first cell's code (compiled 2, py_func 50)."""
    head = ("from cuvil_perception.compile.lang import i64, inline, kernel\n\n"
            "@inline\ndef step(n):\n    return n + 1\n\n"
            "@kernel(name='safety_notebook.f')\ndef f(n: i64) -> i64:\n    return step(n)\n")
    got = []
    for k, source in enumerate([head, head.replace("return step(n)", "return step(n) * 50"),
                                head.replace("return n + 1", "return n + 7")]):
        f = _cell(source, str(tmp_path / f"cell{k}.py"))["f"]
        got.append((f(1), f.py_func(1)))
    assert got == [(2, 2), (100, 100), (8, 8)]


@kernel(name="safety.open_shape")
def open_shape(x: Buf[f32, None, 4]) -> i64:
    return x.shape[1] * 100 + x.shape[0]  # @shape


@kernel(name="safety.mixed_branches")
def mixed_branches(n: i64) -> i64:
    c = n if n > 5 else 0.5  # @branches
    return c


@pytest.mark.parametrize("fn, marker, message", [
    (open_shape, "@shape", "axis 0 of buffer 'x' has no known extent (`None`); write an extent "
                           "in its annotation"),
    (mixed_branches, "@branches", "the branches are i64 and f64; write a cast on one branch"),
])
def test_open_shapes_and_mixed_branches_are_errors_at_their_line(fn, marker, message):
    """``x.shape[0]`` of a ``None`` axis was an 'invalid IR: LLVM IR parsing error' dump;
    ``n if c else 0.5`` made the 0.5 an i64 0."""
    with pytest.raises(KernelSourceError, match=re.escape(message)) as err:
        fn(np.zeros((3, 4), np.float32)) if fn is open_shape else fn(1)
    assert f"{THIS}:{_line(marker)}:" in str(err.value)


@kernel(name="safety.after_loop")
def after_loop(n: i64) -> i64:
    for i in range(n):
        last = i * 3
    return last + i


@kernel(name="safety.maybe_assigned")
def maybe_assigned(n: i64) -> f32:
    if n > 5:
        y = f32(2.5)
    return y


def test_a_variable_no_path_assigned_reads_zero_not_garbage():
    """After a loop that ran zero times (Python: UnboundLocalError) the compiled kernel read an
    undefined value: -3, 94876374864224 (an address), 2.5 from the untaken branch."""
    assert after_loop(0) == 0 and after_loop(3) == after_loop.py_func(3) == 8
    assert maybe_assigned(1) == 0.0 and maybe_assigned(9) == 2.5
    with pytest.raises(UnboundLocalError):
        after_loop.py_func(0)


@kernel(name="safety.widened")
def widened(x: Buf[u8, "n"], out: Buf[i32, 2, "n"], n: i64):
    for i in range(n):
        out[0, i] = x[i] + 200
        out[1, i] = i32(x[i]) + 200


def test_small_int_loads_widen_and_the_documented_cast_makes_py_func_agree():
    """The semantics table's row: compiled widens u8 (300), py_func's numpy scalar wraps (44)
    unless the element is cast as the table says."""
    x = np.array([100, 10], np.uint8)
    got, want = np.zeros((2, 2), np.int32), np.zeros((2, 2), np.int32)
    widened(x, got, 2)
    with np.errstate(over="ignore"):
        widened.py_func(x, want, 2)
    assert got.tolist() == [[300, 210], [300, 210]]
    assert want.tolist() == [[44, 210], [300, 210]]


@kernel(name="safety.stream")
def stream(x: Buf[f32, 64]):
    simd.stream_fill(x, 0, 16, 1.0)
    simd.fence()


@kernel(name="safety.stream_odd")
def stream_odd(x: Buf[f32, 64]):
    simd.stream_fill(x, 4, 16, 1.0)  # @odd


def _aligned(n: int, offset: int = 0) -> np.ndarray:
    raw = np.zeros(n + 32, np.float32)
    start = (-raw.ctypes.data % 64) // 4 + offset
    return raw[start:start + n]


def test_a_streaming_store_to_a_misaligned_array_is_an_error_not_a_segfault(monkeypatch):
    """numpy aligns arrays to 16 bytes: simd.stream_fill of 16 f32 (a 64-byte vmovntps) into
    one segfaulted 3 times in 4, in release and in debug builds alike (only stream_store was
    checked); a constant misaligned index did too."""
    monkeypatch.setenv("CUVIL_KERNEL_DEBUG", "0")   # the release build's check first
    with pytest.raises(ValueError, match="argument 'x' starts at address mod 64 = 16; the "
                                         "kernel's streaming stores into it need 64-byte"):
        stream(_aligned(64, offset=4))
    x = _aligned(64)
    stream(x)
    assert x[:16].tolist() == [1.0] * 16 and not x[16:].any()
    debug = get_kernel(stream.spec(debug=True))
    with pytest.raises(KernelIndexError, match="stream_store alignment: address mod 64 of x"):
        debug(_aligned(64, offset=4).ctypes.data)
    with pytest.raises(KernelSourceError, match=r"a streaming store of 64 bytes at element 4 of "
                                                r"'x' \(16 bytes in\) is not 64-byte aligned"):
        stream_odd(x)


@kernel(name="safety.stacked_locals")
def stacked_locals(x: Buf[i64, "n"], n: i64) -> f64:
    s = 0.0
    for k in unroll(600):
        t = local(f64, 4096)  # @stack
        for i in range(n):
            t[x[i]] += f64(i + k)
        s += t[x[0]]
    return s


def test_local_arrays_that_would_overflow_the_stack_are_a_compile_error():
    """600 copies of a 32 KiB local() (an unrolled loop) took 19 MiB of stack: a segfault."""
    with pytest.raises(KernelSourceError, match=r"local arrays take 294912 bytes of stack \(at "
                                                r"most 262144\)") as err:
        stacked_locals(np.arange(4), 4)
    assert f"{THIS}:{_line('@stack')}:" in str(err.value)


def test_run_time_arguments_by_keyword_are_told_they_go_by_position():
    """``kernel(x=a, n=2, s=1.0)`` said only 'unknown ['n', 'x']; it takes ['s']'."""
    with pytest.raises(KernelSourceError, match=re.escape(
            "unknown ['n', 'x']; it takes [] by keyword, after its run-time arguments "
            "['x', 'n'] by position")):
        total(x=np.ones(2, np.float32), n=2)


def test_a_name_of_the_enclosing_function_is_explained():
    """A kernel defined in a function (a test, a notebook helper) that reads that function's
    variable or helper was told "name 'limit' is not defined"."""
    limit = 3

    @kernel(name="safety.nested")
    def nested(n: i64) -> i64:
        return n + limit  # @closure

    with pytest.raises(KernelSourceError, match=re.escape(
            "'limit' is a variable of the function the kernel is defined in; kernels see "
            "module-level names only; write a module-level definition of 'limit' (helpers "
            "too), or a static parameter instead")) as err:
        nested(1)
    assert f"{THIS}:{_line('@closure')}:" in str(err.value)
    assert nested.py_func(1) == 4


def test_library_headers_declare_the_buffers_a_kernel_only_reads_const():
    """compile --library declared every buffer `inout` and non-const: `float *points` for the
    tutorial kernel's input."""
    from cuvil_perception.compile.cheader import arg_decls, c_type

    decls = {a.name: (a.role, c_type(a)) for a in arg_decls(vector_store.spec())}
    assert decls == {"x": ("inout", "float *"), "src": ("in", "const float *")}
    declared = declared_store.spec()
    assert [a.role for a in arg_decls(declared)] == ["out", "inout"]   # declared: kept
