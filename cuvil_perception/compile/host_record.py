"""The host CPU's LLVM name and feature string, asked of LLVM once per boot, not per process.

`target.host_target` needs them for every cache key; LLVM's ``get_host_cpu_features`` (and
its ``flatten``) and ``get_host_cpu_name`` cost ~0.35-0.45 ms in a fresh process, a tenth of
a warm start (AMD EPYC Zen 4 AVX-512 VNNI). They cannot change while the machine runs: the
kernel reads the CPU's identity once at boot, and a virtual machine keeps the CPU model it
was started with (live migration included). So they are kept in the cache folder (``host``
beside the entries) with the kernel's boot id (``/proc/sys/kernel/random/boot_id``, new at
every boot, shared by containers on one kernel), the LLVM and llvmlite versions and the process
triple; a process whose boot id, versions and triple all match uses the record, any other
asks LLVM and rewrites it. Machines sharing one cache folder (an NFS home) have different boot
ids, so none takes another's. Without a boot id (not Linux) or with the disk cache off, LLVM
is asked every time.

The record is read as the source digests' index is (`source_digests`): through
`cache_trust.read_entry` (a regular file of this user's that others cannot write, or it is
ignored) and written only into a store folder that is this user's alone. It can only name a CPU;
the objects it selects are checked on their own, as always (`cache`).
"""

from __future__ import annotations

_MAGIC = "cuvil host cpu 1"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _boot_id() -> str | None:
    try:
        with open(_BOOT_ID, "rb", buffering=0) as fh:
            return fh.read(64).strip().decode("ascii") or None
    except (OSError, UnicodeDecodeError):
        return None


def _path():
    from .. import config
    from .cache import HOST, SUBDIR

    return None if config.disk_cache_disabled() else config.cache_dir() / SUBDIR / HOST


def _identity(triple: str, versions: str) -> list[str] | None:
    """The lines a record must start with to be used here, or None (no boot id)."""
    boot = _boot_id()
    return None if boot is None else [_MAGIC, boot, versions, triple]


def recall(triple: str, versions: str) -> tuple[str, str] | None:
    """(CPU name, feature string) recorded this boot for ``triple`` and ``versions`` (LLVM's
    and llvmlite's), or None."""
    from .cache_trust import read_entry

    head, path = _identity(triple, versions), _path()
    if head is None or path is None:
        return None
    try:
        blob = read_entry(path)[0]
        lines = blob.decode("ascii").split("\n") if blob else []
    except (OSError, UnicodeDecodeError):
        return None
    if len(lines) != len(head) + 2 or lines[:len(head)] != head:
        return None
    return lines[-2], lines[-1]


def remember(triple: str, versions: str, cpu: str, features: str) -> None:
    """Record what LLVM answered (best effort: a cache folder that cannot take it costs the
    next process the question, nothing else)."""
    from .cache_trust import write_private

    head, path = _identity(triple, versions), _path()
    text = "\n".join([cpu, features])
    if head is None or path is None or text.count("\n") != 1 or not text.isascii():
        return
    write_private(path, "\n".join([*head, text]).encode("ascii"))
