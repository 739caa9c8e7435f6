"""The disk cache: key material, integrity checks, concurrent writers, info/clear, switches."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from cuvil_perception import temp_files
from cuvil_perception.compile import (CacheCorruptionWarning, cache_clear, cache_info,
                                      compile_stats, get_kernel, host_target)
from cuvil_perception.compile import cache as disk
from cuvil_perception.compile import examples as ex
from cuvil_perception.compile import registry
from cuvil_perception.compile.keys import cache_key
from cuvil_perception.compile.lang import Buf, f32, kernel
from cuvil_perception.compile.optimize import DEFAULT_OPTIONS
from cuvil_perception.compile.render_ir import render


def _key(spec=ex.AXPY, target=None, opts=DEFAULT_OPTIONS, ir_text=None):
    return cache_key(ir_text or render(spec), spec, target or host_target(), opts)


def test_key_changes_with_every_input():
    base = _key()
    assert base == _key()  # deterministic
    ir_text = render(ex.AXPY)
    t = host_target()
    variants = {
        "ir": _key(ir_text=ir_text.replace("1024", "1025")),
        "static (via ir)": _key(ex.AXPY.with_static(n=2048)),
        "features": _key(target=dataclasses.replace(t, features=t.features.replace("+avx2",
                                                                                  "-avx2"))),
        "cpu": _key(target=dataclasses.replace(t, cpu="skylake")),
        "triple": _key(target=dataclasses.replace(t, triple="x86_64-pc-linux-musl")),
        "options": _key(opts=dataclasses.replace(DEFAULT_OPTIONS, slp_vectorization=False)),
        "opt level": _key(opts=dataclasses.replace(DEFAULT_OPTIONS, speed_level=2)),
        "version": _key(dataclasses.replace(ex.AXPY, version=2), ir_text=ir_text),
    }
    assert "+avx2" in t.features or "-avx2" in t.features
    for what, key in variants.items():
        assert key != base, f"key did not change with {what}"
    assert len(set(variants.values())) == len(variants)


@kernel(name="test.same_ir")
def same_ir(x: Buf[f32, 4], *, tag: int):
    x[0] = 1.0


def test_specs_with_the_same_ir_have_their_own_entries(cache_dir):
    """Specs differing only in a static param the code ignores compile to the same IR; one
    key for both had each evict the other on every load with a 'wrong alias' warning."""
    a, b = same_ir.spec(tag=1), same_ir.spec(tag=2)
    assert render(a) == render(b) and _key(a) != _key(b)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheCorruptionWarning)
        for _ in range(2):
            get_kernel(a), get_kernel(b)
            registry.clear_memory()  # as if a new process started
        assert [registry.acquire(s).status for s in (a, b)] == ["hit", "hit"]
    assert cache_info()["entries"] == 2


def test_miss_then_hit_across_processes_state(cache_dir):
    before = compile_stats()
    get_kernel(ex.AXPY)
    mid = compile_stats()
    assert mid.compiles == before.compiles + 1
    assert cache_info()["entries"] == 1
    registry.clear_memory()  # as if a new process started
    get_kernel(ex.AXPY)
    after = compile_stats()
    assert after.compiles == mid.compiles and after.disk_hits == mid.disk_hits + 1
    info = cache_info()
    assert (info["entries"], info["hits"], info["misses"]) == (1, 1, 1)
    assert info["bytes"] > 0 and info["dir"].startswith(str(cache_dir))


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage-header"])
def test_corrupt_entry_warns_and_is_rebuilt(cache_dir, damage):
    get_kernel(ex.AXPY)
    (entry,) = disk.store_dir().glob("*.obj")
    blob = entry.read_bytes()
    damaged = {"truncate": blob[: len(blob) - 100], "flip": blob[:-10] + bytes([blob[-10] ^ 1])
               + blob[-9:], "empty": b"", "garbage-header": b"NOTCUVIL" + blob[8:]}[damage]
    entry.write_bytes(damaged)
    registry.clear_memory()
    before = compile_stats().compiles
    with pytest.warns(CacheCorruptionWarning, match="corrupt"):
        k = get_kernel(ex.AXPY)
    assert compile_stats().compiles == before + 1
    assert entry.read_bytes() == blob  # rewritten, identical object code
    import numpy as np
    x = np.ones(1024, np.float32)
    y = np.zeros(1024, np.float32)
    k(x.ctypes.data, y.ctypes.data, 2.0)
    assert (y == 2.0).all()


_RACE = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    go = Path(sys.argv[1])
    while not go.exists():
        time.sleep(0.001)
    from cuvil_perception.compile import compile_stats, get_kernel
    from cuvil_perception.compile import examples as ex
    import numpy as np
    k = get_kernel(ex.AXPY.with_static(n=4096))
    x = np.ones(4096, np.float32); y = np.ones(4096, np.float32)
    k(x.ctypes.data, y.ctypes.data, 3.0)
    assert (y == 4.0).all()
    s = compile_stats()
    print(s.compiles, s.disk_hits)
""")


