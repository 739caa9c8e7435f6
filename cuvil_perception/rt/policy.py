"""Deadline decisions: when a stage is late, what happens to its output and to later frames.

A stage misses when its measured wall time (monotonic clock) exceeds ``deadline_ms`` (ms as
written, or ``auto`` resolved to ms before frame 0: ``rt.deadlines``). Native code is never
pre-empted, so the decision is taken when the late result arrives.

Work that made it is never thrown away: when the pipeline has an ``e2e_deadline_ms`` and the
late result's frame can still make it, the result is kept (action ``keep_late``, recorded with
``predicted_e2e_ms`` and ``e2e_deadline_ms``) and ``on_miss`` does not fire. "Can still make it"
is predicted at the point ``e2e_deadline_ms`` is checked (when the frame's first sink is ready,
below): the frame's time since its arrival plus the predicted cost of the longest chain of
non-sink stages after this one (``AdmissionControl.downstream_ns``: the admission cost model).
A frame that then turns out later is still dropped before its sinks (``e2e_miss``). Otherwise
(the frame cannot make e2e, or the pipeline has no e2e deadline) ``on_miss`` decides:

* ``drop``       the frame's output of this stage is discarded; stages that consume it are
                 skipped for that frame (sinks write nothing for it).
* ``reuse_last`` the stage's last good output replaces it; downstream stages see
                 ``frame.stale["stage/port"] = original frame index``. Without a previous good
                 output the frame is dropped (recorded as ``reuse_last`` with ``fallback: drop``).
* ``degrade``    the late result is kept (it is correct, only late) and the stage runs its
                 ``degrade`` variant (the cheaper params) for the next ``frames`` frames, then
                 the normal variant again; a miss inside the window restarts it.
* ``fail``       the run stops: nothing new starts, running stages finish, everything is closed,
                 and ``DeadlineFailure`` carries the report.

``e2e_deadline_ms`` (pipeline-wide) is checked once per frame, when the frame's first sink is
ready to run (the last moment its outputs can still change): a frame already later than the
deadline is dropped before the sinks (decision ``kind: e2e_miss``, ``action: drop``; a ``jsonl``
sink writes a line saying so). The full end-to-end latency, sinks included, is measured and
its misses counted in the latency table in every case (a sink writing on its own thread counts
until it queued the frame; ``e2e+background`` is until written, see ``rt.stats``).

When decisions are acted on: ``enforce`` (``RunOptions.enforce_deadlines``; by default on for
paced replays and live input, off for ``rate 0`` replays, which are then a pure function of the
drive). Misses are always measured.

Decision entries (the run record's ``decisions``): ``{"frame", "stage", "kind", "elapsed_ms",
"deadline_ms", "action", "variant"}``; ``kind`` "deadline_miss" (``action``: ``keep_late`` or
the ``on_miss`` that fired; with an e2e deadline also ``predicted_e2e_ms`` and
``e2e_deadline_ms``), "e2e_miss" (``action`` "drop", ``stage`` None) or "admission_skip"
(``rt.admission``); a ``--decisions`` replay adds ``"replayed": true``.

Each stage processes frames strictly in order, so "last good output" and the degrade window are
functions of the sequence of decisions alone. That is why re-applying a record's decisions
(``--decisions``) instead of measuring reproduces the recorded outputs byte for byte.
"""

from __future__ import annotations

import threading

from ..errors import UsageError
from .record import read_record

KEEP_LATE = "keep_late"  # a late result kept: its frame could still make e2e_deadline_ms
ACTIONS = ("drop", "reuse_last", "degrade", "fail", KEEP_LATE)
KINDS = ("deadline_miss", "e2e_miss", "admission_skip")  # admission_skip: see rt.admission


