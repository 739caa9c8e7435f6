"""The files of one run: what it reads and writes (for the output-path policy), and its run
record over the run's life (written at the start, refreshed while frames go through, finished
with how the run ended).

Order, from ``run_pipeline``: ``plan(pipeline, options)`` applies the output-path policy and
returns the record path before anything is opened; ``hold_outputs`` locks every output for the
run's life (a second run on one of them stops there); ``RecordFile.start`` writes the record with
``status: "running"`` (replacing a previous run's record, and removing stale records beside the
run's other run logs, so ``render`` can never pick up an older run's drive); ``progress``
rewrites it at most once a second; ``finish`` writes the full record with its final status.
Each of those writes carries ``output_files`` (``written_files``): what the run has written into
each sink file, by which the record vouches for that very file to a later run.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from pathlib import Path

from ..graph import Sink
from ..graph.roles import run_logs
from ..output_files import SINK_KINDS, is_previous_output
from .lifecycle import is_source, sink_outputs
from .output_lock import OutputLocks, hold
from .output_policy import Claim, check_outputs
from .record import FORMAT, default_record_path, machine, pipeline_section, versions, write_record
from .written_files import WrittenFiles

PROGRESS_INTERVAL_S = 1.0
_SMALL_TEXT = 65536  # text files up to this size (timestamps, calibration) enter the fingerprint


def _is_sink(stage) -> bool:
    return stage.op_cls is not None and issubclass(stage.op_cls, Sink)


def run_inputs(pipeline, options) -> list[Claim]:
    """The pipeline file, every Path param of non-sink stages (drives, models), ``--decisions``
    and ``options.extra_inputs``."""
    found = []
    if pipeline.source not in ("<python>", "<string>") and Path(pipeline.source).is_file():
        found.append(Claim("the pipeline file", Path(pipeline.source)))
    for stage in pipeline.ordered():
        if _is_sink(stage):
            continue
        for name, value in stage.resolved_params.items():
            if isinstance(value, Path):
                found.append(Claim(f"stage '{stage.id}' {stage.op}.{name}", value,
                                   folder=value.is_dir()))
    if options.decisions is not None:
        found.append(Claim("--decisions", Path(options.decisions)))
    found.extend(options.extra_inputs)
    return found


def _sink_files(pipeline) -> list[Path]:
    """The sink outputs that are files (not a sink's ``folder_params``)."""
    classes = {s.id: s.op_cls for s in pipeline.ordered()}
    return [Path(o["path"]) for o in sink_outputs(pipeline)
            if o["param"] not in getattr(classes[o["stage"]], "folder_params", ())]


def run_outputs(pipeline, options) -> tuple[list[Claim], Path | None]:
    """Every sink path, the record (None when not written), ``--trace`` and
    ``options.extra_outputs``; and the record path."""
    found = []
    classes = {s.id: s.op_cls for s in pipeline.ordered()}
    for output in sink_outputs(pipeline):
        folders = getattr(classes[output["stage"]], "folder_params", ())
        found.append(Claim(f"stage '{output['stage']}' ({output['op']}.{output['param']})",
                           Path(output["path"]), folder=output["param"] in folders,
                           kind=SINK_KINDS.get(output["op"], "")))
    record = None
    if options.write_record:
        record = Path(options.record or default_record_path(pipeline, sink_outputs(pipeline)))
        found.append(Claim("--record" if options.record else "the run record", record,
                           kind="record"))
    if options.trace is not None:
        found.append(Claim("--trace", Path(options.trace), kind="trace"))
    found.extend(options.extra_outputs)
    return found, record


def plan(pipeline, options) -> Path | None:
    """Apply the output-path policy to the run (``OutputPathError`` before any work); returns
    the record path or None."""
    outputs, record = run_outputs(pipeline, options)
    check_outputs(outputs, run_inputs(pipeline, options), overwrite=options.overwrite)
    return record


def hold_outputs(pipeline, options) -> OutputLocks:
    """Lock every output of the run for its life (`output_lock`): `OutputPathError` (rule
    ``busy``, exit 2) naming the other run's pid when another run writes one of them."""
    return hold(run_outputs(pipeline, options)[0])


def pipeline_hash(pipeline) -> str:
    """sha256 of the stages as they compute: ops, params, wiring, deadlines; sink params and
    source paths left out (they change with --out / --replay, not with the decisions)."""
    stages = pipeline_section(pipeline)["stages"]
    by_id = {s.id: s for s in pipeline.ordered()}
    for entry in stages:
        stage = by_id[entry["id"]]
        if _is_sink(stage):
            entry["params"] = {}
        elif is_source(stage):
            entry["params"] = {k: v for k, v in entry["params"].items() if k != "path"}
    text = json.dumps(stages, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def drive_fingerprints(pipeline) -> list[dict]:
    """For each source stage with a ``path``: file count, bytes and a sha256 over the relative
    names and sizes of its files plus the content of its small text files (timestamps,
    calibration). Cheap (no image or scan is read) and changes when frames do."""
    found = []
    for stage in pipeline.ordered():
        path = stage.resolved_params.get("path") if is_source(stage) else None
        if isinstance(path, Path) and path.exists():
            found.append(dict(_fingerprint(path), stage=stage.id, path=str(path.resolve())))
    return found


def _fingerprint(root: Path) -> dict:
    digest, files, total = hashlib.sha256(), 0, 0
    entries = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for entry in entries:
        size = entry.stat().st_size
        files, total = files + 1, total + size
        digest.update(f"{entry.relative_to(root) if entry != root else entry.name}\0{size}\0"
                      .encode())
        if entry.suffix == ".txt" and size <= _SMALL_TEXT:
            digest.update(entry.read_bytes())
    return {"files": files, "bytes": total, "sha256": digest.hexdigest()}


def output_digests(outputs: list[dict]) -> dict[str, dict]:
    """``{path: {"bytes", "sha256"}}`` of the run logs (`roles.run_logs`) that exist."""
    found = {}
    for output in run_logs(outputs):
        path = Path(output["path"])
        if path.is_file():
            data = path.read_bytes()
            found[str(path.resolve())] = {"bytes": len(data),
                                          "sha256": hashlib.sha256(data).hexdigest()}
    return found


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class RecordFile:
    """The run record on disk while the run goes (see the module docstring)."""

    def __init__(self, path: Path, pipeline, options):
        self.path = Path(path)
        self.written = WrittenFiles(_sink_files(pipeline))
        self.header = {"format": FORMAT, "status": "running",
                       "run": {"pid": os.getpid(), "host": platform.node(),
                               "started_utc": _utc(), "ended_utc": None, "frames_done": 0},
                       "pipeline": pipeline_section(pipeline),
                       "pipeline_sha256": pipeline_hash(pipeline),
                       "drives": drive_fingerprints(pipeline),
                       "outputs": sink_outputs(pipeline),
                       "versions": versions(), "machine": machine()}
        self.header["output_files"] = self.written.at_start()  # before any sink opens
        self._last = 0.0
        self.finished = False

    def start(self) -> None:
        _remove_stale_sidecars(self.header["outputs"], self.path)
        write_record(self.path, self.header)
        self._last = time.monotonic()

    def progress(self, frames_done: int) -> None:
        """Refresh ``run.frames_done`` (at most once per ``PROGRESS_INTERVAL_S``)."""
        now = time.monotonic()
        if now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now
        self.header["run"]["frames_done"] = frames_done
        self.header["output_files"] = self.written.refresh()
        write_record(self.path, self.header)

    def finish(self, record: dict, status: str) -> Path:
        """The full record (``record_build``) with the header fields and ``status``."""
        run = dict(self.header["run"], ended_utc=_utc(), frames_done=record.get("frames", 0))
        full = dict(self.header, **record, status=status, run=run,
                    output_digests=output_digests(self.header["outputs"]),
                    output_files=self.written.whole())
        self.finished = True
        return write_record(self.path, full)

    def abort(self, status: str, reason: str) -> None:
        """The run ended before its record could be built (an error while opening, a signal
        during prewarm): the header with the status and the reason."""
        run = dict(self.header["run"], ended_utc=_utc())
        write_record(self.path, dict(self.header, status=status, run=run,
                                     stopped={"reason": reason},
                                     output_files=self.written.whole()))


def _remove_stale_sidecars(outputs: list[dict], record: Path) -> None:
    """A ``<out>.jsonl.record.json`` of an earlier run beside this run's run logs (when
    this run's record goes elsewhere) would describe another run: remove it if it is ours."""
    for output in run_logs(outputs):
        sidecar = Path(output["path"]).with_name(Path(output["path"]).name + ".record.json")
        if sidecar.resolve() != record.resolve() and sidecar.is_file() and \
                is_previous_output(sidecar):
            sidecar.unlink()