def test_two_processes_compile_one_kernel_at_once(cache_dir, tmp_path):
    go = tmp_path / "go"
    env = {**os.environ, "CUVIL_CACHE_DIR": str(cache_dir)}
    # Import llvmlite etc. before the start signal so both reach get_kernel together.
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, str(go)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    go.touch()
    results = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
    entries = list(disk.store_dir().glob("*.obj"))
    assert len(entries) == 1
    payload, problem = disk.decode(entries[0].read_bytes())
    assert problem is None and payload[:4] == b"\x7fELF"
    assert not list(disk.store_dir().glob(".*.tmp"))
    counts = [tuple(map(int, out.split())) for out, _ in results]
    assert all(c + h == 1 for c, h in counts)  # each process either compiled or hit


def test_cache_clear_and_info(cache_dir):
    get_kernel(ex.AXPY)
    get_kernel(ex.SUM)
    assert cache_info()["entries"] == 2
    assert cache_clear() == 2
    info = cache_info()
    assert (info["entries"], info["bytes"], info["hits"], info["misses"]) == (0, 0, 0, 0)
    assert cache_clear() == 0


def test_no_disk_cache_switch(cache_dir, monkeypatch):
    monkeypatch.setenv("CUVIL_NO_DISK_CACHE", "1")
    get_kernel(ex.AXPY)
    assert not cache_dir.exists() or cache_info()["entries"] == 0


def test_cache_dir_is_read_at_call_time(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "a"))
    assert disk.store_dir().parent == tmp_path / "a"
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "b"))
    assert disk.store_dir().parent == tmp_path / "b"


def test_decode_rejects_what_encode_did_not_write():
    blob = disk.encode(b"payload", {"name": "x"})
    assert disk.decode(blob) == (b"payload", None)
    for bad in (blob[:10], blob + b"x", blob[:-1] + b"X"):
        payload, problem = disk.decode(bad)
        assert payload is None and problem
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert disk.read_meta(Path("/nonexistent")) == {}


def test_warm_start_uses_the_alias_and_renders_nothing(cache_dir, monkeypatch):
    get_kernel(ex.SUM)
    assert len(list(disk.store_dir().glob("*.alias"))) == 1
    registry.clear_memory()

    def no_render(spec):
        raise AssertionError("rendered IR on a warm start")

    monkeypatch.setattr(registry, "render", no_render)
    before = compile_stats()
    k = get_kernel(ex.SUM)
    assert compile_stats().disk_hits == before.disk_hits + 1
    import numpy as np
    x = np.ones(ex.SUM.static["n"], np.float32)
    assert k(x.ctypes.data) == ex.SUM.static["n"]


