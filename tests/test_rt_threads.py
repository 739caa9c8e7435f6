"""Every thread a run starts has an OS name (os_threads, rt.thread_ledger), read back from
/proc/self/task/*/comm while the run goes, and the run says which knobs took effect on which
thread (the placement's ``threads:`` line, the record's ``threads``)."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception.graph import Pipeline
from cuvil_perception.os_threads import MAX_BYTES, name_this_thread, os_thread_name
from cuvil_perception.rt import RunOptions, run_pipeline

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _comms() -> dict[int, str]:
    names = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            names[int(task.name)] = (task / "comm").read_text().strip()
        except OSError:  # the thread ended while we looked
            pass
    return names


def test_long_names_keep_head_and_tail_within_the_kernels_15_bytes():
    assert os_thread_name("cuvil-compute_0") == "cuvil-compute_0"
    assert os_thread_name("cuvil-io-foxglove_live") == "cuvil-i~ve_live"
    assert os_thread_name("cuvil-io-camara_é") == "cuvil-i~amara_?"
    assert all(len(os_thread_name("x" * n)) <= MAX_BYTES for n in range(40))


@linux_only
def test_a_thread_names_itself_and_the_main_thread_is_left_alone():
    seen = {}

    def body():
        seen["applied"] = name_this_thread("cuvil-io-a_very_long_stage")
        seen["comm"] = Path("/proc/thread-self/comm").read_text().strip()

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen == {"applied": "cuvil-i~g_stage", "comm": "cuvil-i~g_stage"}
    main_comm = Path("/proc/thread-self/comm").read_text().strip()
    assert name_this_thread("cuvil-main") is None
    assert Path("/proc/thread-self/comm").read_text().strip() == main_comm


@linux_only
def test_every_run_thread_has_an_os_name_seen_in_proc_during_the_run(tmp_path):
    p = Pipeline("names")
    p.rt = {"cpu_affinity": {"compute": sorted(__import__("os").sched_getaffinity(0))[:1]}}
    p.add("src", "test.scripted", frames=6, dt_ms=40.0)  # paced: every thread lives ~0.2 s
    p.add("work", "test.cost", inputs={"x": "src/value"}, cost_ms=[10.0])
    p.add("log", "test.lines", inputs={"y": "work/y"}, path=str(tmp_path / "o.jsonl"))
    before = set(_comms())
    box = {}
    run = threading.Thread(target=lambda: box.update(result=run_pipeline(
        p.validate(), RunOptions(workers=2, rate=1.0, record=tmp_path / "run.json"))))
    seen: dict[int, str] = {}
    run.start()
    while run.is_alive():  # sample the kernel's names while the run's threads exist (a new
        # thread shows its creator's name until it names itself: the last name seen counts)
        seen.update({tid: name for tid, name in _comms().items() if tid not in before})
        time.sleep(0.002)
    run.join()
    names = set(seen.values())
    assert {"cuvil-io-src", "cuvil-io-log", "cuvil-compute_0"} <= names, names
    assert all(len(n.encode()) <= MAX_BYTES for n in names)
    record = json.loads((tmp_path / "run.json").read_text())
    rows = {r["thread"]: r for r in record["threads"]}
    assert rows["cuvil-io-src"]["os_name"] == "cuvil-io-src"
    assert rows["cuvil-io-log"]["group"] == "io" and rows["cuvil-io-log"]["cpus"] is None
    compute = [r for r in record["threads"] if r["group"] == "compute"]
    cpus = p.rt["cpu_affinity"]["compute"]
    assert compute and all(r["cpus"] == cpus and r["sched"] is None for r in compute)
    assert all(seen.get(r["tid"]) == r["os_name"] for r in record["threads"]
               if r["group"] != "scheduler")  # what /proc showed is what the record says
    outcomes = _outcomes(box["result"].placement[-1])
    assert outcomes[f"default scheduler; CPUs {cpus[0]}"] == ["cuvil-compute_0"]
    assert sorted(outcomes["default scheduler"])[:2] == ["cuvil-io-log", "cuvil-io-src"]


def _outcomes(line: str) -> dict[str, list[str]]:
    """The placement's ``threads:`` line as {outcome: [thread names]}."""
    assert line.startswith("threads: ")
    pairs = (group.split(" -> ") for group in line.removeprefix("threads: ").split(" | "))
    return {outcome: names.split(", ") for outcome, names in pairs}


def test_sched_deadline_is_named_in_the_placement_and_its_outcome_per_thread(tmp_path):
    """Asked for in the header; the ``threads:`` line and the record say where it took effect
    or that the OS refused it (as the warning does), whichever this machine does."""
    p = Pipeline("deadline")
    p.rt = {"sched": {"policy": "deadline", "runtime_ms": 2, "deadline_ms": 10}}
    p.add("src", "test.scripted", frames=2)
    p.add("work", "test.pass", inputs={"x": "src/value"})
    p.add("log", "test.lines", inputs={"y": "work/y"}, path=str(tmp_path / "o.jsonl"))
    result = run_pipeline(p.validate(), RunOptions(workers=1, record=tmp_path / "run.json"))
    asked = "SCHED_DEADLINE runtime 2 ms, deadline 10 ms, period 10 ms"
    assert f"; {asked} (executor threads)" in result.placement[0]
    rows = json.loads((tmp_path / "run.json").read_text())["threads"]
    workers = [r for r in rows if r["group"] != "scheduler"]
    assert {r["thread"] for r in workers} >= {"cuvil-io-src", "cuvil-io-log", "cuvil-compute_0"}
    refused = any("refused SCHED_DEADLINE" in w for w in result.warnings)
    for row in workers:
        assert (row["sched"], row["refused"]) == ((None, ["sched"]) if refused else (asked, []))
    outcome = "default scheduler; refused sched" if refused else asked
    assert _outcomes(result.placement[-1])[outcome]


@linux_only
def test_onnx_runtimes_own_threads_are_named_after_the_network():
    """ONNX Runtime's intra-op threads inherit the name of the thread that made the session
    (ops.onnx_runner makes it on a thread named cuvil-ort-<model>); a bad model still raises."""
    pytest.importorskip("onnxruntime")
    import onnx

    from cuvil_perception.errors import ModelError
    from cuvil_perception.ops.onnx_runner import OnnxRunner

    path = Path(__file__).resolve().parents[1] / "cuvil_perception" / "models" / \
        "yolov8_cuvil_demo.onnx"
    model = onnx.load(str(path))
    before = set(_comms())
    runner = OnnxRunner(model, [model.graph.output[0].name], "onnxruntime", str(path), threads=3)
    # intra-op 3: the caller + 2 pool threads; the session's short-lived creator thread may
    # stay listed in /proc a moment after join() returned, so wait for it to go
    for _ in range(100):
        new = [name for tid, name in _comms().items() if tid not in before]
        if new.count("cuvil-ort-yolov") == 2:
            break
        time.sleep(0.02)
    assert new.count("cuvil-ort-yolov") == 2, new
    assert runner.describe().startswith("onnxruntime CPU, intra-op threads 3")
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    broken.graph.node[0].op_type = "NoSuchOp"
    with pytest.raises(ModelError, match="cannot load the model"):
        OnnxRunner(broken, [model.graph.output[0].name], "onnxruntime", str(path), threads=1)
