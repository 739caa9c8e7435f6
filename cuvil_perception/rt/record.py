"""The run record: one JSON file per run that says what ran, where, and what happened.

Top-level fields::

    format        "cuvil-run-record/2" (/1: before ``output_files``; still read)
    status        how the run ended: "running" (written at the start and left so when the
                  process died without finishing: kill -9, power loss, OOM; ``record_status``
                  reports it as "killed" once the pid is gone), "completed", "interrupted"
                  (SIGINT, Ctrl-C), "terminated" (SIGTERM), "failed" (a stage raised, a write
                  failed, or on_miss: fail fired)
    run           {"pid", "host", "started_utc", "ended_utc", "frames_done"}
    drives        fingerprint of each replayed drive: {"stage", "path", "files", "bytes",
                  "sha256"} (``--decisions`` refuses a record of another drive)
    pipeline_sha256  hash of the pipeline's stages without sink and source paths
                  (``--decisions`` warns when it differs)
    output_digests {path: {"bytes", "sha256"}} of each run log (jsonl), at the end of the run
                  (``render`` checks that the record beside a jsonl describes that file)
    output_files  {path: {"dev", "ino", "bytes", "sha256", "whole"}} of each sink file: what
                  the run wrote there, by which the record vouches for that very file as an
                  earlier output (``rt.written_files``, ``output_files.vouched_by_record``)
    pipeline      {"name", "source", "text"}: the YAML text when the pipeline came from a file,
                  else its canonical form (stages with op, params, inputs, tag, deadline, on_miss);
                  "overrides": the ``--set STAGE.PARAM=VALUE`` texts applied over it, in order
                  (the stages show the values as they ran)
    options       the RunOptions that shaped the run (frames, workers, rate, live, enforce, ...)
    versions      package, python, numpy, llvmlite, llvm, opencv
    machine       cpu (model name), llvm_cpu, features (a summary of SIMD flags), cores, platform
    threads       every thread the run started and what its ``rt:`` knobs did there:
                  {thread, os_name (top -H, /proc/.../comm), tid, group (io, compute,
                  scheduler), cpus (null: any), sched ("SCHED_FIFO priority 10",
                  "SCHED_DEADLINE runtime ...", null: the default), refused: [knob names]}
    prewarm       one row per kernel: name, static, hit, ms (from compile.prewarm)
    compile       {"before_frame0": n, "after_run": n, "after_frame0": n}: compile counters
    frames        number of frames that went through; stopped: null or the failure reason
    timings       per frame and stage: start/end ns, cpu ns, worker, tid, variant, outcome
    e2e           per frame: start/end ns, sensor_ns (the frame's sensor time)
    deadlines     each stage deadline the run used: {stage: {"ms", "source"}}, ``source``
                  "explicit" (ms in the YAML), "measured" (``deadline_ms: auto`` timed in this
                  run's warm-up) or "cache" (auto, kept for this machine); auto ones add
                  "passes_ms", "rule", "capped" (bounded by e2e_deadline_ms), "origin"
                  ("warm-up" or "rt calibrate"); see ``rt.deadlines``
    decisions     every deadline decision: {frame, stage, kind, elapsed_ms, deadline_ms,
                  action, variant}; ``kind`` is "deadline_miss", "e2e_miss" or
                  "admission_skip" (a frame shed before any work: predicted_ms, deadline_ms);
                  a deadline_miss whose frame could still make e2e_deadline_ms has action
                  "keep_late" (the result was kept) and "predicted_e2e_ms", "e2e_deadline_ms"
                  (``rt.policy``)
    summary       the latency table (per stage and e2e: p50/p90/p99/max ms, cpu/wall, misses)

``--decisions RECORD`` reads back only ``decisions`` (and warns when the pipeline differs).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from ..errors import UsageError
from ..graph.roles import run_logs
from ..machine_info import cpu
from ..output_files import write_text_atomic

FORMAT = "cuvil-run-record/2"
READABLE = ("cuvil-run-record/1", FORMAT)  # /1 has no output_files; everything else is alike
def versions() -> dict[str, str]:
    """Versions of everything that can change a kernel's output or speed."""
    import numpy

    from .. import __version__

    found = {"cuvil_perception": __version__, "python": platform.python_version(),
             "numpy": numpy.__version__}
    try:
        import llvmlite
        import llvmlite.binding as llvm

        found["llvmlite"] = llvmlite.__version__
        found["llvm"] = ".".join(str(v) for v in llvm.llvm_version_info)
    except ImportError:
        pass
    try:
        import cv2

        found["opencv"] = cv2.__version__
    except ImportError:
        pass
    return found


