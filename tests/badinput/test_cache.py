"""Bad-input catalogue, kernel cache: entries that are not what their file name says.

Rows damage a warm cache the ways a user, a script or a crash can (an entry copied over
another, two entries swapped, an entry or an alias replaced by something else) and then ask for
the kernel again (one by one, or all at once as a warm start's prewarm does). Each must be
detected: a `CacheCorruptionWarning` naming the entry, a recompilation, a correct kernel, and a
cache that is whole again (the next lookup is a hit: nothing recompiles forever). The folders
are private whatever the umask.
"""

from __future__ import annotations

import os
import shutil
import stat
import warnings
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile import CacheCorruptionWarning, compile_stats, get_kernel, prewarm
from cuvil_perception.compile import cache as disk
from cuvil_perception.compile import examples as ex
from cuvil_perception.compile import registry

from ._runner import cli

A = ex.AXPY.with_static(n=1024)
B = ex.AXPY.with_static(n=2048)


def _warm() -> dict[str, Path]:
    """Compile A and B; their entry and alias paths (by name)."""
    before = set(disk.store_dir().glob("*")) if disk.store_dir().is_dir() else set()
    get_kernel(A)
    a_files = set(disk.store_dir().glob("*")) - before
    get_kernel(B)
    b_files = set(disk.store_dir().glob("*")) - before - a_files
    pick = {}
    for name, files in (("a", a_files), ("b", b_files)):
        pick[f"{name}.obj"] = next(p for p in files if p.suffix == ".obj")
        pick[f"{name}.alias"] = next(p for p in files if p.suffix == ".alias")
    return pick


def _swap(one: Path, two: Path) -> None:
    tmp = one.with_name("swap.tmp")
    one.rename(tmp)
    two.rename(one)
    tmp.rename(two)


def _copy_over(files):
    shutil.copyfile(files["b.obj"], files["a.obj"])
    return "copied or swapped"


def _swap_entries(files):
    _swap(files["a.obj"], files["b.obj"])
    return "copied or swapped"


def _entry_is_a_directory(files):
    files["a.obj"].unlink()
    files["a.obj"].mkdir()
    (files["a.obj"] / "junk").write_bytes(b"x")
    return "cannot be read"


def _swap_aliases(files):
    _swap(files["a.alias"], files["b.alias"])
    return None  # an alias that does not name its own key is a quiet miss


def _alias_pointing_elsewhere(files):
    fast = files["a.alias"].stem
    other = files["b.alias"].read_text().split()[1]
    files["a.alias"].write_text(f"{fast} {other}\n")
    return "a wrong alias"


def _alias_is_a_directory(files):
    files["a.alias"].unlink()
    files["a.alias"].mkdir()
    return None


ROWS = {"object-copied-over-another": _copy_over, "objects-swapped": _swap_entries,
        "object-replaced-by-directory": _entry_is_a_directory, "aliases-swapped": _swap_aliases,
        "alias-points-to-another-kernel": _alias_pointing_elsewhere,
        "alias-replaced-by-directory": _alias_is_a_directory}


def _check_axpy(kernel, n: int) -> None:
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, np.float32)
    kernel(x.ctypes.data, y.ctypes.data, 2.0)
    np.testing.assert_array_equal(y, 1.0 + 2.0 * x)


@pytest.mark.parametrize("via", ["get_kernel", "prewarm"])
@pytest.mark.parametrize("damage", list(ROWS.values()), ids=list(ROWS))
def test_damaged_cache_is_detected_rebuilt_and_whole_again(cache_dir, damage, via):
    files = _warm()
    originals = {name: path.read_bytes() for name, path in files.items() if name.endswith("obj")}
    expected = damage(files)
    registry.clear_memory()  # as if a new process started
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if via == "prewarm":  # the warm-start path: cache hits loaded together
            prewarm([A, B])
        _check_axpy(get_kernel(A), 1024)
        _check_axpy(get_kernel(B), 2048)
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheCorruptionWarning)]
    if expected is None:
        assert not messages, messages
    else:
        assert messages and all(expected in m and str(cache_dir) in m for m in messages), messages
        assert all("\n" not in m for m in messages)
    for name, blob in originals.items():
        assert files[name].is_file() and files[name].read_bytes() == blob, name
    registry.clear_memory()
    before = compile_stats().compiles
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a whole cache: no warning, no compilation
        get_kernel(A)
        get_kernel(B)
    assert compile_stats().compiles == before


def test_folders_and_files_are_private_under_a_permissive_umask(cache_dir):
    old = os.umask(0)
    try:
        get_kernel(A)
    finally:
        os.umask(old)
    for folder in (cache_dir, disk.store_dir()):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for path in disk.store_dir().iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_world_writable_cache_folder_of_ours_is_tightened(cache_dir):
    disk.store_dir().mkdir(parents=True)
    os.chmod(disk.store_dir(), 0o777)
    get_kernel(A)
    assert stat.S_IMODE(disk.store_dir().stat().st_mode) == 0o700


def test_compile_verb_reports_swapped_entries_as_one_line_warnings(cache_dir, tmp_path):
    import cuvil_perception.testing.ops  # noqa: F401  (registers test.native_spin)

    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("stages:\n  - {id: src, op: test.scripted, params: {n: 64}}\n"
                        "  - {id: spin, op: test.native_spin, inputs: {x: src/value}}\n"
                        "  - {id: spin2, op: test.native_spin, inputs: {x: src/value}}\n")
    first = cli("compile", str(pipeline))
    assert first.code == 0 and not first.crash, first
    registry.clear_memory()
    get_kernel(A)
    entries = sorted(disk.store_dir().glob("*.obj"))
    assert len(entries) == 2
    _swap(*entries)
    registry.clear_memory()
    result = cli("compile", str(pipeline))
    assert result.code == 0 and not result.crash and "Traceback" not in result.stderr, result
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and all(line.startswith("warning: kernel cache entry") and
                         "copied or swapped" in line for line in lines), result.stderr
