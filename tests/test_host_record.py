"""The host CPU record (`compile.host_record`): LLVM's answers are reused only within one boot,
one LLVM/llvmlite and one triple, only from a file of this user's alone, and never with the
disk cache off."""

from __future__ import annotations

import os

import pytest

from cuvil_perception.compile import cache, host_record, target

_TRIPLE, _VERSIONS = "x86_64-unknown-linux-gnu", "llvm 1.2.3 llvmlite 4.5.6"


@pytest.fixture()
def boot(tmp_path, monkeypatch, cache_dir):
    """A boot id file of the test's own; the store folder exists."""
    path = tmp_path / "boot_id"
    path.write_text("11111111-2222-3333-4444-555555555555\n")
    monkeypatch.setattr(host_record, "_BOOT_ID", str(path))
    (cache_dir / "objects-v2").mkdir(parents=True, mode=0o700)
    return path


def test_recalled_within_one_boot_versions_and_triple(boot):
    assert host_record.recall(_TRIPLE, _VERSIONS) is None
    host_record.remember(_TRIPLE, _VERSIONS, "znver3", "+avx2,-avx512f")
    assert host_record.recall(_TRIPLE, _VERSIONS) == ("znver3", "+avx2,-avx512f")
    assert host_record.recall(_TRIPLE, "llvm 1.2.4 llvmlite 4.5.6") is None
    assert host_record.recall("aarch64-unknown-linux-gnu", _VERSIONS) is None
    boot.write_text("99999999-2222-3333-4444-555555555555\n")  # the machine rebooted
    assert host_record.recall(_TRIPLE, _VERSIONS) is None


def test_not_used_without_a_boot_id_or_disk_cache(boot, monkeypatch):
    host_record.remember(_TRIPLE, _VERSIONS, "znver3", "+avx2")
    monkeypatch.setenv("CUVIL_NO_DISK_CACHE", "1")
    assert host_record.recall(_TRIPLE, _VERSIONS) is None
    monkeypatch.delenv("CUVIL_NO_DISK_CACHE")
    monkeypatch.setattr(host_record, "_BOOT_ID", str(boot) + ".absent")
    assert host_record.recall(_TRIPLE, _VERSIONS) is None


def test_a_record_others_can_write_or_a_malformed_one_is_ignored(boot, cache_dir):
    host_record.remember(_TRIPLE, _VERSIONS, "znver3", "+avx2")
    path = cache_dir / "objects-v2" / cache.HOST
    os.chmod(path, 0o666)
    assert host_record.recall(_TRIPLE, _VERSIONS) is None
    os.chmod(path, 0o600)
    assert host_record.recall(_TRIPLE, _VERSIONS) == ("znver3", "+avx2")
    path.write_bytes(path.read_bytes() + b"\nextra")
    assert host_record.recall(_TRIPLE, _VERSIONS) is None
    host_record.remember(_TRIPLE, _VERSIONS, "bad\nname", "+avx2")  # not written
    assert host_record.recall(_TRIPLE, _VERSIONS) is None


def test_host_target_asks_llvm_once_per_boot(boot, monkeypatch):
    target.host_target.cache_clear()
    try:
        asked = target.host_target()  # asks LLVM, records the answer
        target.host_target.cache_clear()
        assert target.host_target() == asked
        path = boot.parent / "cache" / "objects-v2" / cache.HOST
        lines = path.read_text().split("\n")
        path.write_text("\n".join(lines[:-2] + ["recorded-cpu", "+recorded"]))
        target.host_target.cache_clear()
        assert (target.host_target().cpu, target.host_target().features) == \
            ("recorded-cpu", "+recorded")
    finally:
        target.host_target.cache_clear()
