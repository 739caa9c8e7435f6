"""rt.frame_values: what deadline decisions do to a frame's values, without threads or clocks."""

from __future__ import annotations

from types import SimpleNamespace

from cuvil_perception.rt.frame_values import DROPPED, Frame, StageOutcomes

STAGES = [SimpleNamespace(id=sid) for sid in ("cam", "detect", "track", "sink")]


def test_reuse_last_hands_out_the_last_good_outputs_marked_stale():
    outcomes, good = StageOutcomes(), {"boxes": [1], "scores": [2]}
    first, late, again = Frame(0, 10, {}, 0), Frame(1, 20, {}, 0), Frame(2, 30, {}, 0)
    outcomes.apply(first, "detect", None, good)
    outcomes.apply(late, "detect", "reuse_last", {"boxes": [9], "scores": [9]})
    assert late.values["detect"] is good and not late.drops
    assert late.stale == {"detect/boxes": 0, "detect/scores": 0}
    assert late.stale_seen_by({"cam", "detect"}) == late.stale
    assert late.stale_seen_by({"cam"}) == {}  # a stage not downstream of detect sees none
    outcomes.apply(again, "detect", "degrade", {"boxes": [3]})  # degraded output is good
    assert outcomes.last_good["detect"] == ({"boxes": [3]}, 2)


def test_a_miss_with_nothing_to_reuse_drops_and_the_first_reason_wins():
    frame = Frame(0, 10, {}, 0)
    StageOutcomes().apply(frame, "detect", "reuse_last", {"boxes": [1]})
    assert frame.values["detect"] is DROPPED
    assert frame.drops["detect"] == {"stage": "detect", "policy": "reuse_last",
                                     "reason": "deadline_miss"}
    frame.drop("detect", {"stage": None, "policy": "drop", "reason": "e2e_miss"})
    assert frame.drops["detect"]["reason"] == "deadline_miss"
    frame.skip("track")
    assert frame.values["track"] is DROPPED and "track" not in frame.drops
    assert frame.first_drop(STAGES, {"cam", "detect", "track", "sink"})["stage"] == "detect"
    assert frame.first_drop(STAGES, {"cam"})["reason"] == "unknown"


def test_an_e2e_miss_marks_only_the_sinks_that_have_not_run():
    frame = Frame(0, 10, {}, 0, values={"done_sink": {}})
    frame.drop_sinks({"done_sink", "sink"}, {"stage": None, "policy": "drop",
                                             "reason": "e2e_miss"})
    assert set(frame.drops) == {"sink"} and "sink" not in frame.values