def machine() -> dict:
    """CPU model, ISA label, LLVM's host CPU name, a SIMD feature summary, core count, OS."""
    host = cpu()
    info = {"cpu": host.model, "isa": host.isa, "cores": host.cores,
            "platform": platform.platform(), "features": list(host.features),
            "fingerprint": host.fingerprint}
    try:
        import llvmlite.binding as llvm

        info["llvm_cpu"] = llvm.get_host_cpu_name()
    except ImportError:
        pass
    return info


def pipeline_section(pipeline) -> dict:
    """The pipeline as it ran: its YAML text when it came from a readable file, else canonical."""
    section = {"name": pipeline.name, "source": pipeline.source}
    path = Path(pipeline.source)
    if pipeline.source not in ("<python>", "<string>") and path.is_file():
        section["text"] = path.read_text(encoding="utf-8")
    section["stages"] = [_canonical_stage(s) for s in pipeline.ordered()]
    section["e2e_deadline_ms"] = pipeline.e2e_deadline_ms
    section["overrides"] = list(pipeline.overrides)
    return section


def _canonical_stage(stage) -> dict:
    return {"id": stage.id, "op": stage.op, "tag": stage.effective_tag,
            "params": {k: _jsonable(v) for k, v in stage.resolved_params.items()},
            "inputs": {k: str(v) for k, v in stage.inputs.items()},
            "deadline_ms": stage.deadline_ms, "on_miss": stage.on_miss,
            "degrade": None if stage.degrade is None else
            {"params": {k: _jsonable(v) for k, v in stage.degrade.params.items()},
             "frames": stage.degrade.frames}}


def _jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def default_record_path(pipeline, outputs: list[dict]) -> Path:
    """``<first run log>.record.json`` (else the first sink's ``path`` file), else
    ``runs/<name>-<UTC time>/record.json`` in the working directory."""
    files = run_logs(outputs) + [o for o in outputs if o["param"] == "path"]
    for output in files:
        path = Path(output["path"])
        return path.with_name(path.name + ".record.json")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path("runs") / f"{pipeline.name}-{stamp}" / "record.json"


def write_record(path: Path, record: dict) -> Path:
    """Write atomically (temp file + rename) so a reader never sees half a record; a failed
    write is an ``OutputWriteError`` naming the path and leaves no temporary file."""
    text = json.dumps(record, indent=1, default=_jsonable) + "\n"
    return write_text_atomic(path, text)


def record_status(record: dict) -> str:
    """The record's ``status``; "killed" for a "running" record whose process is gone (same
    host), "unknown" for records written before statuses existed."""
    status = record.get("status", "unknown")
    run = record.get("run") or {}
    pid = run.get("pid")
    if status == "running" and run.get("host") == platform.node() and isinstance(pid, int) \
            and pid > 0:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, OverflowError):
            return "killed"
        except PermissionError:
            pass  # alive, owned by another user
    return status


def read_record(path: str | Path) -> dict:
    """A run record as a dict; a missing, unreadable or foreign file is a UsageError."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: run record not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable run record ({exc})") from None
    if not isinstance(record, dict) or record.get("format") not in READABLE:
        raise UsageError(f"{path}: not a cuvil run record (expected format {FORMAT!r})")
    return record
