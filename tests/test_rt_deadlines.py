"""``deadline_ms: auto`` (measured in timed warm-up passes, kept per machine) and the keep-late
rule (a late result whose frame can still make e2e is kept), with costs on the fake clock."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception import machine_info
from cuvil_perception.errors import PipelineError
from cuvil_perception.graph import Pipeline, parse_pipeline
from cuvil_perception.rt import RunOptions, read_record, run_pipeline
from cuvil_perception.rt import deadline_cache
from cuvil_perception.rt.deadlines import MARGIN, TIMED_PASSES
from cuvil_perception.testing.clock import FakeClock

SLOW = [1.0, 1.0, 30.0, 1.0, 1.0, 1.0, 30.0, 1.0, 1.0, 1.0]  # frames 2 and 6 take 30 ms


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Every test starts with an empty cache of its own."""
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))


def auto_pipeline(out: Path, warmup=(10.0, 20.0, 12.0), e2e=None, cost=(1.0,),
                  deadline="auto") -> Pipeline:
    p = Pipeline("auto", e2e_deadline_ms=e2e)
    p.add("src", "test.scripted", frames=6, n=4)
    p.add("slow", "test.cost", inputs={"x": "src/value"}, cost_ms=list(cost),
          warmup_ms=list(warmup), deadline_ms=deadline, on_miss="drop")
    p.add("out", "test.lines", inputs={"y": "slow/y"}, path=str(out))
    return p.validate()


def run(p: Pipeline, **kw):
    kw.setdefault("enforce_deadlines", True)
    return run_pipeline(p, RunOptions(workers=1, clock=FakeClock(), **kw))


def test_auto_is_the_slowest_timed_pass_times_the_margin_rounded_up(tmp_path):
    result = run(auto_pipeline(tmp_path / "o.jsonl"))
    entry = result.deadlines["slow"]
    assert entry["source"] == "measured" and entry["origin"] == "warm-up"
    assert len(entry["passes_ms"]) == TIMED_PASSES  # 10, 20, 12, 10, 20, ... on the fake clock
    assert max(entry["passes_ms"]) == 20.0 and entry["ms"] == 20.0 * MARGIN == 30.0
    assert entry["capped"] is False
    record = read_record(result.record_path)
    assert record["deadlines"] == {"slow": entry}
    assert record["pipeline"]["stages"][1]["deadline_ms"] == 30.0  # what the run used
    line = next(x for x in result.placement if x.startswith("slow"))
    assert "deadline 30 ms (auto, measured now: max 20.0 ms of 8 passes x 1.5)" in line


def test_auto_rounds_up_to_5_ms_and_is_bounded_by_the_frame_budget(tmp_path):
    assert run(auto_pipeline(tmp_path / "a.jsonl", warmup=[7.0])).deadlines["slow"]["ms"] == 15.0
    capped = run(auto_pipeline(tmp_path / "b.jsonl", warmup=[90.0], e2e=100.0))
    entry = capped.deadlines["slow"]
    assert entry["ms"] == 100.0 and entry["capped"] is True and "capped at e2e 100" in entry["rule"]


def test_explicit_ms_are_used_as_written_and_time_no_pass(tmp_path):
    result = run(auto_pipeline(tmp_path / "o.jsonl", deadline=12.5))
    assert result.deadlines == {"slow": {"ms": 12.5, "source": "explicit"}}
    assert not list((tmp_path / "cache").glob("deadlines-v1/*.json"))


