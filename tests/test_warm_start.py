"""Warm start (issue 12): cache hits loaded together, objects exporting one symbol, and cache
keys that follow the sources - a kernel's helpers (transitively) and the constants it reads -
by content, in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
from llvmlite import ir

from cuvil_perception.compile import KernelSpec, irutil as u, prewarm, registry, source_digests
from cuvil_perception.compile import cache as disk
from cuvil_perception.compile.lang import Buf, f32, kernel
from cuvil_perception.compile.render_ir import render


@kernel(name="t.warm_fill")
def warm_fill(y: Buf[f32, "n"], a: f32, *, n: int):
    for i in range(n):
        y[i] = a


@kernel(name="t.warm_sum")
def warm_sum(x: Buf[f32, "n"], *, n: int) -> f32:
    total: f32 = 0.0
    for i in range(n):
        total += x[i]
    return total


def test_prewarm_loads_hits_together_and_each_kernel_keeps_its_own_code(cache_dir):
    small, big, total = warm_fill.spec(n=16), warm_fill.spec(n=64), warm_sum.spec(n=8)
    specs = [small, big, total]
    assert [r.status for r in prewarm(specs)] == ["miss"] * 3
    registry.clear_memory()
    assert [r.status for r in prewarm(specs)] == ["hit"] * 3
    ks = [registry.get_kernel(s) for s in specs]
    # distinct kernels share an engine; two objects of one kernel (fill) cannot
    assert ks[0].engine is ks[2].engine and ks[1].engine is not ks[0].engine
    for spec, k in ((small, ks[0]), (big, ks[1])):
        n = spec.static["n"]
        y = np.zeros(n + 8, np.float32)
        k(y.ctypes.data, 2.0)
        assert y[:n].tolist() == [2.0] * n and not y[n:].any()  # its own n, not the other's
    assert ks[2](np.arange(8, dtype=np.float32).ctypes.data) == 28.0


def _build_table(value: int):
    """A kernel returning ``table[0]`` from a global table, read through a helper function:
    both are module definitions besides the kernel, named alike in every kernel."""
    def build(module: ir.Module, fn_name: str) -> None:
        table = ir.GlobalVariable(module, u.I64, "table")
        table.initializer = ir.Constant(u.I64, value)
        helper = ir.Function(module, ir.FunctionType(u.I64, []), name="read_table")
        hb = ir.IRBuilder(helper.append_basic_block("entry"))
        hb.ret(hb.load(table, typ=u.I64))
        fn = ir.Function(module, ir.FunctionType(u.I64, []), name=fn_name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.ret(b.call(helper, []))
    build.__qualname__ = f"table_{value}"
    return build


def test_objects_export_only_their_kernel_so_shared_engines_cannot_mix_them(cache_dir):
    specs = [KernelSpec(f"t.table{v}", _build_table(v), {}, (), ret="i64") for v in (7, 9)]
    text = render(specs[0])
    assert '@"table" = internal global' in text and 'define internal i64 @"read_table"' in text
    prewarm(specs)
    registry.clear_memory()
    assert [r.status for r in prewarm(specs)] == ["hit", "hit"]
    a, b = (registry.get_kernel(s) for s in specs)
    assert a.engine is b.engine and (a(), b()) == (7, 9)


def test_source_digests_are_of_content_not_of_time_stamps(tmp_path):
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / ".hidden").mkdir()
    f = tmp_path / "pkg" / "a.py"
    f.write_text("X = 1\n")
    (tmp_path / "pkg" / "__pycache__" / "junk.py").write_text("1")
    (tmp_path / "pkg" / ".hidden" / "junk.py").write_text("1")
    first = source_digests.tree_digest(str(tmp_path))
    stat = f.stat()
    f.write_text("X = 2\n")  # same size, then the same time stamps as before
    os.utime(f, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert source_digests.tree_digest(str(tmp_path)) == first  # memoised for the process
    source_digests.forget()
    assert source_digests.tree_digest(str(tmp_path)) != first
    (tmp_path / "pkg" / "__pycache__" / "junk.py").write_text("2")
    (tmp_path / "pkg" / ".hidden" / "junk.py").write_text("2")
    second = source_digests.tree_digest(str(tmp_path))
    source_digests.forget()
    assert source_digests.tree_digest(str(tmp_path)) == second  # those folders are not sources


_USER_FILES = {
    "__init__.py": "",
    "params.py": "OFFSET = 1.0\n",
    "unrelated.py": "VALUE = 1\n",
    "deep.py": """
        from cuvil_perception.compile.lang import inline

        @inline
        def bump(v):
            return v + 0.5
    """,
    "helpers.py": """
        from cuvil_perception.compile.lang import inline

        from .deep import bump

        @inline
        def scale(v):
            return bump(v * 2.0)
    """,
    "kern.py": """
        from cuvil_perception.compile.lang import Buf, f32, kernel

        from .helpers import scale
        from .params import OFFSET

        @kernel(name="userk.scaled")
        def scaled(x: Buf[f32, "n"], y: Buf[f32, "n"], *, n: int):
            for i in range(n):
                y[i] = scale(x[i]) + OFFSET
    """,
}

_RUN = """
import json
import numpy as np
from cuvil_perception.compile import prewarm
from userk.kern import scaled
rows = prewarm([scaled.spec(n=4)])
x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
scaled(x, y, n=4)
print(json.dumps([rows[0].status, y.tolist()]))
"""


def test_editing_a_helper_or_a_constant_recompiles_in_a_fresh_process(tmp_path):
    package = tmp_path / "userk"
    package.mkdir()
    for name, text in _USER_FILES.items():
        (package / name).write_text(textwrap.dedent(text))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1",
           "CUVIL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("CUVIL_NO_DISK_CACHE", None)

    def run():
        out = subprocess.run([sys.executable, "-c", _RUN], env=env, capture_output=True,
                             text=True, check=True).stdout
        return tuple(json.loads(out.splitlines()[-1]))

    def edit(name, old, new):
        path = package / name
        path.write_text(path.read_text().replace(old, new))

    assert run() == ("miss", [1.5, 3.5, 5.5, 7.5])
    assert run() == ("hit", [1.5, 3.5, 5.5, 7.5])
    edit("deep.py", "0.5", "0.25")   # a helper of a helper, in a third module
    assert run() == ("miss", [1.25, 3.25, 5.25, 7.25])
    edit("params.py", "1.0", "2.0")  # a constant the kernel imports from elsewhere
    assert run() == ("miss", [2.25, 4.25, 6.25, 8.25])
    edit("unrelated.py", "1", "2")   # nothing the kernel reaches: still a warm hit
    assert run() == ("hit", [2.25, 4.25, 6.25, 8.25])


def test_source_digests_are_reused_from_the_index_until_the_file_changes(
        tmp_path, cache_dir, monkeypatch):
    f = tmp_path / "a.py"
    f.write_text("X = 1\n")
    registry.acquire(KernelSpec("t.index_probe", _build_table(3), {}, (), ret="i64"))  # a store
    monkeypatch.setattr(source_digests, "RACY_NS", 0)  # (else only files older than 2 s are recorded)
    time.sleep(0.05)                          # (past the file system's time stamp granularity)
    source_digests.forget()
    first = source_digests.file_digest(str(f))
    source_digests.save_index()
    source_digests.forget()                          # as a new process: the index is read back
    opened = []
    monkeypatch.setattr(source_digests, "open", lambda *a, **k: opened.append(a) or open(*a, **k),
                        raising=False)
    assert source_digests.file_digest(str(f)) == first and not opened  # not read again
    info = f.stat()
    f.write_text("X = 2\n")                   # same size, then the same mtime as before:
    os.utime(f, ns=(info.st_atime_ns, info.st_mtime_ns))  # the ctime still moves
    source_digests.forget()
    assert source_digests.file_digest(str(f)) != first and opened
    digests = cache_dir / disk.SUBDIR / disk.DIGESTS
    assert digests.is_file()
    disk.cache_clear()                        # `cache clear` takes the index with the objects
    assert not digests.exists()
    source_digests.forget()
