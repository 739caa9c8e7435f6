"""The pipeline's ``rt:`` block: strict checks with file:line, applied per thread, refusals warn."""

from __future__ import annotations

import os

import pytest

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception.errors import PipelineError
from cuvil_perception.graph import parse_pipeline
from cuvil_perception.rt import RunOptions, parse_knobs, run_pipeline
from cuvil_perception.rt import knobs as knobs_module

STAGES = """\
stages:
  - {id: src, op: test.scripted, params: {frames: 3}}
  - {id: work, op: test.work, inputs: {x: src/value}}
  - {id: out, op: test.lines, inputs: {y: work/y}, params: {path: out.jsonl}}
"""


def pipeline(rt_block: str, tmp_path):
    text = f"pipeline: knobs\n{rt_block}{STAGES}"
    return parse_pipeline(text, "knobs.yaml", base_dir=tmp_path).validate()


def test_valid_knobs_parse(tmp_path):
    p = pipeline("rt:\n  cpu_affinity: {io: [0], compute: [0, 1]}\n"
                 "  sched: {policy: fifo, priority: 5}\n  mlockall: false\n", tmp_path)
    knobs = parse_knobs(p)
    assert knobs.affinity == {"io": [0], "compute": [0, 1]}
    assert knobs.fifo_priority == 5 and knobs.mlockall is False
    assert parse_knobs(pipeline("", tmp_path)).affinity == {}


@pytest.mark.parametrize("block, field, needle", [
    ("rt:\n  cpu_afinity: {io: [0]}\n", "rt.cpu_afinity", "did you mean 'cpu_affinity'"),
    ("rt:\n  cpu_affinity: {gpu: [0]}\n", "rt.cpu_affinity.gpu", "unknown worker group"),
    ("rt:\n  cpu_affinity: {io: []}\n", "rt.cpu_affinity.io", "non-empty list"),
    ("rt:\n  cpu_affinity: {io: [-1]}\n", "rt.cpu_affinity.io", "non-empty list"),
    ("rt:\n  sched: {policy: rr}\n", "rt.sched.policy", "must be one of fifo, deadline"),
    ("rt:\n  sched: {policy: fifo, priority: 100}\n", "rt.sched.priority", "1..99"),
    ("rt:\n  sched: {policy: fifo, prio: 3}\n", "rt.sched.prio", "did you mean 'priority'"),
    ("rt:\n  mlockall: yes please\n", "rt.mlockall", "true or false"),
])
def test_bad_knobs_name_file_line_and_field(tmp_path, block, field, needle):
    with pytest.raises(PipelineError) as caught:
        parse_knobs(pipeline(block, tmp_path))
    message = str(caught.value)
    assert message.startswith("knobs.yaml:3:") and f"field '{field}'" in message
    assert needle in message


def test_affinity_is_applied_to_executor_threads(tmp_path, monkeypatch):
    allowed = sorted(os.sched_getaffinity(0))
    seen = []
    real = os.sched_setaffinity

    def spy(pid, cpus):
        seen.append((pid, list(cpus)))
        real(pid, cpus)

    monkeypatch.setattr(knobs_module.os, "sched_setaffinity", spy)
    p = pipeline(f"rt:\n  cpu_affinity: {{io: [{allowed[0]}], compute: [{allowed[-1]}]}}\n",
                 tmp_path)
    result = run_pipeline(p, RunOptions(workers=2))
    assert result.frames == 3 and not result.warnings
    assert (0, [allowed[0]]) in seen and (0, [allowed[-1]]) in seen
    assert os.sched_getaffinity(0) == set(allowed)  # the caller's thread is left alone


def test_refused_knobs_warn_once_and_the_run_continues(tmp_path, monkeypatch):
    def refuse(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(knobs_module.os, "sched_setscheduler", refuse)
    monkeypatch.setattr(knobs_module.os, "sched_setaffinity", refuse)
    p = pipeline("rt:\n  cpu_affinity: {compute: [0]}\n  sched: {policy: fifo, priority: 3}\n",
                 tmp_path)
    warnings = []
    result = run_pipeline(p, RunOptions(workers=2, warn=warnings.append))
    assert result.frames == 3
    # the compute and io threads, and the scheduler thread for the length of the run
    assert sum("rt.sched: the OS refused SCHED_FIFO priority 3" in w for w in warnings) == 3
    assert sum("rt.cpu_affinity.compute: the OS refused CPUs [0]" in w for w in warnings) == 1
    assert len(warnings) == len(set(warnings))  # one line per distinct refusal


def _in_a_thread(fn):
    """``fn()``'s result, called on a fresh thread (pytest's own thread keeps its scheduler)."""
    import threading

    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def _policy():
    return os.sched_getscheduler(0), os.sched_getparam(0).sched_priority


def test_the_scheduler_thread_runs_fifo_for_the_run_then_gets_its_policy_back():
    def probe():
        warnings, before = [], _policy()
        with knobs_module.scheduler_thread_knobs(knobs_module.RtKnobs(fifo_priority=3),
                                                 warnings.append):
            inside = _policy()
        return warnings, before, inside, _policy()

    warnings, before, inside, after = _in_a_thread(probe)
    assert after == before == (os.SCHED_OTHER, 0)
    if warnings:  # no CAP_SYS_NICE here: refused, said once, nothing changed
        assert inside == before and warnings == [w for w in warnings if "scheduler threads" in w]
    else:
        assert inside == (os.SCHED_FIFO, 3)
    # without sched: fifo the thread is not touched at all
    assert _in_a_thread(lambda: _no_fifo()) == (os.SCHED_OTHER, 0)


def _no_fifo():
    with knobs_module.scheduler_thread_knobs(knobs_module.RtKnobs(), None):
        return _policy()


def test_run_rt_fifo_sets_the_pipelines_sched_knob(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cuvil_perception.cli.app import cli

    path = tmp_path / "p.yaml"
    path.write_text(f"pipeline: knobs\nrt:\n  sched: {{policy: fifo, priority: 2}}\n{STAGES}")
    applied = []

    def apply(knobs, group, warn):
        applied.append((group, knobs.fifo_priority))
        return {"cpus": None, "sched": f"SCHED_FIFO priority {knobs.fifo_priority}",
                "refused": []}

    monkeypatch.setattr(knobs_module, "apply_thread_knobs", apply)
    result = CliRunner().invoke(cli, ["run", str(path), "--rt-fifo", "7"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert ("scheduler", 7) in applied and {p for _, p in applied} == {7}
    assert "SCHED_FIFO priority 7" in result.output  # run's placement header says so


def test_mlockall_refusal_warns(tmp_path, monkeypatch):
    class NoLock:
        def mlockall(self, flags):
            return -1

    monkeypatch.setattr(knobs_module.ctypes, "CDLL", lambda *a, **k: NoLock())
    monkeypatch.setattr(knobs_module.ctypes, "get_errno", lambda: 12)
    warnings = []
    knobs_module.apply_process_knobs(knobs_module.RtKnobs(mlockall=True), warnings.append)
    assert len(warnings) == 1 and warnings[0].startswith("rt.mlockall: the OS refused")
