"""A banner across the top of a frame's pictures when they do not show that frame's own results.

A run frame's jsonl line says when a deadline decision changed it (schema in ``ops.sinks``):
``dropped`` = {stage, policy, reason} (reason ``deadline_miss``: a stage's output was thrown
away, ``e2e_miss``: the frame was dropped before its sinks, ``admission_skip``: it was shed
before any stage ran), and ``stale`` = {"stage/port": original frame} for outputs reused from
an earlier frame (``on_miss: reuse_last``). Without a banner such a picture would show no boxes,
or older boxes, and look like a frame where nothing was found. The run record's ``decisions``
add the measured numbers (elapsed vs deadline ms, predicted ms) when the record is at hand.

``frame_notice`` gives the banner's text (what is wrong, which stage, why) and its kind;
``draw_banner`` paints it over the top of an image: dark red for a dropped or skipped frame,
amber for stale results. A late result that was kept is the frame's own and gets none.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

DROPPED_COLOUR = (0, 0, 170)  # BGR: dark red
STALE_COLOUR = (0, 120, 215)  # BGR: amber
TEXT_COLOUR = (255, 255, 255)
FONT = cv2.FONT_HERSHEY_SIMPLEX


@dataclass(frozen=True)
class Notice:
    """The banner of one frame: ``lines`` of text and ``kind`` ("dropped" or "stale")."""

    lines: tuple[str, ...]
    kind: str

    @property
    def colour(self) -> tuple[int, int, int]:
        return DROPPED_COLOUR if self.kind == "dropped" else STALE_COLOUR

    @property
    def text(self) -> str:
        return " / ".join(self.lines)


def frame_notice(dropped: dict | None, stale: dict, decisions: list[dict] = ()) -> Notice | None:
    """The banner of a frame from its jsonl ``dropped`` and ``stale`` fields and the record's
    ``decisions`` for that frame (may be empty); None when the pictures show the frame's own
    results on time."""
    by_stage = {d.get("stage"): d for d in decisions}
    if dropped:
        return Notice((_dropped_text(dropped, by_stage),), "dropped")
    # a late result that was kept (on_miss: degrade, keep_late) is this frame's own: no banner
    lines = [_stale_text(ref, original, by_stage) for ref, original in sorted(stale.items())]
    return Notice(tuple(lines), "stale") if lines else None


def _dropped_text(dropped: dict, by_stage: dict) -> str:
    stage, reason = dropped.get("stage"), dropped.get("reason")
    decision = by_stage.get(stage, {})
    if reason == "admission_skip":
        predicted = decision.get("predicted_ms")
        why = (f": predicted {predicted:.0f} ms > {decision.get('deadline_ms'):g} ms budget"
               if _numbers(predicted, decision.get("deadline_ms")) else "")
        return f"SKIPPED at admission{why}; no stage ran, no results"
    if reason == "e2e_miss":
        return f"DROPPED before the sinks: frame {_timing(decision, 'e2e deadline')}; no results"
    if reason == "deadline_miss":
        policy = dropped.get("policy")
        nothing = " (no earlier result to reuse)" if policy == "reuse_last" else ""
        return (f"DROPPED: stage '{stage}' {_timing(decision)}, on_miss: {policy}{nothing}; "
                "no results downstream of it")
    return f"DROPPED: {f'stage {stage!r}: ' if stage else ''}{reason}; no results"


def _stale_text(ref: str, original: int, by_stage: dict) -> str:
    stage = ref.partition("/")[0]
    decision = by_stage.get(stage, {})
    why = f" ({stage} {_timing(decision)})" if decision else ""
    return f"STALE: {ref} reused from frame {original}{why}"


def _timing(decision: dict, what: str = "deadline") -> str:
    """``took 69 ms > 50 ms deadline`` from a decision, or ``missed its deadline``."""
    elapsed, deadline = decision.get("elapsed_ms"), decision.get("deadline_ms")
    if _numbers(elapsed, deadline):
        return f"took {elapsed:.0f} ms > {deadline:g} ms {what}"
    return f"missed its {what}"


def _numbers(*values) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def draw_banner(image: np.ndarray, notice: Notice) -> None:
    """Paint ``notice`` over the top rows of ``image`` (uint8 [H, W, 3], BGR) in place: a filled
    bar in the notice's colour, white text wrapped to the width."""
    height, width = image.shape[:2]
    scale = float(np.clip(width / 1600.0, 0.4, 0.7))
    pad = max(4, int(round(12 * scale)))
    (_, text_h), baseline = cv2.getTextSize("Ag", FONT, scale, 1)
    step = text_h + baseline + pad // 2
    lines = [row for line in notice.lines for row in _wrap(line, width - 2 * pad, scale)]
    bottom = min(height, pad + step * len(lines))
    image[:bottom] = notice.colour
    for k, line in enumerate(lines):
        cv2.putText(image, line, (pad, pad + text_h + k * step), FONT, scale, TEXT_COLOUR, 1,
                    cv2.LINE_AA)


def _wrap(text: str, width: int, scale: float) -> list[str]:
    """``text`` split at spaces into lines no wider than ``width`` pixels (a longer word alone)."""
    rows, current = [], ""
    for word in text.split():
        trial = f"{current} {word}".strip()
        if current and cv2.getTextSize(trial, FONT, scale, 1)[0][0] > width:
            rows.append(current)
            current = word
        else:
            current = trial
    return rows + ([current] if current else [])