def test_second_run_starts_from_the_cache_and_another_machine_misses(tmp_path, monkeypatch):
    first = run(auto_pipeline(tmp_path / "a.jsonl"))
    second = run(auto_pipeline(tmp_path / "b.jsonl"))
    assert second.deadlines["slow"]["source"] == "cache"
    assert second.deadlines["slow"]["ms"] == first.deadlines["slow"]["ms"] == 30.0
    assert second.deadlines["slow"]["origin"] == "warm-up"
    assert "from cache (warm-up)" in next(x for x in second.placement if x.startswith("slow"))
    # another CPU (fingerprint) is another entry: measured again, with its own costs
    other = replace(machine_info.cpu(), model="Another CPU")
    assert other.fingerprint != machine_info.cpu().fingerprint
    monkeypatch.setattr(machine_info, "cpu", lambda: other)
    third = run(auto_pipeline(tmp_path / "c.jsonl", warmup=[20.0]))  # params differ: new hash
    assert third.deadlines["slow"]["source"] == "measured"
    fourth = run(auto_pipeline(tmp_path / "d.jsonl"))
    assert fourth.deadlines["slow"]["source"] == "measured"  # same pipeline, other machine


@pytest.mark.parametrize("garbage", [b"{not json", b"\xff\xfe", b"[]", b'{"format": 1}',
                                     b"", None])
def test_a_corrupt_or_foreign_cache_entry_is_a_miss(tmp_path, garbage):
    p = auto_pipeline(tmp_path / "a.jsonl")
    run(p)
    [path] = (tmp_path / "cache").glob("deadlines-v1/*.json")
    if garbage is None:  # a valid entry of another key copied over this one
        entry = json.loads(path.read_text())
        entry["key"]["fingerprint"] = "0" * 16
        path.write_text(json.dumps(entry))
    else:
        path.write_bytes(garbage)
    again = run(auto_pipeline(tmp_path / "b.jsonl"))
    assert again.deadlines["slow"]["source"] == "measured"
    assert json.loads(path.read_text())["stages"]["slow"]["ms"] == 30.0  # rewritten


@pytest.mark.parametrize("planted", ["fifo", "link", "loose"])
def test_a_cache_entry_not_ours_alone_is_never_read_and_never_hangs(tmp_path, planted):
    """Deadline entries are read as kernel cache entries are (compile.cache_trust.read_entry):
    a FIFO in an entry's place does not block, a link is not followed, a file others can write
    is not trusted (its 1 ms would make every frame miss): each is a miss, measured again."""
    import os

    run(auto_pipeline(tmp_path / "a.jsonl"))
    [path] = (tmp_path / "cache").glob("deadlines-v1/*.json")
    entry = json.loads(path.read_text())
    entry["stages"]["slow"]["ms"] = 1.0
    path.unlink()
    if planted == "fifo":
        os.mkfifo(path)
    elif planted == "link":
        (tmp_path / "elsewhere.json").write_text(json.dumps(entry))
        path.symlink_to(tmp_path / "elsewhere.json")
    else:
        path.write_text(json.dumps(entry))
        path.chmod(0o666)
    again = run(auto_pipeline(tmp_path / "b.jsonl"))
    assert again.deadlines["slow"]["source"] == "measured"
    assert again.deadlines["slow"]["ms"] == 30.0


def test_cache_clear_removes_the_measured_deadlines(tmp_path):
    from click.testing import CliRunner

    from cuvil_perception.cli.app import cli

    run(auto_pipeline(tmp_path / "a.jsonl"))
    assert len(deadline_cache.entries()) == 1
    info = CliRunner().invoke(cli, ["cache", "info"])
    assert "deadlines: 1 measured pipeline(s)" in info.output
    cleared = CliRunner().invoke(cli, ["cache", "clear"])
    assert cleared.exit_code == 0 and "removed 1 measured deadline entry" in cleared.output
    assert deadline_cache.entries() == []
    assert run(auto_pipeline(tmp_path / "b.jsonl")).deadlines["slow"]["source"] == "measured"


def test_a_cached_value_that_is_not_a_positive_number_or_is_malformed_is_a_miss(tmp_path):
    run(auto_pipeline(tmp_path / "a.jsonl"))
    [path] = (tmp_path / "cache").glob("deadlines-v1/*.json")
    for field, bad in (("ms", -1), ("ms", 0), ("ms", "30"), ("ms", True), ("ms", None),
                       ("ms", 1e400), ("passes_ms", "abc"), ("passes_ms", [1.0, None]),
                       ("origin", 3)):
        entry = json.loads(path.read_text())
        entry["stages"]["slow"][field] = bad
        path.write_text(json.dumps(entry).replace("Infinity", "1e400"))
        assert run(auto_pipeline(tmp_path / "b.jsonl")).deadlines["slow"]["source"] == "measured"


