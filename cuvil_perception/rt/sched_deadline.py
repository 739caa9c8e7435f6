"""SCHED_DEADLINE for the calling thread, through the ``sched_setattr`` system call (ctypes).

Python's ``os`` module has no ``sched_setattr``; glibc has no wrapper either, so the syscall is
made by number (x86-64: 314, aarch64: 274) with the kernel's ``struct sched_attr``. A deadline
thread gets ``runtime`` ns of CPU in every ``period``, finished by ``deadline`` after the period
starts (constant bandwidth server; the kernel needs runtime <= deadline <= period). The kernel
refuses with EPERM without CAP_SYS_NICE, or when the thread's CPU affinity is narrower than its
root domain (so ``cpu_affinity`` and ``deadline`` do not mix), and with EBUSY when admission
control finds no bandwidth left (the sum over deadline threads must stay under
``/proc/sys/kernel/sched_rt_runtime_us`` / ``sched_rt_period_us`` of every CPU). The thread is
set with SCHED_FLAG_RESET_ON_FORK: a deadline thread may not create threads otherwise, and
libraries (ONNX Runtime's pool, for one) start theirs lazily on first use.
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass

SCHED_DEADLINE = 6
#: children of the thread (threads a library starts lazily, e.g. a runtime's pool) start under
#: the default scheduler: without this flag the kernel refuses to create them at all (EAGAIN)
SCHED_FLAG_RESET_ON_FORK = 0x01
SCHED_RESET_ON_FORK = 0x40000000  # the bit os.sched_getscheduler() reports with it
SYSCALL_NUMBERS = {"x86_64": 314, "aarch64": 274}
#: kernel limits: runtime >= 1024 ns; period within sysctl sched_deadline_period_{min,max}_us
#: (defaults 100 us .. 4194304 us)
MIN_RUNTIME_NS = 1024
MIN_PERIOD_NS = 100_000
MAX_PERIOD_NS = 4_194_304_000


class _SchedAttr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("sched_policy", ctypes.c_uint32),
                ("sched_flags", ctypes.c_uint64), ("sched_nice", ctypes.c_int32),
                ("sched_priority", ctypes.c_uint32), ("sched_runtime", ctypes.c_uint64),
                ("sched_deadline", ctypes.c_uint64), ("sched_period", ctypes.c_uint64)]


@dataclass(frozen=True)
class DeadlineParams:
    """A reservation in ns: ``runtime`` of CPU every ``period``, done ``deadline`` after."""

    runtime_ns: int
    deadline_ns: int
    period_ns: int

    def describe(self) -> str:
        return (f"runtime {self.runtime_ns / 1e6:g} ms, deadline {self.deadline_ns / 1e6:g} ms, "
                f"period {self.period_ns / 1e6:g} ms")


def _syscall(number: int, attr: _SchedAttr) -> int:
    """The raw call; returns 0 or an errno (separate so tests can stand in for the kernel)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, 0, ctypes.byref(attr), 0) == 0:
        return 0
    return ctypes.get_errno()


def set_deadline(params: DeadlineParams) -> str | None:
    """Make the calling thread SCHED_DEADLINE. None on success, else why the OS refused."""
    number = SYSCALL_NUMBERS.get(platform.machine())
    if number is None:
        return f"no sched_setattr syscall number known for {platform.machine()}"
    attr = _SchedAttr(ctypes.sizeof(_SchedAttr), SCHED_DEADLINE, SCHED_FLAG_RESET_ON_FORK, 0, 0,
                      params.runtime_ns, params.deadline_ns, params.period_ns)
    err = _syscall(number, attr)
    if err == 0:
        return None
    hints = {1: "needs CAP_SYS_NICE, and a CPU affinity spanning the whole root domain",
             16: "admission control: not enough deadline bandwidth left",
             22: "the kernel rejected the parameters"}
    return f"{os.strerror(err)}; {hints.get(err, 'see sched_setattr(2)')}"
