"""Bad input rows for the ``rt:`` knobs with numbers: ``sched: deadline`` and ``cgroup``.

Each row is a YAML ``rt:`` block that must fail with a PipelineError naming the file:line of the
block, the field, and what is wrong (NaN, inf, negative, huge, empty, wrong type, violated
runtime <= deadline <= period)."""

from __future__ import annotations

import pytest

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception.errors import PipelineError
from cuvil_perception.graph import parse_pipeline
from cuvil_perception.rt import parse_knobs

STAGES = """\
stages:
  - {id: src, op: test.scripted, params: {frames: 2}}
  - {id: out, op: test.lines, inputs: {y: src/value}, params: {path: out.jsonl}}
"""
DL = "rt:\n  sched: {policy: deadline, "


def knobs(block: str, tmp_path):
    text = f"pipeline: sched\n{block}{STAGES}"
    return parse_knobs(parse_pipeline(text, "sched.yaml", base_dir=tmp_path).validate())


@pytest.mark.parametrize("block, field, needle", [
    (DL + "runtime_ms: .nan, deadline_ms: 10}\n", "rt.sched.runtime_ms", "finite number > 0"),
    (DL + "runtime_ms: 1, deadline_ms: .inf}\n", "rt.sched.deadline_ms", "finite number > 0"),
    (DL + "runtime_ms: -1, deadline_ms: 10}\n", "rt.sched.runtime_ms", "finite number > 0"),
    (DL + "runtime_ms: 0, deadline_ms: 10}\n", "rt.sched.runtime_ms", "finite number > 0"),
    (DL + "runtime_ms: '2', deadline_ms: 10}\n", "rt.sched.runtime_ms", "number of millis"),
    (DL + "runtime_ms: true, deadline_ms: 10}\n", "rt.sched.runtime_ms", "number of millis"),
    (DL + "runtime_ms: [], deadline_ms: 10}\n", "rt.sched.runtime_ms", "number of millis"),
    (DL + "runtime_ms: 1, deadline_ms: 10, period_ms: null}\n", "rt.sched.period_ms",
     "number of millis"),
    (DL + "deadline_ms: 10}\n", "rt.sched.runtime_ms", "is required"),
    (DL + "runtime_ms: 1}\n", "rt.sched.deadline_ms", "is required"),
    (DL + "runtime_ms: 20, deadline_ms: 10}\n", "rt.sched.runtime_ms", "exceeds deadline"),
    (DL + "runtime_ms: 1, deadline_ms: 10, period_ms: 5}\n", "rt.sched.deadline_ms",
     "exceeds period"),
    (DL + "runtime_ms: 1, deadline_ms: 1.0e+12, period_ms: 1.0e+12}\n", "rt.sched.period_ms",
     "kernel's limits"),
    (DL + "runtime_ms: 0.0000001, deadline_ms: 1}\n", "rt.sched.runtime_ms",
     "kernel's minimum"),
    (DL + "runtime_ms: 0.01, deadline_ms: 0.05}\n", "rt.sched.period_ms", "kernel's limits"),
    (DL + "runtime_ms: 1, deadline_ms: 10, priority: 3}\n", "rt.sched.priority",
     "unknown field 'priority' for policy deadline"),
    (DL + "runtime: 1, deadline_ms: 10}\n", "rt.sched.runtime", "did you mean 'runtime_ms'"),
    ("rt:\n  sched: {policy: DEADLINE}\n", "rt.sched.policy", "must be one of fifo, deadline"),
    ("rt:\n  sched: deadline\n", "rt.sched", "must be a mapping"),
    ("rt:\n  cgroup: {}\n", "rt.cgroup", "give cpu_max and/or cpuset"),
    ("rt:\n  cgroup: cuvil\n", "rt.cgroup", "must be a mapping"),
    ("rt:\n  cgroup: {name: ../escape, cpuset: [0]}\n", "rt.cgroup.name", "directory name"),
    ("rt:\n  cgroup: {name: '', cpuset: [0]}\n", "rt.cgroup.name", "directory name"),
    ("rt:\n  cgroup: {name: 7, cpuset: [0]}\n", "rt.cgroup.name", "directory name"),
    ("rt:\n  cgroup: {cpuset: []}\n", "rt.cgroup.cpuset", "non-empty list"),
    ("rt:\n  cgroup: {cpuset: [-1]}\n", "rt.cgroup.cpuset", "non-empty list"),
    ("rt:\n  cgroup: {cpuset: [1.5]}\n", "rt.cgroup.cpuset", "non-empty list"),
    ("rt:\n  cgroup: {cpuset: [99999999]}\n", "rt.cgroup.cpuset", "non-empty list"),
    ("rt:\n  cgroup: {cpuset: 0-3}\n", "rt.cgroup.cpuset", "non-empty list"),
    ("rt:\n  cgroup: {cpu_max: {quota_ms: .nan}}\n", "rt.cgroup.cpu_max.quota_ms",
     "finite number > 0"),
    ("rt:\n  cgroup: {cpu_max: {quota_ms: -5}}\n", "rt.cgroup.cpu_max.quota_ms",
     "finite number > 0"),
    ("rt:\n  cgroup: {cpu_max: {quota_ms: 1.0e+300}}\n", "rt.cgroup.cpu_max.quota_ms",
     "within 1 .. 1000000 ms"),
    ("rt:\n  cgroup: {cpu_max: {quota_ms: 50, period_ms: 5000}}\n",
     "rt.cgroup.cpu_max.period_ms", "within 1 .. 1000 ms"),
    ("rt:\n  cgroup: {cpu_max: {quota_ms: 50, period_ms: .inf}}\n",
     "rt.cgroup.cpu_max.period_ms", "finite number > 0"),
    ("rt:\n  cgroup: {cpu_max: {period_ms: 100}}\n", "rt.cgroup.cpu_max.quota_ms",
     "is required"),
    ("rt:\n  cgroup: {cpu_max: {quota: 50}}\n", "rt.cgroup.cpu_max.quota",
     "did you mean 'quota_ms'"),
    ("rt:\n  cgroup: {cpu_max: unlimited}\n", "rt.cgroup.cpu_max", "must be max or"),
    ("rt:\n  cgroup: {cpuset: [0], weight: 3}\n", "rt.cgroup.weight", "unknown field"),
])
def test_bad_sched_and_cgroup_knobs(tmp_path, block, field, needle):
    with pytest.raises(PipelineError) as caught:
        knobs(block, tmp_path)
    message = str(caught.value)
    assert message.startswith("sched.yaml:3:") and f"field '{field}'" in message, message
    assert needle in message, message
    assert "\n" not in message


def test_good_sched_and_cgroup_knobs(tmp_path):
    parsed = knobs(DL + "runtime_ms: 2, deadline_ms: 10}\n  cgroup: {cpu_max: {quota_ms: 50}, "
                        "cpuset: [0, 1]}\n", tmp_path)
    assert (parsed.deadline.runtime_ns, parsed.deadline.deadline_ns,
            parsed.deadline.period_ns) == (2_000_000, 10_000_000, 10_000_000)
    assert parsed.cgroup.files() == {"cpu.max": "50000 100000", "cpuset.cpus": "0,1"}
    assert knobs("rt:\n  cgroup: {cpu_max: max}\n", tmp_path).cgroup.files() == \
        {"cpu.max": "max"}
