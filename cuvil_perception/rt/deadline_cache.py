"""The per-machine store of ``deadline_ms: auto`` values: ``load(key)`` / ``store(key, stages)``.

An entry is kept under what makes a stage's cost what it is on this machine (``key_fields``):
the CPU (``machine_info.cpu().fingerprint``: model, architecture, SIMD flags, cores), the ONNX
Runtime version, the pipeline's hash (``run_files.pipeline_hash``: ops, params, wiring and
deadlines; not the drive, not the sinks' paths) and the intra-op threads each network gets
(``rt.placement``). Layout: ``<cache_dir>/deadlines-v1/<sha256 of the key>.json``::

    {"format": "cuvil-deadlines/1", "key": {fingerprint, onnxruntime, pipeline_sha256,
     intra_op_threads}, "stages": {stage id: {"ms", "passes_ms", "rule", "origin", "measured_utc"}}}

``origin`` says how the value was measured: ``"warm-up"`` (a run's timed warm-up passes) or
``"rt calibrate"`` (stage times of replayed frames, ``rt calibrate``). Writes go through a
temporary file and a rename (``output_files.write_text_atomic``), so a reader never sees half an
entry. A missing, unreadable, corrupt or foreign entry (another key, a value that is not a
positive finite number) is a miss, never a crash: the run measures again and rewrites it; a
failed write is a warning (the run keeps its measured deadlines).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path

from ..compile.cache_trust import read_entry, store_root
from ..errors import OutputWriteError
from ..output_files import write_text_atomic

FORMAT = "cuvil-deadlines/1"
SUBDIR = "deadlines-v1"


def onnxruntime_version() -> str:
    """The installed ONNX Runtime's version, ``"none"`` without it (OpenCV DNN runs the nets)."""
    try:
        import onnxruntime
    except ImportError:
        return "none"
    return str(onnxruntime.__version__)


def key_fields(pipeline, intra_op_threads: int) -> dict:
    """What an entry is kept under (see the module docstring)."""
    from ..machine_info import cpu
    from .run_files import pipeline_hash

    return {"fingerprint": cpu().fingerprint, "onnxruntime": onnxruntime_version(),
            "pipeline_sha256": pipeline_hash(pipeline), "intra_op_threads": int(intra_op_threads)}


def entry_path(key: dict) -> Path:
    """Where ``key``'s entry lives, in the cache folder the kernel cache trusts
    (``compile.cache_trust.store_root``: this user's alone, or a private one)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    return store_root(SUBDIR) / SUBDIR / f"{digest}.json"


def entries() -> list[Path]:
    """Every stored entry (for ``cache info`` / ``cache clear``)."""
    return sorted((store_root(SUBDIR) / SUBDIR).glob("*.json"))


def clear() -> int:
    """Remove every stored entry; how many were removed (the next run measures again)."""
    removed = 0
    for path in entries():
        try:
            path.unlink()
            removed += 1
        except OSError:
            pass
    return removed


def load(key: dict) -> dict[str, dict]:
    """``{stage id: entry}`` stored under ``key``; {} on any kind of miss (read as kernel cache
    entries are: never through a link, never blocking on a FIFO, this user's files only)."""
    data, _problem = read_entry(entry_path(key))
    try:
        entry = json.loads(data.decode("utf-8")) if data is not None else None
    except (UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key \
            or not isinstance(entry.get("stages"), dict):
        return {}
    return {sid: value for sid, value in entry["stages"].items() if _valid(value)}


def _valid(value) -> bool:
    """A stage entry: a positive finite ``ms``, a string ``origin``, numbers in ``passes_ms``."""
    if not isinstance(value, dict) or not isinstance(value.get("origin"), str):
        return False
    passes = value.get("passes_ms", [])
    return _positive(value.get("ms")) and isinstance(passes, list) \
        and all(_positive(p) or p == 0 for p in passes)


def _positive(number) -> bool:
    return isinstance(number, (int, float)) and not isinstance(number, bool) \
        and math.isfinite(number) and number > 0


def store(key: dict, stages: dict[str, dict], warn=None) -> Path | None:
    """Merge ``stages`` (``{stage id: {"ms", "passes_ms", "rule", "origin"}}``) into the entry of
    ``key``; returns its path, None when it could not be written (``warn`` says why)."""
    merged = load(key)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for sid, value in stages.items():
        merged[sid] = dict(value, measured_utc=stamp)
    text = json.dumps({"format": FORMAT, "key": key, "stages": merged}, indent=1,
                      sort_keys=True) + "\n"
    try:
        return write_text_atomic(entry_path(key), text)
    except OutputWriteError as exc:
        if warn is not None:
            warn(f"deadline_ms auto: not kept for the next run ({exc})")
        return None
