"""Bad-input catalogue, kernel cache trust: folders and entries that are not the user's alone.

A planted object is a valid cache entry under a real kernel's key whose code is someone else's
(here: a kernel of the same name and signature that writes 12345.0). The control row shows the
plant would run if it were trusted; every other row shows it never does: a folder owned by
another user (``nobody``; the tests run as root, which can chown) is refused with exit 2 when
``CUVIL_CACHE_DIR`` names it and replaced by a private cache when it is the default folder; a
0777 folder of ours is tightened and an entry of someone else's in it is not loaded; a FIFO or
a symbolic link in an entry's place neither hangs nor is followed.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile import CacheCorruptionWarning, compile_stats, get_kernel, prewarm
from cuvil_perception.compile import cache as disk
from cuvil_perception.compile import cache_trust, registry
from cuvil_perception.compile import examples as ex
from cuvil_perception.compile.lang import Buf, f32, kernel
from cuvil_perception.errors import CacheTrustError

from ._runner import REPO, assert_one_line_error, cli

A = ex.AXPY.with_static(n=1024)
NOBODY = 65534
EVIL = 12345.0


@kernel(name="example.axpy", fastmath=ex.CONTRACT)
def _evil_axpy(x: Buf[f32, "n"], y: Buf[f32, "n"], a: f32, *, n: int):
    """Same name and signature as ``example.axpy``; writes a marker instead."""
    for i in range(n):
        y[i] = 12345.0


def _run_axpy(kernel) -> np.ndarray:
    x = np.arange(1024, dtype=np.float32)
    y = np.ones(1024, np.float32)
    kernel(x.ctypes.data, y.ctypes.data, 2.0)
    return y


def _plant(cache: Path, tmp_path: Path) -> Path:
    """Warm ``cache`` with A, then put the evil object's code in A's entry; returns the entry."""
    os.environ["CUVIL_CACHE_DIR"] = str(tmp_path / "evil-build")
    registry.clear_memory()
    get_kernel(_evil_axpy.spec(n=1024))
    evil_entry = next(disk.store_dir().glob("*.obj"))
    evil_code, _ = disk.decode(evil_entry.read_bytes())
    os.environ["CUVIL_CACHE_DIR"] = str(cache)
    registry.clear_memory()
    get_kernel(A)
    entry = next(disk.store_dir().glob("*.obj"))
    meta = disk.read_meta(entry)
    entry.write_bytes(disk.encode(evil_code, meta))
    registry.clear_memory()
    return entry


def _chown_tree(root: Path, uid: int) -> None:
    for path in [root, *root.rglob("*")]:
        os.lchown(path, uid, uid)


@pytest.fixture
def planted(cache_dir, tmp_path):
    return _plant(cache_dir, tmp_path)


def test_control_a_planted_object_in_a_trusted_folder_runs(planted):
    """The plant is loadable: were a folder trusted, its code would run (so the rows below can
    fail)."""
    assert (_run_axpy(get_kernel(A)) == EVIL).all()


def test_named_folder_owned_by_another_user_is_refused(cache_dir, planted):
    _chown_tree(cache_dir, NOBODY)
    with pytest.raises(CacheTrustError, match=f"{cache_dir}.*owned by uid {NOBODY}"):
        get_kernel(A)
    with pytest.raises(CacheTrustError):
        prewarm([A])


@pytest.mark.parametrize("verb", ["compile", "inspect"])
def test_named_folder_owned_by_another_user_exits_2(cache_dir, planted, tmp_path, verb):
    _chown_tree(cache_dir, NOBODY)
    result = cli(verb, str(_spin_pipeline(tmp_path)))
    assert_one_line_error(result, str(cache_dir), "CUVIL_CACHE_DIR", f"uid {NOBODY}",
                          "not loaded from")


def test_named_folder_through_a_symlink_to_another_users_folder_is_refused(
        cache_dir, planted, tmp_path, monkeypatch):
    _chown_tree(cache_dir, NOBODY)
    link = tmp_path / "link-to-cache"
    link.symlink_to(cache_dir)
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(link))
    with pytest.raises(CacheTrustError, match=str(link)):
        get_kernel(A)


def test_named_folder_through_a_symlinked_parent_of_ours_is_used(cache_dir, tmp_path,
                                                                 monkeypatch):
    get_kernel(A)
    registry.clear_memory()
    (tmp_path / "parent-link").symlink_to(cache_dir.parent)
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "parent-link" / cache_dir.name))
    before = compile_stats().compiles
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run_axpy(get_kernel(A))
    assert compile_stats().compiles == before  # a hit: the folder is ours


def test_default_folder_of_another_user_gives_a_warning_and_a_private_cache(
        planted, tmp_path, monkeypatch):
    cache = planted.parent.parent
    _chown_tree(cache, NOBODY)
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    cache.rename(xdg / "cuvil-perception")
    monkeypatch.delenv("CUVIL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    cache_trust._private.clear()
    try:
        with pytest.warns(cache_trust.CacheTrustWarning, match="private cache") as caught:
            y = _run_axpy(get_kernel(A))
        assert (y == 1.0 + 2.0 * np.arange(1024, dtype=np.float32)).all()
        message = str(caught[0].message)
        assert str(xdg / "cuvil-perception") in message and "\n" not in message
        private = disk.store_dir().parent
        assert private.owner() == "root" and stat.S_IMODE(private.stat().st_mode) == 0o700
        assert not str(private).startswith(str(xdg))
    finally:
        cache_trust._private.clear()


def test_a_0777_folder_of_ours_is_tightened_and_a_planted_entry_never_runs(cache_dir, planted):
    os.chmod(cache_dir, 0o777)
    os.chmod(planted.parent, 0o777)
    os.chown(planted, NOBODY, NOBODY)  # someone else wrote it while the folder was open
    with pytest.warns(CacheCorruptionWarning, match=f"owned by uid {NOBODY}"):
        y = _run_axpy(get_kernel(A))
    assert (y != EVIL).all()
    for folder in (cache_dir, planted.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert planted.stat().st_uid == 0  # rewritten by us


def test_an_entry_writable_by_others_is_not_loaded(cache_dir, planted):
    os.chmod(planted, 0o666)
    with pytest.warns(CacheCorruptionWarning, match="writable by others"):
        assert (_run_axpy(get_kernel(A)) != EVIL).all()


def test_folders_are_tightened_on_a_warm_start_with_every_kernel_a_hit(cache_dir):
    get_kernel(A)
    os.chmod(cache_dir, 0o777)
    os.chmod(disk.store_dir(), 0o777)
    registry.clear_memory()
    before = compile_stats().compiles
    prewarm([A])
    assert compile_stats().compiles == before
    for folder in (cache_dir, cache_dir / "objects-v2"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def _fifo_entry(entry: Path) -> None:
    entry.unlink()
    os.mkfifo(entry)


def _link_to_fifo(entry: Path) -> None:
    entry.unlink()
    os.mkfifo(entry.with_name("fifo"))
    entry.symlink_to(entry.with_name("fifo"))


def _link_to_a_valid_entry(entry: Path) -> None:
    entry.rename(entry.with_name("elsewhere"))
    entry.symlink_to(entry.with_name("elsewhere"))


ENTRY_ROWS = {"fifo": (_fifo_entry, "a FIFO"), "link-to-fifo": (_link_to_fifo, "symbolic link"),
              "link-to-valid-entry": (_link_to_a_valid_entry, "symbolic link")}


def _within(seconds: float, call):
    """``call()``'s result, or a failure when it does not return in time (a hang)."""
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "hung"
    return out.get("value")


