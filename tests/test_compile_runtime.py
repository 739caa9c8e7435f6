"""Kernels at run time: memoisation, GIL release, prewarm, diagnostics, cross-target objects."""

from __future__ import annotations

import ctypes
import os
import struct
import threading

import numpy as np
import pytest
from llvmlite import ir

from cuvil_perception.compile import (KernelSpec, compile_stats, emit_object, get_kernel,
                                      prewarm, write_objects)
from cuvil_perception.compile import examples as ex
from cuvil_perception.compile import registry
from cuvil_perception.errors import CompileError, UsageError
from cuvil_perception.testing.gil import CallProbe, size_for


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    registry.clear_memory()
    yield tmp_path
    registry.clear_memory()


def test_same_spec_same_callable_other_static_other_callable(fresh):
    a = get_kernel(ex.AXPY)
    hits = compile_stats().memory_hits
    assert get_kernel(ex.AXPY.with_static(n=1024)) is a
    assert compile_stats().memory_hits == hits + 1
    b = get_kernel(ex.AXPY.with_static(n=2048))
    assert b is not a and b.address != a.address


def test_concurrent_first_calls_compile_once(fresh):
    spec = ex.AXPY.with_static(n=333)
    before = compile_stats().compiles
    got = []
    threads = [threading.Thread(target=lambda: got.append(get_kernel(spec))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert compile_stats().compiles == before + 1
    assert all(k is got[0] for k in got)


def test_gil_is_released_during_a_native_call(fresh):
    k = get_kernel(ex.EXP_ACCUMULATE.release())  # PYFUNCTYPE below: the release ABI
    x = np.random.default_rng(0).uniform(-3, 3, 4096).astype(np.float32)
    y = np.zeros_like(x)
    reps = size_for(lambda n: k(x.ctypes.data, y.ctypes.data, n), 0.08)  # ~80 ms a call
    # The same function bound with PYFUNCTYPE keeps the GIL: the check must be able to fail.
    held = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(k.address)
    shares = []
    for fn in (k, held):
        with CallProbe() as probe:  # judged per call: load slows the call and the probe alike
            timed = probe.wrap(fn)
            for _ in range(4):
                timed(x.ctypes.data, y.ctypes.data, reps)
        shares.append(probe.progress_share())
    print(f"GIL release: a Python thread kept running during {shares[0]:.0%} of the native "
          f"calls (PYFUNCTYPE: {shares[1]:.0%})")
    assert shares[0] >= 0.75
    assert shares[1] <= 0.25


def test_prewarm_then_nothing_compiles(fresh):
    specs = [ex.AXPY, ex.SUM, ex.AXPY.with_static(n=1024), ex.EXP_MAP]
    rows = prewarm(specs)
    assert [r.name for r in rows] == ["example.axpy", "example.sum", "example.exp_map"]
    assert {r.status for r in rows} == {"miss"} and all(r.compile_ms > 0 for r in rows)
    assert rows[0].static.removeprefix("_debug=true ") == "n=1024"  # (CUVIL_KERNEL_DEBUG=1)
    before = compile_stats()
    again = prewarm(specs)
    for spec in specs:
        get_kernel(spec)
    assert {r.status for r in again} == {"memory"}
    assert compile_stats().compiles == before.compiles
    get_kernel(ex.SUM.with_static(n=77))  # a spec prewarm did not see: counted (rt.op_prewarm)
    assert compile_stats().compiles == before.compiles + 1
    registry.clear_memory()
    assert {r.status for r in prewarm(specs)} == {"hit"}  # a new process would hit the disk


def test_dump_ir_and_perf_map(fresh, monkeypatch):
    dump = fresh / "dump"
    monkeypatch.setenv("CUVIL_DUMP_IR", str(dump))
    monkeypatch.setenv("CUVIL_PERF_MAP", "1")
    perf = f"/tmp/perf-{os.getpid()}.map"
    start = os.path.getsize(perf) if os.path.exists(perf) else 0
    k = get_kernel(ex.AXPY.with_static(n=99))
    stem = f"example.axpy-{k.key[:8]}"
    assert "define void @cuvil_example_axpy" in (dump / f"{stem}.ll").read_text()
    assert "cuvil_example_axpy:" in (dump / f"{stem}.s").read_text()
    with open(perf) as fh:
        fh.seek(start)
        lines = fh.read().splitlines()
    addr, size, name = lines[-1].split()
    assert int(addr, 16) == k.address and int(size, 16) == k.size > 16
    assert name == "cuvil:example.axpy"


@pytest.mark.parametrize("triple,machine", [("aarch64-linux-gnu", 183),
                                            ("riscv64-linux-gnu", 243)])
def test_cross_target_object_names_its_machine(triple, machine, tmp_path):
    obj = emit_object(ex.EXP_MAP, triple)
    assert obj[:4] == b"\x7fELF"
    assert struct.unpack_from("<H", obj, 18)[0] == machine
    (path,) = write_objects([ex.AXPY], triple, tmp_path / "out")
    assert path.name.startswith("example.axpy-") and path.suffix == ".o"
    assert struct.unpack_from("<H", path.read_bytes(), 18)[0] == machine


def test_unknown_triple_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown target triple 'nope-nope'"):
        emit_object(ex.AXPY, "nope-nope")


def _bad_build(module, fn_name, *, n):
    raise ValueError(f"cannot handle n={n}")


def _wrong_signature(module, fn_name, *, n):
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name=fn_name)
    ir.IRBuilder(fn.append_basic_block()).ret_void()


def test_generator_errors_name_the_kernel(fresh):
    with pytest.raises(CompileError, match=r"kernel t\.bad \(n=3\).*cannot handle n=3"):
        get_kernel(KernelSpec("t.bad", _bad_build, {"n": 3}, ("ptr",)))
    with pytest.raises(CompileError, match="t.sig: function type"):
        get_kernel(KernelSpec("t.sig", _wrong_signature, {"n": 3}, ("ptr",)))
    with pytest.raises(CompileError, match="unknown arg/ret kind 'float'"):
        KernelSpec("t.kind", _bad_build, {}, ("float",))
    with pytest.raises(CompileError, match="not JSON-serialisable"):
        KernelSpec("t.json", _bad_build, {"a": object()}, ())


def test_memo_hits_are_not_blocked_by_a_compilation(fresh):
    k = get_kernel(ex.AXPY)
    done = threading.Event()
    with registry._lock:  # as if another thread were compiling right now
        t = threading.Thread(target=lambda: get_kernel(ex.AXPY) is k and done.set())
        t.start()
        assert done.wait(2.0), "a memoised kernel waited for the compile lock"
    t.join()


def test_unwritable_cache_warns_and_still_works(fresh, monkeypatch):
    blocker = fresh / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(blocker))
    with pytest.warns(UserWarning, match="cannot write"):
        k = get_kernel(ex.AXPY.with_static(n=5))
    x = np.ones(5, np.float32)
    y = np.zeros(5, np.float32)
    k(x.ctypes.data, y.ctypes.data, 2.0)
    assert (y == 2.0).all()
