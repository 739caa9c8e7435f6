"""Native kernels through llvmlite: render (IR text) -> compile (object bytes) -> load (callable).

Declare a kernel with `KernelSpec`, get a GIL-releasing ctypes callable with `get_kernel`; IR
helpers (loops, vectorisable exp/sigmoid, min/max, reductions) are in `irutil`. Object code is
cached on disk (`cache_info`, `cache_clear`) and memoised per process (`compile_stats`; a run
records the compiles after frame 0, see `rt.op_prewarm`); `prewarm` builds a list of specs before the first frame; `emit_object` writes
code for another architecture, `build_library` a standalone .so + .a + C header for one.
"""

from __future__ import annotations

from . import irutil
from .cache import CacheCorruptionWarning, cache_clear, cache_info
from .emit import emit_object, write_objects
from .kernel_prewarm import PrewarmRow, prewarm, summarize, unique_specs
from .library import Library, build_library
from .registry import CompileStats, compile_stats, get_kernel
from .spec import Arg, KernelSpec
from .target import host_target

__all__ = [
    "Arg",
    "CacheCorruptionWarning",
    "CompileStats",
    "KernelSpec",
    "Library",
    "PrewarmRow",
    "cache_clear",
    "build_library",
    "cache_info",
    "compile_stats",
    "emit_object",
    "get_kernel",
    "host_target",
    "irutil",
    "prewarm",
    "summarize",
    "unique_specs",
    "write_objects",
]
