"""``cuvil-perception rt check``: every trial measured, and what took effect is what the OS did."""

from __future__ import annotations

import pytest

from cuvil_perception.cli import main
from cuvil_perception.rt import rtcheck, sched_deadline


def test_rt_check_measures_every_trial_and_reports_refusals(monkeypatch):
    monkeypatch.setattr(sched_deadline, "_syscall", lambda number, attr: 16)  # EBUSY
    trials = rtcheck.rt_check(0.5)
    assert [t.knob for t in trials] == list(rtcheck.TRIALS)
    by_knob = {t.knob: t for t in trials}
    assert by_knob["none"].status == "baseline"
    assert by_knob["deadline"].status.startswith("refused: rt.sched: the OS refused "
                                                 "SCHED_DEADLINE")
    assert "admission control" in by_knob["deadline"].status
    for trial in trials:
        row = trial.row()
        assert row["calls"] == rtcheck.CALLS_PER_TICK * trial.wake_us.size > 0
        assert 0 <= row["call_p50"] <= row["call_p99"] <= row["call_p999"] <= row["call_max"]
        assert row["wake_p50"] <= row["wake_max"] and row["wake_p50"] >= 0


def test_rt_check_cli_prints_the_table(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["rt", "check", "--seconds", "0.5"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for knob in rtcheck.TRIALS:
        assert knob in out
    assert "wake p99" in out and "jitter" in out and "cgroup v2 placement" in out


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "1e9", "abc", ""])
def test_rt_check_bad_seconds(capsys, value):
    with pytest.raises(SystemExit) as exc:
        main(["rt", "check", "--seconds", value])
    assert exc.value.code == 2
    assert "Traceback" not in capsys.readouterr().err