def test_source_change_or_bad_alias_falls_back_to_the_ir_key(cache_dir, monkeypatch):
    from cuvil_perception.compile import keys
    get_kernel(ex.AXPY)
    (alias,) = disk.store_dir().glob("*.alias")
    registry.clear_memory()
    alias.write_text("not a key")
    before = compile_stats()
    assert registry.acquire(ex.AXPY).status == "hit"  # found by rendering + IR key
    assert compile_stats().compiles == before.compiles
    assert disk.get_alias(alias.stem) is not None  # repaired
    registry.clear_memory()
    monkeypatch.setattr(keys, "tree_digest", lambda d, recursive=True: "edited-sources")
    assert keys.fast_key(ex.AXPY, host_target(), DEFAULT_OPTIONS) != alias.stem
    assert registry.acquire(ex.AXPY).status == "hit"
    assert len(list(disk.store_dir().glob("*.alias"))) == 2


def test_generator_without_source_file_has_no_alias():
    from cuvil_perception.compile import KernelSpec, keys
    namespace: dict = {}
    exec("def build(module, fn_name):\n    pass\n", namespace)  # no file behind it
    spec = KernelSpec("t.nosource", namespace["build"], {}, ())
    assert keys.fast_key(spec, host_target(), DEFAULT_OPTIONS) is None
    assert keys.fast_key(ex.AXPY, host_target(), DEFAULT_OPTIONS) is not None


def _temp_name(output: str, pid: int) -> str:
    return f".{output}.cuvil-{temp_files.host_tag()}-{pid}-0123456789ab.tmp"


def test_a_killed_writers_temp_is_removed_by_the_next_write(cache_dir):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its PID names no process any more
    store = disk.ensure_private_dir()
    stale = store / _temp_name("a" * 64 + ".obj", dead.pid)
    live = store / _temp_name("b" * 64 + ".obj", os.getpid())  # a writer still at work
    old_format = store / ".tmp-k2j4h1.part"  # what earlier versions wrote through mkstemp
    for path in (stale, live, old_format):
        path.write_bytes(b"half an entry")
    get_kernel(ex.AXPY)  # compiles and writes the entry and its alias
    assert not stale.exists() and live.exists() and old_format.exists()
    assert cache_clear() == 1
    assert live.exists() and not old_format.exists()
    assert sorted(p.name for p in store.iterdir()) == [live.name]


@kernel(name="test.slp_pair")
def slp_pair(p: Buf[f32, "n", 4], out: Buf[f32, "n", 4], *, n: int):
    for i in range(n):
        out[i, 0], out[i, 1] = p[i, 0] * 2.0 + p[i, 1], p[i, 1] * 2.0 + p[i, 0]


def test_a_kernel_without_slp_is_compiled_and_keyed_apart(cache_dir):
    """``slp=False`` is part of the spec's identity and of its options (the cache key), and
    the two builds give the same bits."""
    import numpy as np

    from cuvil_perception.compile.keys import fast_key
    from cuvil_perception.compile.optimize import options_for

    off = kernel(slp_pair.py_func, name="test.slp_pair", slp=False)
    on_spec, off_spec = slp_pair.spec(n=64), off.spec(n=64)
    assert on_spec != off_spec and off_spec.slp is False
    assert options_for(on_spec) == DEFAULT_OPTIONS
    assert not options_for(off_spec).slp_vectorization
    t = host_target()
    assert fast_key(on_spec, t, options_for(on_spec)) != \
        fast_key(off_spec, t, options_for(off_spec))
    assert _key(on_spec, opts=options_for(on_spec)) != _key(off_spec, opts=options_for(off_spec))
    p = np.random.default_rng(0).standard_normal((64, 4)).astype(np.float32)
    outs = [np.zeros((64, 4), np.float32) for _ in range(2)]
    slp_pair(p, outs[0])
    off(p, outs[1])
    assert outs[0].tobytes() == outs[1].tobytes()
    assert get_kernel(on_spec) is not get_kernel(off_spec)
