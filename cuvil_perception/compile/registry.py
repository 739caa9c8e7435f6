"""`get_kernel`: render -> (disk cache | compile) -> load, memoised per process, with counters.

Lifecycle of a kernel in a process: the first ``get_kernel(spec)`` looks for an alias from the
spec's identity to a cached object (a warm start: no IR rendering); failing that it renders the
IR, computes the cache key, takes the object code from the disk cache or compiles it (and writes
the alias); then it loads the object and memoises the callable under the spec's identity; later
calls with an equal spec return that same callable. `acquire_all` (prewarm) does the same for a
list of specs, loading all the objects found through aliases into one engine at once.
Rendering, compiling and loading run under one lock, so concurrent first calls compile once, and
LLVM (whose global context is not thread-safe) is only ever entered by one thread. Memo hits do not
take that lock (only a short counter lock), so a thread that already has its kernels is never
held up by another thread's compilation.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass

from .. import config
from . import cache as disk
from .codegen import compile_ir
from .keys import cache_key, fast_key
from .loader import load, load_many
from .optimize import options_for
from .render_ir import render
from .spec import KernelSpec
from .target import host_target

_lock = threading.RLock()           # render / compile / load, and _memo writes
_stats_lock = threading.Lock()      # _counters
_memo: dict[tuple, object] = {}


@dataclass(frozen=True)
class CompileStats:
    """Counters for this process. ``compiles``: real LLVM compilations; ``disk_hits``: objects
    loaded from the disk cache; ``memory_hits``: memoised callables returned; times in ms."""

    compiles: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    compile_ms_total: float = 0.0
    load_ms_total: float = 0.0


# Mutable counters behind `compile_stats()` snapshots (updated under `_stats_lock`).
_counters = {"compiles": 0, "disk_hits": 0, "memory_hits": 0, "compile_ms_total": 0.0,
             "load_ms_total": 0.0}


@dataclass(frozen=True)
class Outcome:
    """How one `acquire` was served: status is ``memory``, ``hit`` (disk) or ``miss`` (compiled)."""

    kernel: object
    status: str
    compile_ms: float
    load_ms: float


def compile_stats() -> CompileStats:
    """A snapshot of the counters (compare two snapshots to assert "nothing compiled")."""
    with _stats_lock:
        return CompileStats(**_counters)


def _count(**delta) -> None:
    with _stats_lock:
        for name, value in delta.items():
            _counters[name] += value


def get_kernel(spec: KernelSpec):
    """The callable for ``spec`` (a ctypes ``CFUNCTYPE``; the GIL is released during calls).

    Compiles or loads from the disk cache on first use; memoised per process, so equal specs
    return the same object. See `loader.load` for the callable's attributes.
    """
    kernel = _memo.get(spec.identity())  # fast path: a dict read is atomic under the GIL
    if kernel is not None:
        _count(memory_hits=1)
        return kernel
    return acquire(spec).kernel


def acquire(spec: KernelSpec, _alias_tried: bool = False) -> Outcome:
    """`get_kernel` plus how it was served (for prewarm tables). (``_alias_tried``: for
    `acquire_all`, which has already looked the alias up and found nothing usable.)"""
    ident = spec.identity()
    with _lock:
        hit = _memo.get(ident)
        if hit is not None:
            _count(memory_hits=1)
            return Outcome(hit, "memory", 0.0, 0.0)
        target = host_target()
        use_disk = not config.disk_cache_disabled() and config.dump_ir_dir() is None
        fast = fast_key(spec, target, options_for(spec)) if use_disk else None
        found = _via_alias(fast, spec) if fast and not _alias_tried else None
        if found is not None:
            key, obj, status, compile_ms = *found, "hit", 0.0
        else:
            ir_text = render(spec)
            key = cache_key(ir_text, spec, target, options_for(spec))
            obj, status, compile_ms = _object_for(spec, ir_text, key, target)
            if fast:
                _remember_alias(fast, key)
        t0 = time.perf_counter()
        kernel = load(spec, obj, target, key)
        load_ms = (time.perf_counter() - t0) * 1e3
        _count(load_ms_total=load_ms)
        _memo[ident] = kernel
        return Outcome(kernel, status, compile_ms, load_ms)


def check_source(spec: KernelSpec) -> None:
    """Raise what compiling ``spec`` would raise about its source (`KernelSourceError` at the
    kernel's file:line:col, `CompileError`), without compiling (for `inspect`): nothing to do
    when it is loaded or when the disk cache holds it under the alias of these very sources
    (it was compiled from them before); otherwise its IR is rendered (no LLVM passes)."""
    with _lock:
        if spec.identity() in _memo:
            return
        if not config.disk_cache_disabled():
            fast = fast_key(spec, host_target(), options_for(spec))
            if fast and disk.get_alias(fast):
                return
        render(spec)


def acquire_all(specs: list[KernelSpec]) -> list[Outcome]:
    """`acquire` for each spec, in order (a warm start: prewarm). The objects found through
    their aliases are loaded together first (`loader.load_many`: one engine for all, ~4x less
    load time than one each); the rest go through `acquire`."""
    with _lock:
        found, tried = _load_aliased(specs)
        return [found.get(spec.identity()) or acquire(spec, spec.identity() in tried)
                for spec in specs]


def _load_aliased(specs: list[KernelSpec]) -> tuple[dict[tuple, Outcome], set]:
    """(identity -> ``hit`` outcome for every spec not yet memoised whose alias leads to a
    valid cache entry, identities whose alias was looked up); the found kernels are loaded in
    one go and memoised."""
    if config.disk_cache_disabled() or config.dump_ir_dir() is not None:
        return {}, set()
    target = host_target()
    items, tried, store = [], set(), disk.store_dir()  # (one trust check for all the lookups)
    for spec in specs:
        ident = spec.identity()
        if ident in _memo or ident in tried:
            continue
        fast = fast_key(spec, target, options_for(spec))
        found = _via_alias(fast, spec, store) if fast else None
        tried.add(ident)
        if found is not None:
            items.append((spec, found[1], found[0]))
    if not items:
        return {}, tried
    t0 = time.perf_counter()
    kernels = load_many(items, target)
    load_ms = (time.perf_counter() - t0) * 1e3
    _count(load_ms_total=load_ms)
    out = {}
    for (spec, _, _), kernel in zip(items, kernels):
        _memo[spec.identity()] = kernel
        out[spec.identity()] = Outcome(kernel, "hit", 0.0, load_ms / len(items))
    return out, tried


def _via_alias(fast: str, spec: KernelSpec, store=None) -> tuple[str, bytes] | None:
    """(object key, object bytes) if the alias ``fast`` leads to a valid entry of ``spec``;
    ``store``: the store folder, checked by the caller (`disk.store_dir`), else here."""
    store = store or disk.store_dir()
    key = disk.get_alias(fast, store)
    obj = disk.get(key, _entry_meta(spec), store) if key else None
    if obj is None:
        return None
    _count(disk_hits=1)
    return key, obj


def _remember_alias(fast: str, key: str) -> None:
    try:
        disk.put_alias(fast, key)
    except OSError:  # `_object_for` has already warned about an unwritable cache
        pass


def _object_for(spec: KernelSpec, ir_text: str, key: str, target) -> tuple[bytes, str, float]:
    """Object bytes from the disk cache (``hit``) or a fresh compilation (``miss``).

    With ``CUVIL_DUMP_IR`` set the disk cache is not read (a cached object has no IR to dump),
    only written; ``CUVIL_NO_DISK_CACHE`` skips it both ways.
    """
    use_disk = not config.disk_cache_disabled()
    dump = config.dump_ir_dir()
    if use_disk and dump is None:
        obj = disk.get(key, _entry_meta(spec))
        if obj is not None:
            _count(disk_hits=1)
            return obj, "hit", 0.0
    t0 = time.perf_counter()
    compiled = compile_ir(ir_text, target, spec.name, options_for(spec),
                          want_text=dump is not None)
    compile_ms = (time.perf_counter() - t0) * 1e3
    _count(compiles=1, compile_ms_total=compile_ms)
    if dump is not None:
        _dump(dump, spec, key, compiled)
    if use_disk:
        try:
            disk.put(key, compiled.obj, meta=_entry_meta(spec))
        except OSError as exc:  # an unwritable cache costs start-up time, not correctness
            warnings.warn(f"kernel cache: cannot write {disk.store_dir()}: {exc}", stacklevel=4)
    return compiled.obj, "miss", compile_ms


def _entry_meta(spec: KernelSpec) -> dict:
    """What a cache entry records of its kernel, and `disk.get` checks on load."""
    return {"name": spec.name, "static": spec.static_json()}


def _dump(directory, spec: KernelSpec, key: str, compiled) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        stem = directory / f"{spec.name}-{key[:8]}"
        stem.with_name(stem.name + ".ll").write_text(compiled.optimized_ir)
        stem.with_name(stem.name + ".s").write_text(compiled.asm)
    except OSError as exc:  # a diagnostic must not break a run
        warnings.warn(f"CUVIL_DUMP_IR: cannot write {directory}: {exc}", stacklevel=3)


def clear_memory() -> None:
    """Forget memoised callables (tests only: the engines stay mapped, see `loader`)."""
    with _lock:
        _memo.clear()
