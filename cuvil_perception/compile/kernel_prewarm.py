"""Prewarm: build every kernel a pipeline needs before its first frame, and say how each was
served (memory, disk-cache hit, or compiled)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .registry import acquire_all
from .spec import KernelSpec


@dataclass(frozen=True)
class PrewarmRow:
    """One kernel of a prewarm. ``status``: ``memory`` (already loaded in this process),
    ``hit`` (loaded from the disk cache) or ``miss`` (compiled now); times in ms."""

    name: str
    static: str
    status: str
    compile_ms: float
    load_ms: float


def unique_specs(specs: Iterable[KernelSpec]) -> list[KernelSpec]:
    """``specs`` without duplicates (equal identity), first occurrence order kept."""
    seen: set[tuple] = set()
    out = []
    for spec in specs:
        ident = spec.identity()
        if ident not in seen:
            seen.add(ident)
            out.append(spec)
    return out


def prewarm(specs: Iterable[KernelSpec]) -> list[PrewarmRow]:
    """Compile or load each distinct spec once (in order) and return one row per kernel.
    Cache hits are loaded together (`registry.acquire_all`); their rows share the load time.
    Kernels with prange loops bring the thread pool's two functions (`lang.parallel`)."""
    specs = list(specs)
    if any(spec.threads is not None for spec in specs):
        from .lang.parallel import runtime_specs

        specs += runtime_specs()
    unique = unique_specs(specs)
    return [PrewarmRow(spec.name, spec.static_str(), o.status, o.compile_ms, o.load_ms)
            for spec, o in zip(unique, acquire_all(unique))]


def summarize(rows: list[PrewarmRow]) -> dict:
    """Totals for a run report: kernels, hits (memory + disk), misses, compile and load ms."""
    return {
        "kernels": len(rows),
        "hits": sum(r.status in ("hit", "memory") for r in rows),
        "misses": sum(r.status == "miss" for r in rows),
        "compile_ms": sum(r.compile_ms for r in rows),
        "load_ms": sum(r.load_ms for r in rows),
    }
