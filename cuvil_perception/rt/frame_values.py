"""What a frame in flight holds: the value each stage produced for it, and what the run's
decisions did to those values. The scheduler (``scheduler``) decides *when* a stage runs a
frame; this module keeps *what* the frame then holds, so every way a value can go missing or
go stale is written in one place.

Dropped values: every decision that removes a stage's value for a frame (a deadline ``drop``, a
``reuse_last`` with nothing to reuse, an ``e2e_miss`` before the sinks, and an admission
skip) goes through ``Frame.drop(stage_id, reason)``; ``reason`` is ``{"stage", "policy",
"reason"}``. Stages downstream of a dropped value are skipped (``Frame.skip``), except sinks
that implement ``process_dropped(frame, reason)``: they get the frame in order and write a line
saying which decision dropped it (``Frame.first_drop``; the ``jsonl`` sink), so outputs keep
one line per input frame. Only deterministic fields go into ``reason``, so a ``--decisions``
replay writes the same bytes.

Stale values: ``reuse_last`` hands a stage's last good output (``StageOutcomes.last_good``) to a
later frame; its ports are marked with the frame they came from, and the stages downstream of
that stage see the marks in ``FrameInfo.stale`` (``Frame.stale_seen_by``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

DROPPED = object()  # a stage's frame value when it was dropped or skipped


@dataclass
class Frame:
    """One admitted frame: sensor time, stamps, arrival on the run clock, and per stage its
    outputs (a ``{port: array}`` dict) or ``DROPPED``."""

    index: int
    timestamp_ns: int
    stamps: dict
    release_ns: int  # arrival on the run clock: paced release time, live read time, else admission
    values: dict = field(default_factory=dict)  # stage id -> outputs dict | DROPPED
    stale: dict = field(default_factory=dict)  # "stage/port" -> original frame index
    stale_owner: dict = field(default_factory=dict)  # "stage/port" -> stage id
    drops: dict = field(default_factory=dict)  # stage id -> reason it was dropped (see drop())
    e2e_checked: bool = False  # the e2e deadline was checked when its first sink became ready
    skipped: bool = False  # shed at admission: no stage runs it, no e2e is recorded

    def drop(self, stage_id: str, reason: dict) -> None:
        """The one way a decision removes a stage's value (see the module docstring)."""
        self.values[stage_id] = DROPPED
        self.drops.setdefault(stage_id, reason)

    def skip(self, stage_id: str) -> None:
        """An input of the stage was dropped: it produces nothing for this frame."""
        self.values[stage_id] = DROPPED

    def reuse(self, stage_id: str, outputs: dict, original: int) -> None:
        """``reuse_last``: the stage's outputs of frame ``original`` stand in, marked stale."""
        self.values[stage_id] = outputs
        for port in outputs:
            self.stale[f"{stage_id}/{port}"] = original
            self.stale_owner[f"{stage_id}/{port}"] = stage_id

    def drop_sinks(self, sink_ids, reason: dict) -> None:
        """An ``e2e_miss``: the sinks that have not run yet write this frame as dropped."""
        for sid in sink_ids:
            if sid not in self.values:
                self.drops.setdefault(sid, reason)

    def first_drop(self, stages, upstream: set[str]) -> dict:
        """The first drop (in ``stages`` order) among the stage ids ``upstream``."""
        for stage in stages:
            if stage.id in upstream and stage.id in self.drops:
                return self.drops[stage.id]
        return {"stage": None, "policy": "drop", "reason": "unknown"}

    def stale_seen_by(self, upstream: set[str]) -> dict:
        """The stale marks of the stages in ``upstream`` ("stage/port" -> original frame)."""
        return {k: v for k, v in self.stale.items() if self.stale_owner[k] in upstream}


class StageOutcomes:
    """Applies a stage's deadline decision for a frame to the frame's values, and keeps each
    stage's last good output (what ``reuse_last`` hands out)."""

    def __init__(self):
        self.last_good: dict[str, tuple[dict, int]] = {}  # stage id -> (outputs, frame index)

    def apply(self, frame: Frame, stage_id: str, action: str | None, outputs: dict) -> None:
        """``action``: None (in time), ``keep_late`` (late, kept: its frame can make e2e) or the
        ``on_miss`` policy that fired. A kept late result is a good output (``reuse_last``'s)."""
        if action in (None, "degrade", "keep_late"):
            frame.values[stage_id] = outputs
            self.last_good[stage_id] = (outputs, frame.index)
        elif action == "reuse_last" and stage_id in self.last_good:
            reused, original = self.last_good[stage_id]
            frame.reuse(stage_id, reused, original)
        else:  # drop, fail, or reuse_last without a previous good output
            frame.drop(stage_id, {"stage": stage_id, "policy": action,
                                  "reason": "deadline_miss"})
