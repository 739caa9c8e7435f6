"""SCHED_DEADLINE and cgroup v2 placement: applied where the OS lets us, one warning each where
it refuses, and the run goes on."""

from __future__ import annotations

import os
import threading

import pytest
from test_rt_knobs import pipeline

from cuvil_perception.rt import RunOptions, run_pipeline
from cuvil_perception.rt import cgroup as cgroup_module
from cuvil_perception.rt import sched_deadline
from cuvil_perception.rt.cgroup import CgroupPlan, place
from cuvil_perception.rt.sched_deadline import DeadlineParams, set_deadline

DEADLINE = "rt:\n  sched: {policy: deadline, runtime_ms: 5, deadline_ms: 20, period_ms: 20}\n"
PARAMS = DeadlineParams(5_000_000, 20_000_000, 20_000_000)


def in_thread(fn):
    """Run ``fn`` on a fresh thread (a scheduling class set there dies with it)."""
    box = {}
    worker = threading.Thread(target=lambda: box.update(result=fn()))
    worker.start()
    worker.join()
    return box["result"]


def test_deadline_refused_by_the_kernel_warns_per_group_and_the_run_continues(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr(sched_deadline, "_syscall", lambda number, attr: 1)  # EPERM
    warnings = []
    result = run_pipeline(pipeline(DEADLINE, tmp_path), RunOptions(workers=2,
                                                                    warn=warnings.append))
    assert result.frames == 3
    refused = [w for w in warnings if w.startswith("rt.sched: the OS refused SCHED_DEADLINE")]
    assert len(refused) == 2  # compute and io threads, one line each
    assert "runtime 5 ms, deadline 20 ms, period 20 ms" in refused[0]
    assert "CAP_SYS_NICE" in refused[0]


def test_deadline_applies_or_gives_the_real_reason(tmp_path):
    """On a machine that allows it the thread becomes SCHED_DEADLINE (policy 6); else the
    reason is the kernel's."""
    def attempt():
        refused = set_deadline(PARAMS)
        policy = os.sched_getscheduler(0) & ~sched_deadline.SCHED_RESET_ON_FORK
        child = {}  # a deadline thread can still start threads; they get the default policy
        spawned = threading.Thread(target=lambda: child.update(policy=os.sched_getscheduler(0)))
        spawned.start()
        spawned.join()
        return refused, policy, child["policy"]

    refused, policy, child_policy = in_thread(attempt)
    assert child_policy == os.SCHED_OTHER
    if refused is None:
        assert policy == sched_deadline.SCHED_DEADLINE
    else:
        assert policy != sched_deadline.SCHED_DEADLINE and ";" in refused


def test_deadline_with_narrow_affinity_is_refused_by_the_kernel():
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs to narrow the affinity below the root domain")

    def attempt():
        os.sched_setaffinity(0, allowed[:1])
        return set_deadline(PARAMS)

    refused = in_thread(attempt)
    assert refused is not None and "affinity" in refused


def fake_hierarchy(tmp_path, controllers: str):
    root = tmp_path / "cgroup"
    (root / "app").mkdir(parents=True)
    (root / "app" / "cgroup.controllers").write_text(controllers + "\n")
    return root


def test_cgroup_placement_writes_quota_cpuset_and_pid(tmp_path):
    root = fake_hierarchy(tmp_path, "cpuset cpu io memory")
    plan = CgroupPlan("cuvil", (50_000, 100_000), False, (0, 1))
    warnings = []
    assert place(plan, warnings.append, root=root, current="/app") and not warnings
    child = root / "app" / "cuvil"
    assert (root / "app" / "cgroup.subtree_control").read_text() == "+cpu +cpuset\n"
    assert (child / "cpu.max").read_text() == "50000 100000\n"
    assert (child / "cpuset.cpus").read_text() == "0,1\n"
    assert (child / "cgroup.procs").read_text() == f"{os.getpid()}\n"


def test_placement_status_says_why(tmp_path):
    assert cgroup_module.placement_status(fake_hierarchy(tmp_path, "cpu cpuset"),
                                          "/app").startswith("possible under")
    assert "no cpuset controller" in cgroup_module.placement_status(
        fake_hierarchy(tmp_path / "b", "cpu"), "/app")


def test_cgroup_without_controller_warns(tmp_path):
    root = fake_hierarchy(tmp_path, "memory io")
    warnings = []
    assert not place(CgroupPlan("cuvil", cpuset=(0,)), warnings.append, root=root,
                     current="/app")
    assert len(warnings) == 1 and "has no cpuset controller" in warnings[0]
    assert not (root / "app" / "cuvil").exists()


def test_cgroup_write_refused_warns_naming_the_file(tmp_path, monkeypatch):
    root = fake_hierarchy(tmp_path, "cpu")
    (root / "app" / "cuvil").mkdir()
    (root / "app" / "cuvil" / "cpu.max").mkdir()  # writing it fails like an EACCES would
    warnings = []
    assert not place(CgroupPlan("cuvil", (10_000, 100_000)), warnings.append, root=root,
                     current="/app")
    assert len(warnings) == 1 and "rt.cgroup: the OS refused writing" in warnings[0]
    assert "cpu.max" in warnings[0]


def test_cgroup_in_a_run_on_this_machine_is_placed_or_warned(tmp_path, monkeypatch):
    """The run goes on either way; the real hierarchy is never touched by the test (a fake
    mount point stands in when this machine has none)."""
    root = fake_hierarchy(tmp_path, "cpu")
    monkeypatch.setattr(cgroup_module, "cgroup2_root", lambda: root)
    monkeypatch.setattr(cgroup_module, "own_cgroup", lambda: "/app")
    warnings = []
    block = "rt:\n  cgroup: {name: run, cpu_max: max, cpuset: [0]}\n"
    result = run_pipeline(pipeline(block, tmp_path), RunOptions(workers=1,
                                                                 warn=warnings.append))
    assert result.frames == 3
    assert warnings == ["rt.cgroup: the cgroup v2 hierarchy at "
                        f"{root / 'app'} has no cpuset controller (on a hybrid machine it stays "
                        "on cgroup v1); the process stays where it is"]


def test_no_cgroup2_mount_warns(tmp_path, monkeypatch):
    monkeypatch.setattr(cgroup_module, "cgroup2_root", lambda: None)
    warnings = []
    assert not place(CgroupPlan("cuvil", cpuset=(0,)), warnings.append)
    assert warnings == ["rt.cgroup: no cgroup v2 hierarchy is mounted; the process stays where "
                        "it is"]


def test_cgroup2_mount_point_is_read_from_mountinfo(tmp_path):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n")
    assert cgroup_module.cgroup2_root(str(mountinfo)) is None
    mountinfo.write_text("41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")
    assert str(cgroup_module.cgroup2_root(str(mountinfo))) == "/sys/fs/cgroup/unified"
