"""Prewarm through the compile cache before frame 0, and the counters that prove it held.

Every op instance (both variants of a degradable stage) lists its ``KernelSpec``s in
``kernels()``; ``compile.prewarm`` compiles or loads each distinct one once. The compile
counters are snapshotted after prewarm (before the ops' ``open()``) and again after the run:
``compiles_after_frame0`` must be 0 (a non-zero value means an op calls ``get_kernel`` in ``open()``
or ``process()`` for a spec it did not declare, and the run paid ~60-85 ms for an LLVM compilation
that `compile --target` would not have emitted either). ``loads_after_frame0`` counts disk-cache loads (~1-2 ms).
"""

from __future__ import annotations

from ..errors import CompileError, CuvilError


def declared_kernels(stage_id: str, op) -> list:
    """``op.kernels()`` as a list; an exception from it (a bug in the op's own code) becomes a
    one-line `CompileError` naming the stage, the op class and the exception (exit 1, like an op
    whose ``open()`` raises; the original stays as its ``__cause__``)."""
    try:
        return list(op.kernels() or [])
    except CuvilError:
        raise
    except Exception as exc:
        cls = type(op)
        raise CompileError(f"stage '{stage_id}' (op {cls.__module__}:{cls.__qualname__}): "
                           f"kernels() raised {type(exc).__name__}: {exc}") from exc


def prewarm_ops(instances) -> list[dict]:
    """Prewarm the kernels of ``[(stage_id, op), ...]``; one row per distinct kernel.

    Row: ``{"name", "static", "status" ("memory" | "hit" | "miss"), "hit", "compile_ms",
    "load_ms", "stages"}``.
    """
    specs, users = [], {}
    for stage_id, op in instances:
        for spec in declared_kernels(stage_id, op):
            specs.append(spec)
            users.setdefault(spec.identity(), []).append(stage_id)
    if not specs:
        return []
    from .. import compile as native

    rows = []
    for row, spec in zip(native.prewarm(specs), native.unique_specs(specs)):
        rows.append({"name": row.name, "static": row.static, "status": row.status,
                     "hit": row.status in ("hit", "memory"),
                     "compile_ms": round(row.compile_ms, 3), "load_ms": round(row.load_ms, 3),
                     "stages": sorted(set(users[spec.identity()]))})
    return rows


def compile_counters() -> dict[str, int]:
    """``{"compiles", "disk_hits"}`` of this process so far (zeros when compile/ is absent)."""
    try:
        from ..compile import compile_stats
    except ImportError:
        return {"compiles": 0, "disk_hits": 0}
    stats = compile_stats()
    return {"compiles": stats.compiles, "disk_hits": stats.disk_hits}