def test_rate_0_outputs_do_not_depend_on_auto_deadlines(tmp_path):
    base = tmp_path / "none.jsonl"
    p = auto_pipeline(base, deadline=None, cost=SLOW)
    run_pipeline(p, RunOptions(workers=1, clock=FakeClock()))
    for warmup in ([1.0], [50.0]):
        out = tmp_path / f"auto{warmup[0]:g}.jsonl"
        result = run_pipeline(auto_pipeline(out, warmup=warmup, cost=SLOW),
                              RunOptions(workers=1, clock=FakeClock()))
        assert result.decisions == [] and out.read_bytes() == base.read_bytes()


# -- keep late ----------------------------------------------------------------------------------

def late_pipeline(out: Path, e2e: float | None, after_ms: float = 0.0,
                  on_miss: str = "drop") -> Pipeline:
    p = Pipeline("late", e2e_deadline_ms=e2e)
    p.add("src", "test.scripted", frames=10, n=4)
    p.add("slow", "test.cost", inputs={"x": "src/value"}, cost_ms=list(SLOW), deadline_ms=10,
          on_miss=on_miss)
    p.add("after", "test.cost", inputs={"x": "slow/y"}, cost_ms=[after_ms], scale=1.0)
    p.add("out", "test.lines", inputs={"y": "after/y", "i": "src/index"}, path=str(out))
    return p.validate()


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_late_result_whose_frame_makes_e2e_is_kept_and_recorded(tmp_path):
    unlimited = tmp_path / "free.jsonl"
    run(late_pipeline(unlimited, None), enforce_deadlines=False)
    out = tmp_path / "o.jsonl"
    result = run(late_pipeline(out, e2e=50.0), max_in_flight=1)
    assert out.read_bytes() == unlimited.read_bytes()  # nothing thrown away
    assert result.actions == {"keep_late": 2}
    assert [(d["frame"], d["stage"], d["kind"], d["action"], d["predicted_e2e_ms"],
             d["e2e_deadline_ms"]) for d in result.decisions] == \
        [(2, "slow", "deadline_miss", "keep_late", 30.0, 50.0),
         (6, "slow", "deadline_miss", "keep_late", 30.0, 50.0)]
    assert result.report.row("slow").misses == 2
    record = read_record(result.record_path)
    outcomes = {t["frame"]: t["outcome"] for t in record["timings"] if t["stage"] == "slow"}
    assert outcomes[2] == outcomes[6] == "miss:keep_late" and outcomes[3] == "ok"


@pytest.mark.parametrize("on_miss", ["drop", "reuse_last"])
def test_a_late_result_whose_frame_cannot_make_e2e_follows_on_miss(tmp_path, on_miss):
    out = tmp_path / "o.jsonl"
    # 30 ms late stage + 5 ms predicted for `after` = 35 ms > 32: on_miss, although 30 <= 32
    result = run(late_pipeline(out, e2e=32.0, after_ms=5.0, on_miss=on_miss), max_in_flight=1)
    misses = [d for d in result.decisions if d["kind"] == "deadline_miss"]
    assert [(d["frame"], d["action"], d["predicted_e2e_ms"]) for d in misses] == \
        [(2, on_miss, 35.0), (6, on_miss, 35.0)]
    # reuse_last's stand-in still reaches the sinks 35 ms late: the e2e check drops it there
    late = [d["frame"] for d in result.decisions if d["kind"] == "e2e_miss"]
    assert late == ([] if on_miss == "drop" else [2, 6])
    assert [x["frame"] for x in lines(out)] == [0, 1, 3, 4, 5, 7, 8, 9]


