"""Read back what a ``jsonl`` sink wrote (schema in ``ops.sinks``), and the run record beside it.

Each line is one frame: ``{"frame", "timestamp_ns", "stamps", "stale"[, "dropped"], "outputs":
{name: {"dtype", "shape", "data" | "sha256"}}}`` (a dropped frame: ``dropped`` names the
decision, ``outputs`` is empty). ``read_run`` decodes the arrays (the strings "NaN",
"Infinity", "-Infinity" back to floats); arrays written as a sha256 only decode to None.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError


@dataclass
class RunFrame:
    """One line of a run output: frame index, sensor time (ns), per-stream stamps, arrays."""

    index: int
    timestamp_ns: int
    stamps: dict[str, int] = field(default_factory=dict)
    stale: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, np.ndarray | None] = field(default_factory=dict)
    dropped: dict | None = None  # {"stage", "policy", "reason"} when a decision dropped it


def decode_array(entry: dict, where: str) -> np.ndarray | None:
    """One ``{"dtype", "shape", "data"}`` entry as an array (None for a sha256-only entry)."""
    try:
        dtype, shape = np.dtype(entry["dtype"]), tuple(int(n) for n in entry["shape"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: not an encoded array ({exc})") from None
    if "data" not in entry:
        return None
    data = entry["data"]
    if dtype.kind == "f":
        flat = np.array(data, dtype=object).reshape(-1)
        values = np.array([float(v) for v in flat], dtype=dtype)  # float("NaN") works
    else:
        values = np.array(data, dtype=dtype).reshape(-1)
    if values.size != int(np.prod(shape)):
        raise InputError(f"{where}: {values.size} values for shape {list(shape)}")
    return values.reshape(shape)


MAX_FRAME = 10**9  # 3 years of frames at 10 Hz: more is not a frame index a run wrote


def read_run(path: str | Path) -> list[RunFrame]:
    """Every frame of a jsonl run output, in file order; InputError naming the file and line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{path}: no such run output (a .jsonl written by a jsonl stage)") \
            from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read run output ({exc})") from None
    frames = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            doc = json.loads(line)
            frame = RunFrame(_frame_number(doc["frame"], frames, where), int(doc["timestamp_ns"]),
                             {k: int(v) for k, v in doc.get("stamps", {}).items()},
                             {k: int(v) for k, v in doc.get("stale", {}).items()})
            outputs = doc["outputs"]
            frame.dropped = doc.get("dropped")
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: not a jsonl run-output line ({exc})") from None
        for name, entry in outputs.items():
            frame.outputs[name] = decode_array(entry, f"{where}: output '{name}'")
        frames.append(frame)
    return frames


def _frame_number(value, before: list[RunFrame], where: str) -> int:
    """A line's ``frame``: a whole number from 0 to `MAX_FRAME`, larger than the line before's
    (a run writes its frames in order), else InputError naming the line."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_FRAME:
        raise InputError(f"{where}: frame must be a whole number from 0 to {MAX_FRAME:,} (a "
                         f"frame index of the run), got {str(value)[:40]}")
    if before and value <= before[-1].index:
        raise InputError(f"{where}: frame {value} after frame {before[-1].index}: a run "
                         "output lists its frames in increasing order")
    return value


def record_path(run_output: str | Path) -> Path:
    """Where ``run`` puts the run record of a jsonl output: ``<file>.record.json``."""
    run_output = Path(run_output)
    return run_output.with_name(run_output.name + ".record.json")


def load_record(run_output: str | Path) -> dict | None:
    """The run record beside a jsonl output, or None when there is none (or it is unreadable)."""
    path = record_path(run_output)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None
