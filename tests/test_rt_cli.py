"""`cuvil-perception run`: outputs, record, trace, decisions replay and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception.cli.app import cli
from cuvil_perception.testing.clock import FakeClock

PIPELINE = """\
pipeline: cli-test
stages:
  - {id: src, op: test.scripted, params: {frames: 8, n: 16}}
  - id: slow
    op: test.cost
    inputs: {x: src/value}
    params: {cost_ms: [0.0, 0.0, 200.0, 0.0]}  # on the fake clock: exactly these costs
    deadline_ms: 100
    on_miss: %s
  - {id: work, op: test.work, inputs: {x: slow/y}, params: {reps: 1}}
  - {id: out, op: test.lines, inputs: {y: work/y}, params: {path: out.jsonl}}
"""


@pytest.fixture(autouse=True)
def fake_clock(monkeypatch):
    """`run` measures on a FakeClock: `slow` takes exactly its cost_ms and the other stages no
    time, so which frames miss their 100 ms deadline never depends on the machine's load."""
    monkeypatch.setattr("cuvil_perception.rt.executor.MonotonicClock", FakeClock)


@pytest.fixture
def make(tmp_path):
    def write(on_miss: str = "drop") -> Path:
        path = tmp_path / f"p-{on_miss}.yaml"
        path.write_text(PIPELINE % on_miss)
        return path

    return write


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_run_prints_outputs_record_prewarm_and_table(tmp_path, make):
    trace = tmp_path / "t.json"
    result = invoke("run", make(), "--workers", 2, "--trace", trace, "--frames", 6,
                    "--enforce-deadlines")
    assert result.exit_code == 0, result.output
    out = tmp_path / "out.jsonl"
    assert f"output  out (test.lines.path): {out}" in result.output
    assert f"record  {out}.record.json" in result.output
    assert f"trace   {trace}" in result.output
    assert "prewarm 0 kernel(s)" in result.output and "0 compile(s) after frame 0" in result.output
    for column in ("stage", "op", "tag", "p50", "p99", "cpu/wall", "misses"):
        assert column in result.output
    assert "deadline decisions: drop 1" in result.output  # frame 2 costs 200 ms > 100 ms
    assert len(out.read_text().splitlines()) == 5
    assert json.loads(trace.read_text())["traceEvents"]


def test_run_decisions_replay_and_no_deadlines(tmp_path, make):
    pipeline = make("reuse_last")
    first = invoke("run", pipeline, "--record", tmp_path / "rec.json", "--enforce-deadlines")
    assert first.exit_code == 0, first.output
    recorded = (tmp_path / "out.jsonl").read_bytes()
    assert json.loads(recorded.splitlines()[2])["stale"] == {"slow/y": 1}
    again = invoke("run", pipeline, "--decisions", tmp_path / "rec.json", "--out",
                   tmp_path / "ignored.jsonl", "--record", tmp_path / "rec2.json")
    assert again.exit_code == 2 and "no 'jsonl' stage" in again.output  # --out needs jsonl
    again = invoke("run", pipeline, "--decisions", tmp_path / "rec.json",
                   "--record", tmp_path / "rec2.json")
    assert again.exit_code == 0, again.output
    assert (tmp_path / "out.jsonl").read_bytes() == recorded
    free = invoke("run", pipeline, "--no-deadlines", "--record", tmp_path / "rec3.json")
    assert free.exit_code == 0
    assert all(json.loads(x)["stale"] == {} for x in (tmp_path / "out.jsonl").read_text()
               .splitlines())


def test_run_fail_policy_exits_1_with_report(tmp_path, make):
    result = invoke("run", make("fail"), "--workers", 1, "--enforce-deadlines")
    assert result.exit_code == 1
    assert "error: deadline miss at stage 'slow'" in result.output
    assert "on_miss: fail" in result.output and "record.json" in result.output
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2  # frames 0 and 1


@pytest.mark.parametrize("args, needle", [
    (["--workers", "0"], "--workers"),
    (["--rate", "-1"], "--rate"),
    (["--decisions", "missing.json"], "run record not found"),
    (["--replay", "somewhere"], "no 'replay' stage"),
])
def test_run_usage_errors_exit_2(tmp_path, make, args, needle):
    result = invoke("run", make(), *args)
    assert result.exit_code == 2 and needle in result.output