def test_without_an_e2e_deadline_on_miss_acts_as_before(tmp_path):
    result = run(late_pipeline(tmp_path / "o.jsonl", None), max_in_flight=1)
    assert result.actions == {"drop": 2}
    assert all("predicted_e2e_ms" not in d for d in result.decisions)


def test_decisions_replay_with_late_and_dropped_results_is_byte_exact(tmp_path):
    out = tmp_path / "o.jsonl"
    p = late_pipeline(out, e2e=33.0, after_ms=2.0)
    p.stage("slow").params["cost_ms"] = [1.0, 1.0, 30.0, 1.0, 1.0, 1.0, 32.0, 1.0, 1.0, 1.0]
    result = run(p.validate(), max_in_flight=1)
    assert result.actions == {"keep_late": 1, "drop": 1}  # 30 + 2 <= 33 kept, 32 + 2 dropped
    again = tmp_path / "again.jsonl"
    q = late_pipeline(again, e2e=33.0, after_ms=2.0)
    q.stage("slow").params["cost_ms"] = [60.0, 0.0]  # another machine: late elsewhere
    replay = run(q.validate(), decisions=result.record_path, max_in_flight=1)
    assert again.read_bytes() == out.read_bytes()
    assert [(d["frame"], d["action"], d["replayed"]) for d in replay.decisions] == \
        [(2, "keep_late", True), (6, "drop", True)]


# -- validation ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value,fragment", [
    ("auto", None), ("atuo", "did you mean 'auto'"), ("Auto", "did you mean 'auto'"),
    (".nan", "got nan"), (".inf", "got inf"), ("-5", "got -5"), ("0", "got 0"),
    ("1.0e+300", "at most 3600000"), ("[auto]", "got ['auto']"), ("true", "got True"),
    ("'50'", "got '50'"), ("null", "got 'null'"),
])
def test_auto_parses_and_bad_values_name_the_field(value, fragment):
    text = ("stages:\n  - {id: src, op: test.scripted}\n"
            f"  - id: slow\n    op: test.cost\n    inputs: {{x: src/value}}\n"
            f"    deadline_ms: {value}\n")
    if fragment is None:
        assert parse_pipeline(text).validate().stage("slow").deadline_ms == "auto"
        return
    with pytest.raises(PipelineError) as caught:
        parse_pipeline(text).validate()
    message = str(caught.value)
    assert ":6:18: stage 'slow': field 'deadline_ms'" in message and fragment in message


def test_auto_needs_an_op_that_times_its_warm_up():
    text = "stages:\n  - {id: src, op: test.scripted}\n  - {id: p, op: test.pass, " \
           "inputs: {x: src/value}, deadline_ms: auto}\n"
    with pytest.raises(PipelineError, match="op 'test.pass' runs none"):
        parse_pipeline(text).validate()


def test_cache_key_names_cpu_runtime_pipeline_and_threads(tmp_path):
    p = auto_pipeline(tmp_path / "o.jsonl")
    key = deadline_cache.key_fields(p, 1)
    assert set(key) == {"fingerprint", "onnxruntime", "pipeline_sha256", "intra_op_threads"}
    assert deadline_cache.entry_path(key) != deadline_cache.entry_path(dict(key,
                                                                            intra_op_threads=2))


# -- rt calibrate --------------------------------------------------------------------------------

CALIBRATE_YAML = """\
pipeline: cal
e2e_deadline_ms: 100
stages:
  - {id: src, op: test.scripted, params: {frames: 6, n: 4}}
  - id: slow
    op: test.cost
    inputs: {x: src/value}
    params: {cost_ms: [2.0], warmup_ms: [1.0]}
    deadline_ms: auto    # measured
    on_miss: drop
  - {id: out, op: test.lines, inputs: {y: slow/y}, params: {path: out.jsonl}}
"""


