"""All ``CUVIL_*`` environment switches, read in this one module.

=====================  ======================================================================
variable               meaning
=====================  ======================================================================
CUVIL_CACHE_DIR        native-kernel cache directory (else $XDG_CACHE_HOME/cuvil-perception,
                       else ~/.cache/cuvil-perception); one named here that is not the
                       user's alone is an error (exit 2), the default one a warning and a
                       private cache for the run (see compile/cache_trust.py)
CUVIL_DUMP_IR          a directory: write every compiled kernel's optimised IR (.ll) and
                       assembly (.s) there
CUVIL_PERF_MAP         ``1``: append ``address size name`` lines to /tmp/perf-<pid>.map for
                       every loaded kernel, so ``perf`` names JIT'd code
CUVIL_NO_DISK_CACHE    ``1``: compile in memory only, never read or write the disk cache
CUVIL_KERNEL_DEBUG     ``1``: build ``@kernel`` functions bounds-checked (an out-of-range index
                       raises KernelIndexError naming the buffer, the index and the line)
=====================  ======================================================================
"""

from __future__ import annotations

import functools
import os
from pathlib import Path


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def cache_dir() -> Path:
    """The native-kernel cache directory (not created here)."""
    explicit = os.environ.get("CUVIL_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "cuvil-perception"


def cache_dir_named() -> bool:
    """Whether the user named the cache directory (``CUVIL_CACHE_DIR``): an untrusted folder
    there is refused, where an untrusted default folder is replaced by a private one."""
    return bool(os.environ.get("CUVIL_CACHE_DIR"))


def dump_ir_dir() -> Path | None:
    """Directory to dump optimised IR and assembly into, or None."""
    value = os.environ.get("CUVIL_DUMP_IR", "").strip()
    return Path(value).expanduser() if value else None


def perf_map_enabled() -> bool:
    return _flag("CUVIL_PERF_MAP")


def disk_cache_disabled() -> bool:
    return _flag("CUVIL_NO_DISK_CACHE")


def kernel_threads() -> int | None:
    """Threads a kernel's prange loops use on a thread that nobody set a count for
    (``CUVIL_KERNEL_THREADS``, a positive int; None: unset, the usable CPUs). Inside a pipeline
    run the executor sets each thread's count itself (`compile.lang.parallel`)."""
    raw = os.environ.get("CUVIL_KERNEL_THREADS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        from .errors import UsageError  # (errors imports nothing back; config stays a leaf)

        raise UsageError(f"CUVIL_KERNEL_THREADS={raw!r}: a positive int (threads per prange "
                         "loop)")
    return int(raw)


def kernel_debug() -> bool:
    """Bounds-checked ``@kernel`` builds for every kernel (``CUVIL_KERNEL_DEBUG``). Read on
    every ``kernel(...)`` call, so read cheaply: ``os.environ.get`` encodes the name and
    decodes the value (~1 us); its backing dict, which every ``os.environ`` write updates, is
    read directly where it exists, and the value parsed once per distinct text."""
    if _ENV_DATA is None:
        return _flag("CUVIL_KERNEL_DEBUG")
    return _is_on(_ENV_DATA.get(_DEBUG_NAME))


_ENV_DATA = getattr(os.environ, "_data", None)
_DEBUG_NAME = (os.environ.encodekey("CUVIL_KERNEL_DEBUG") if hasattr(os.environ, "encodekey")
               else None)
if _DEBUG_NAME is None:
    _ENV_DATA = None


@functools.lru_cache(maxsize=16)
def _is_on(raw) -> bool:
    if isinstance(raw, bytes):
        raw = os.fsdecode(raw)
    return (raw or "").strip().lower() in ("1", "true", "yes", "on")