class DeadlinePolicy:
    """Decides per (frame, stage), from measurements or from a recorded decision list.

    ``stages``: validated ``graph.Stage`` objects. ``enforce``: apply ``on_miss`` (else only
    ``None`` is returned). ``recorded``: decisions of an earlier run to re-apply verbatim.
    ``e2e_deadline_ms``: the pipeline's end-to-end deadline (``decide_e2e``).
    """

    def __init__(self, stages, enforce: bool, recorded: list[dict] | None = None,
                 e2e_deadline_ms: float | None = None):
        self.stages = {s.id: s for s in stages}
        self.e2e_deadline_ms = e2e_deadline_ms
        self.enforce = enforce
        self.replaying = recorded is not None
        self._recorded = {(d["frame"], d["stage"]): d for d in (recorded or [])
                          if d.get("kind") == "deadline_miss"}
        self._recorded_e2e = {d["frame"] for d in (recorded or [])
                              if d.get("kind") == "e2e_miss" and d.get("action") == "drop"}
        self._degraded_until: dict[str, int] = {}
        self.decisions: list[dict] = []
        self._lock = threading.Lock()

    def variant(self, stage_id: str, frame: int) -> str:
        """``"degraded"`` inside a degrade window, else ``"normal"``."""
        with self._lock:
            return "degraded" if frame <= self._degraded_until.get(stage_id, -1) else "normal"

    def decide(self, stage_id: str, frame: int, elapsed_ns: int, variant: str,
               e2e_outlook=None) -> str | None:
        """The action for this (frame, stage) result, or None to keep it; logs every decision.

        ``e2e_outlook()``: the frame's predicted end-to-end time (ns) at its sinks if this
        result is kept (asked only on a miss with an ``e2e_deadline_ms``; see the module
        docstring)."""
        stage = self.stages[stage_id]
        predicted = None
        if self.replaying:
            recorded = self._recorded.get((frame, stage_id))
            if recorded is None:
                return None
            action = recorded["action"]
            predicted = recorded.get("predicted_e2e_ms")
        elif self.enforce and stage.deadline_ms is not None \
                and elapsed_ns > stage.deadline_ms * 1e6:
            action = stage.on_miss
            if self.e2e_deadline_ms is not None and e2e_outlook is not None:
                predicted = round(e2e_outlook() / 1e6, 4)
                if predicted <= self.e2e_deadline_ms:
                    action = KEEP_LATE
        else:
            return None
        entry = {"frame": frame, "stage": stage_id, "kind": "deadline_miss",
                 "elapsed_ms": round(elapsed_ns / 1e6, 4), "deadline_ms": stage.deadline_ms,
                 "action": action, "variant": variant}
        if predicted is not None:
            entry.update(predicted_e2e_ms=predicted, e2e_deadline_ms=self.e2e_deadline_ms)
        if self.replaying:
            entry["replayed"] = True
        with self._lock:
            if action == "degrade" and stage.degrade is not None:
                self._degraded_until[stage_id] = frame + int(stage.degrade.frames)
                entry["degraded_until"] = frame + int(stage.degrade.frames)
            self.decisions.append(entry)
        return action

    def decide_e2e(self, frame: int, elapsed_ns: int) -> bool:
        """True to drop ``frame`` before its sinks (``e2e_deadline_ms`` exceeded, enforced or
        replayed); logs the decision."""
        deadline = self.e2e_deadline_ms
        if self.replaying:
            if frame not in self._recorded_e2e:
                return False
        elif not self.enforce or deadline is None or elapsed_ns <= deadline * 1e6:
            return False
        entry = {"frame": frame, "stage": None, "kind": "e2e_miss",
                 "elapsed_ms": round(elapsed_ns / 1e6, 4), "deadline_ms": deadline,
                 "action": "drop", "variant": None}
        if self.replaying:
            entry["replayed"] = True
        self.note(entry)
        return True

    def note(self, entry: dict) -> None:
        """Log a decision taken outside ``decide``: an ``e2e_miss`` (changes no output) or an
        ``admission_skip`` (the frame was shed before any stage ran, ``rt.admission``)."""
        with self._lock:
            self.decisions.append(entry)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for entry in self.decisions:
            out[entry["action"]] = out.get(entry["action"], 0) + 1
        return out


def load_decisions(path, pipeline, warn) -> list[dict]:
    """The decisions of a run record, checked against the stages of ``pipeline``."""
    record = read_record(path)
    decisions = record.get("decisions")
    if not isinstance(decisions, list):
        raise UsageError(f"{path}: run record has no 'decisions' list")
    ids = {s.id for s in pipeline.stages}
    for entry in decisions:
        if not isinstance(entry, dict) or entry.get("kind") not in KINDS:
            raise UsageError(f"{path}: malformed decision entry {entry!r}")
        if entry["kind"] == "admission_skip" and (not isinstance(entry.get("frame"), int)
                                                  or isinstance(entry.get("frame"), bool)):
            raise UsageError(f"{path}: malformed decision entry {entry!r}")
        if entry["kind"] == "deadline_miss":
            if entry.get("stage") not in ids:
                raise UsageError(f"{path}: decision for stage {entry.get('stage')!r}, which this "
                                 f"pipeline does not have (stages: {', '.join(sorted(ids))})")
            if entry.get("action") not in ACTIONS or not isinstance(entry.get("frame"), int):
                raise UsageError(f"{path}: malformed decision entry {entry!r}")
    recorded_stages = [s.get("id") for s in record.get("pipeline", {}).get("stages", [])]
    if recorded_stages and sorted(recorded_stages) != sorted(ids):
        warn(f"{path}: recorded pipeline had stages {recorded_stages}; re-applying its decisions "
             "to a different pipeline")
    _check_identity(path, record, pipeline, warn)
    return decisions


def _check_identity(path, record: dict, pipeline, warn) -> None:
    """Decisions are per frame index: refuse a record of another drive (fingerprints differ);
    warn when the pipeline's stages compute differently (``pipeline_sha256``)."""
    from .run_files import drive_fingerprints, pipeline_hash

    recorded = {d.get("stage"): d for d in record.get("drives") or []}
    for current in drive_fingerprints(pipeline):
        before = recorded.get(current["stage"])
        if before is not None and before.get("sha256") != current["sha256"]:
            raise UsageError(f"{path}: its decisions were recorded on drive {before.get('path')}"
                             f" ({before.get('files')} files), not on {current['path']} "
                             f"({current['files']} files); decisions are per frame, so they "
                             "only reproduce a run of the same drive")
    if "pipeline_sha256" in record and record["pipeline_sha256"] != pipeline_hash(pipeline):
        warn(f"{path}: recorded with a different pipeline (stage ops, params or wiring differ); "
             "its decisions may not reproduce that run's outputs")