def test_calibrate_measures_frames_keeps_them_and_writes_a_pinned_copy(tmp_path):
    from cuvil_perception.graph import load_pipeline
    from cuvil_perception.rt.calibrate import ORIGIN, calibrate, write_pinned

    source = tmp_path / "cal.yaml"
    source.write_text(CALIBRATE_YAML)
    p = load_pipeline(source)
    [found] = calibrate(p, frames=5, workers=1)
    assert found.stage == "slow" and len(found.frames_ms) == 5
    assert all(t >= 2.0 for t in found.frames_ms)  # test.cost sleeps 2 ms on the real clock
    assert found.ms >= 5.0 and found.ms % 5 == 0 and found.ms <= 100
    assert not (tmp_path / "out.jsonl").exists()  # sinks wrote into a temporary folder
    # the next run of the same pipeline on this machine starts from it
    result = run_pipeline(load_pipeline(source), RunOptions(workers=1, frames=2,
                                                            write_record=False))
    assert result.deadlines["slow"]["source"] == "cache"
    assert result.deadlines["slow"]["origin"] == ORIGIN
    assert result.deadlines["slow"]["ms"] == found.ms
    pinned = write_pinned(p, [found], tmp_path / "pinned.yaml", "test CPU")
    text = pinned.read_text()
    assert f"    deadline_ms: {found.ms:g}  # rt calibrate: test CPU\n" in text
    assert load_pipeline(pinned).stage("slow").deadline_ms == found.ms
    with pytest.raises(Exception, match="the pipeline itself"):
        write_pinned(p, [found], source, "x")


def test_metrics_count_late_results_as_the_record_does(tmp_path):
    from cuvil_perception.rt.metrics import RunMetrics

    metrics = RunMetrics()
    p = late_pipeline(tmp_path / "o.jsonl", e2e=33.0, after_ms=2.0)
    p.stage("slow").params["cost_ms"] = [1.0, 1.0, 30.0, 1.0, 1.0, 1.0, 32.0, 1.0, 1.0, 1.0]
    result = run(p.validate(), max_in_flight=1, monitors=(metrics,))
    counted = {(s.labels["stage"], s.labels["kind"], s.labels["policy"]): s.value
               for family in metrics.collect() if family.name == "cuvil_deadline_decisions"
               for s in family.samples if s.name.endswith("_total")}
    assert counted == {("slow", "deadline_miss", "keep_late"): 1.0,
                       ("slow", "deadline_miss", "drop"): 1.0}
    assert read_record(result.record_path)["actions"] == {"keep_late": 1, "drop": 1}
    dropped = {s.labels["reason"]: s.value for family in metrics.collect()
               if family.name == "cuvil_frames_dropped" for s in family.samples
               if s.name.endswith("_total")}
    assert dropped["deadline_drop"] == 1.0  # the kept late frame is not a dropped one


def test_rt_calibrate_cli_prints_keeps_and_writes_a_pinned_copy(tmp_path):
    from click.testing import CliRunner

    from cuvil_perception.cli.app import cli

    source = tmp_path / "cal.yaml"
    source.write_text(CALIBRATE_YAML)
    refused = CliRunner().invoke(cli, ["rt", "calibrate", str(source), "--frames", "3",
                                       "--write", str(source)])
    assert refused.exit_code == 2 and "--write" in refused.output, refused.output
    pinned = tmp_path / "pinned.yaml"
    done = CliRunner().invoke(cli, ["rt", "calibrate", str(source), "--frames", "3",
                                    "--workers", "1", "--write", str(pinned)])
    assert done.exit_code == 0, done.output
    assert machine_info.cpu().model in done.output  # the table names the CPU
    assert "slow" in done.output and f"wrote {pinned}" in done.output
    assert "deadline_ms: auto" not in pinned.read_text()
    [entry] = (tmp_path / "cache").glob("deadlines-v1/*.json")
    assert json.loads(entry.read_text())["stages"]["slow"]["origin"] == "rt calibrate"
    again = CliRunner().invoke(cli, ["rt", "calibrate", str(source), "--frames", "3",
                                     "--write", str(pinned)])  # not ours: needs --overwrite
    assert again.exit_code == 2
