"""The threads ``prange`` loops run on: how many a call may use, and the pool that supplies them.

A kernel with a ``prange`` loop takes one hidden last argument (before a debug build's error
record): the address of the calling thread's ``Par`` record (`pool_ir`), which names the pool's
``launch`` function, the pool, and the threads the call may use, its own thread included. The
callable `get_kernel` returns supplies it (`par_address`, ~0.2 us), so callers pass the same
arguments as for any kernel. A null address (one thread) runs every chunk on the calling thread
without touching the pool; a C caller of a library kernel passes null or its own ``Par``.

Thread counts, per calling thread (never a process-wide setting, so two stages running kernels
at once each keep their own share):

- inside a pipeline run, a compute worker gets the cores divided by the compute workers (the
  share an ONNX network gets: ``rt.placement.intra_op_threads``), an io thread 1;
- elsewhere ``CUVIL_KERNEL_THREADS`` if set, else the CPUs this process may run on
  (``os.sched_getaffinity``);
- ``with threads(n): ...`` overrides it for the calling thread for the block.

The pool is native code (`pool_ir`) run by daemon Python threads named ``cuvil-par_K`` that
enter it once through ctypes (GIL released) and never come back to Python; it grows to the
largest count any thread asked for minus one (at most `pool_ir.MAX_WORKERS`), and its workers
sleep on a futex between launches. It runs on Linux (x86-64, aarch64); elsewhere every prange
loop runs on the calling thread (the same bits).
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from contextlib import contextmanager

from ... import config
from ...os_threads import name_this_thread
from ..spec import Arg, KernelSpec
from ..target import host_target
from . import pool_ir
from .constants import reachable


PAR_ARG = Arg("par", "ptr", "u64", (3,), doc="prange thread-pool record (launch, pool, "
              "threads); NULL runs every chunk on the calling thread")


@functools.lru_cache(maxsize=None)
def uses_prange(fn) -> bool:
    """Whether ``fn`` (a kernel's function) or a helper it can call has a ``prange`` loop: then
    the kernel takes the hidden ``Par`` argument."""
    return any(getattr(f, "__cuvil_prange__", False) or "prange" in f.__code__.co_names
               for f in reachable(fn))


class Par(ctypes.Structure):
    """What a prange kernel's hidden argument points to (`pool_ir`'s layout)."""

    _fields_ = [("launch", ctypes.c_void_p), ("pool", ctypes.c_void_p),
                ("threads", ctypes.c_int64)]


_local = threading.local()
_lock = threading.Lock()
_pool: dict = {}  # "memory", "launch", "worker", "threads" once started


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_threads() -> int:
    """Threads a prange loop uses on a thread nobody set: ``CUVIL_KERNEL_THREADS``, else the
    usable CPUs."""
    return config.kernel_threads() or usable_cpus()


def thread_count() -> int:
    """The threads a prange loop called from this thread may use (itself included)."""
    par = getattr(_local, "par", None)
    return int(par.threads) if par is not None else default_threads()


def set_threads(n: int) -> None:
    """Let prange loops called from this thread use ``n`` threads (itself included). The pool
    starts (or grows) at the first prange call that needs it, not here: a pipeline whose
    kernels have no prange loop starts no thread."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads: a positive int, got {n!r}")
    _thread_par().threads = n
    _local.__dict__.pop("address", None)


@contextmanager
def threads(n: int):
    """``with threads(n): kernel(...)``: prange loops called from this thread in the block use
    ``n`` threads (itself included); the previous count is restored after."""
    before = thread_count()
    set_threads(n)
    try:
        yield
    finally:
        set_threads(before)


def par_address() -> int:
    """The address of this thread's ``Par`` (0: one thread, run on the caller)."""
    try:
        return _local.address
    except AttributeError:
        return _bind()


def _bind() -> int:
    """This thread's ``Par`` filled in (the pool started for its count), and its address."""
    par = getattr(_local, "par", None)
    if par is None:
        par = _thread_par()
        par.threads = default_threads()
    address = 0
    if par.threads > 1 and pool_ir.supported(host_target().triple):
        _start_workers(par.threads - 1)
        par.launch, par.pool = _pool["launch"], ctypes.addressof(_pool["memory"])
        address = ctypes.addressof(par)
    _local.address = address
    return address


def _thread_par() -> Par:
    par = getattr(_local, "par", None)
    if par is None:
        par = _local.par = Par(None, None, 1)
    return par


def _start_workers(n: int) -> None:
    """At least ``n`` pool workers running (capped at `pool_ir.MAX_WORKERS`)."""
    n = min(n, pool_ir.MAX_WORKERS)
    if len(_pool.get("threads", ())) >= n:
        return
    with _lock:
        if not _pool:
            _load_runtime()
        started = _pool["threads"]
        while len(started) < n:
            k = len(started)
            t = threading.Thread(target=_work, args=(k,), name=f"cuvil-par_{k}", daemon=True)
            started.append(t)
            t.start()


def _after_fork() -> None:
    """In a forked child only the forking thread exists: start a new pool when one is needed
    (the old one's workers are gone; a launch would take its jobs back from them anyway)."""
    _pool.clear()
    _local.__dict__.pop("address", None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _work(k: int) -> None:
    name_this_thread()
    _pool["worker"](ctypes.addressof(_pool["memory"]), k)  # returns only at shutdown


def runtime_specs() -> list[KernelSpec]:
    """The pool's two native functions, as kernels (cached like any; prewarm adds them when a
    pipeline has a prange kernel, so no compile happens at its first frame)."""
    triple = host_target().triple
    if not pool_ir.supported(triple):
        return []
    static = {"futex": pool_ir.futex_number(triple), "arch": triple.split("-")[0]}
    return [KernelSpec("lang.prange_launch", _build_launch, static,
                       args=("ptr", "ptr", "ptr", "i64")),
            KernelSpec("lang.prange_worker", _build_worker, static, args=("ptr", "i64"))]


def _load_runtime() -> None:
    from ..registry import get_kernel

    launch, worker = (get_kernel(spec) for spec in runtime_specs())
    size = pool_ir.HEADER + pool_ir.MAILBOX * pool_ir.MAX_WORKERS
    _pool.update(memory=(ctypes.c_uint64 * (size // 8))(), launch=launch.address,
                 worker=worker, threads=[], keep=(launch, worker))


def _build_launch(module, fn_name: str, *, futex: int, arch: str) -> None:
    pool_ir.build_launch(module, fn_name, futex=futex, arch=arch)


def _build_worker(module, fn_name: str, *, futex: int, arch: str) -> None:
    pool_ir.build_worker(module, fn_name, futex=futex, arch=arch)


__all__ = ["PAR_ARG", "Par", "default_threads", "par_address", "runtime_specs", "set_threads",
           "thread_count", "threads", "usable_cpus", "uses_prange"]