@pytest.mark.parametrize("what", ["object", "alias"])
@pytest.mark.parametrize("row", list(ENTRY_ROWS), ids=list(ENTRY_ROWS))
def test_an_entry_that_is_a_fifo_or_a_link_neither_hangs_nor_is_followed(cache_dir, row, what):
    get_kernel(A)
    registry.clear_memory()
    entry = next(disk.store_dir().glob(f"*.{'obj' if what == 'object' else 'alias'}"))
    damage, phrase = ENTRY_ROWS[row]
    damage(entry)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = _within(60, lambda: _run_axpy(get_kernel(A)))
    assert (y == 1.0 + 2.0 * np.arange(1024, dtype=np.float32)).all()
    messages = [str(w.message) for w in caught]
    if what == "object":  # an alias that is not ours is a quiet miss
        assert any(phrase in m and str(entry) in m for m in messages), messages
    assert entry.is_file() and not entry.is_symlink()  # rewritten in place


def test_a_fifo_journal_does_not_hang_a_run_or_cache_info(cache_dir):
    get_kernel(A)
    registry.clear_memory()
    journal = disk.store_dir() / "journal"
    journal.unlink()
    os.mkfifo(journal)
    _within(60, lambda: _run_axpy(get_kernel(A)))
    result = _within(60, lambda: cli("cache", "info"))
    assert result.code == 0 and not result.crash, result


def _spin_pipeline(tmp_path: Path) -> Path:
    import cuvil_perception.testing.ops  # noqa: F401  (registers test.native_spin)

    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("stages:\n  - {id: src, op: test.scripted, params: {n: 64}}\n"
                        "  - {id: spin, op: test.native_spin, inputs: {x: src/value}}\n")
    return pipeline


_READ_ONLY = """
set -e
mount -t tmpfs tmpfs "$1"
cp -a "$2"/. "$1"/
chown -R {owner}:{owner} "$1"
chmod 0777 "$1" "$1"/objects-v2
mount -o remount,ro "$1"
CUVIL_CACHE_DIR="$1" exec "$3" -c "$5" compile "$4"
"""
_CLI = ("import cuvil_perception.testing.ops; from cuvil_perception.cli.app import cli; "
        "cli(prog_name='cuvil-perception')")


@pytest.mark.parametrize("owner", [0, NOBODY], ids=["ours", "nobody"])
def test_a_cache_on_a_read_only_file_system(cache_dir, tmp_path, owner):
    """0777 on a read-only file system cannot be tightened, and nobody can write it: used as it
    is when ours; another user's is still refused (in a private mount namespace)."""
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace here (needs root and unshare)")
    pipeline = _spin_pipeline(tmp_path)
    assert cli("compile", str(pipeline)).code == 0
    mount = tmp_path / "ro"
    mount.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    done = subprocess.run(["unshare", "-m", "sh", "-c", _READ_ONLY.format(owner=owner), "sh",
                           str(mount), str(cache_dir), sys.executable, str(pipeline), _CLI],
                          capture_output=True, text=True, env=env, timeout=300)
    if owner == 0:
        assert done.returncode == 0 and "error" not in done.stderr, done
        assert "1 hits, 0 compiled" in done.stdout, done.stdout  # loaded from the mount
    else:
        assert done.returncode == 2 and f"uid {NOBODY}" in done.stderr, done
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
