"""Fleet replay on a real local Ray (2 CPUs): the same results as one run over every frame,
outputs byte-identical to single runs, a worker that dies retried once, prewarm once per node."""

from __future__ import annotations

import json

import pytest

from cuvil_perception.fleet import read_results
from cuvil_perception.fleet.report import LOST
from fleet_support import (FUSION, cli, corrupt_drive, drives, exit_pipeline,  # noqa: F401
                           fleet_dir, single_run_bytes, union_drive, union_scores)

ray = pytest.importorskip("ray", reason="Ray is in the dev extra; install it with make setup")


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module, started as ``--ray local`` starts one (on 127.0.0.1);
    ``--ray local`` then uses it, and leaves it running."""
    from cuvil_perception.fleet.ray_connect import join

    assert join(ray, "local", ship_package=False) == "started a local Ray on 127.0.0.1"
    assert {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]} == {"127.0.0.1"}
    yield ray
    ray.shutdown()


def test_ray_eval_pools_like_one_run_and_prewarms_once_per_node(local_ray, drives,
                                                                  union_scores, tmp_path):
    out = tmp_path / "out"
    code, _, stderr = cli("fleet", "eval", str(FUSION), *map(str, drives), "--out", str(out),
                          "--ray", "local")
    assert code == 0, stderr
    report = json.loads((out / "report.json").read_text())
    assert report["pooled"]["scores"] == union_scores
    node = ray.get_runtime_context().get_node_id()
    assert [row["where"]["node"] for row in report["prewarm"]] == [node]  # one node, once
    assert {d["where"]["node"] for d in report["per_drive"]} == {node}
    assert "Ray at local: 1 node(s), 2 CPU(s)" in report["backend"]


def test_ray_worker_death_is_retried_and_a_corrupt_drive_reported(local_ray, drives,
                                                                   corrupt_drive, tmp_path):
    pipeline = exit_pipeline(tmp_path, how="exit", marker=tmp_path / "died-once")
    out = tmp_path / "out"
    code, _, stderr = cli("fleet", "run", str(pipeline), *map(str, drives), str(corrupt_drive),
                          "--out", str(out), "--no-deadlines", "--ray", "local")
    assert code == 3, stderr
    rows = {r["name"]: r for r in read_results(out / "results.jsonl")}
    bad = rows.pop("drive_corrupt")
    assert bad["error"]["type"] == "DriveError" and len(bad["attempts"]) == 1
    retried = [r for r in rows.values() if len(r["attempts"]) == 2]
    assert len(retried) == 1 and retried[0]["status"] == "ok"
    assert retried[0]["attempts"][0]["error"]["type"] == "WorkerCrashedError"
    for drive in drives:
        expected = single_run_bytes(pipeline, drive, tmp_path / f"{drive.name}.jsonl")
        assert (out / "drives" / drive.name / "points.jsonl").read_bytes() == expected
    record = json.loads((out / "drives" / drives[0].name / "points.jsonl.record.json")
                        .read_text())
    assert record["fleet"]["where"]["node"] == ray.get_runtime_context().get_node_id()
    assert record["outputs"][0]["path"] == "points.jsonl"
    assert ray.is_initialized()  # a Ray the fleet did not start is left running
    report = json.loads((out / "report.json").read_text())
    assert report["per_drive"][0]["name"] == "drive_corrupt"  # failed drives first
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes[LOST]["retried_elsewhere"] == 1 and nodes[LOST]["drives"] == 0
    node = ray.get_runtime_context().get_node_id()
    assert (nodes[node]["drives"], nodes[node]["ok"], nodes[node]["failed"]) == (4, 3, 1)
    retry = next(d for d in report["per_drive"] if d["retries"])["retries"]
    assert retry == [{"attempt": 1, "node": None, "host": None, "error": "WorkerCrashedError",
                      "message": retry[0]["message"]}]
    assert "retry drive_" in stderr and "attempt 2 runs" in stderr


def test_a_node_with_another_package_stops_the_fleet(local_ray, drives, monkeypatch, tmp_path):
    from cuvil_perception.fleet import ray_backend

    monkeypatch.setattr(ray_backend, "package_identity",  # the driver's, edited
                        lambda: {"version": "0.1.0", "source": "0123456789ab"})
    out = tmp_path / "out"
    code, _, stderr = cli("fleet", "eval", str(FUSION), str(drives[0]), "--out", str(out),
                          "--ray", "local")
    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert "runs cuvil-perception 0.1.0 (source" in stderr and "0123456789ab" in stderr
    assert "--ship-package" in stderr
    assert not (out / "results.jsonl").exists()


def test_ray_local_is_private_and_ships_the_package(drives, tmp_path):
    """``--ray local`` starts its own Ray (on 127.0.0.1) whatever RAY_ADDRESS names, and
    ``--ship-package`` makes its workers import the driver's package from Ray's runtime_env;
    the driver is a new process, as a user runs it."""
    import os
    import subprocess
    import sys

    from fleet_support import REPO

    env = dict(os.environ, RAY_ADDRESS="127.0.0.9:1", PYTHONPATH=str(REPO))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "cuvil_perception", "fleet", "eval",
                           str(FUSION), str(drives[0]), "--out", str(out), "--ray", "local",
                           "--ship-package"],  # cwd: not the source tree (Ray puts the
                          # driver's cwd first on its workers' sys.path)
                          env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "started a local Ray on 127.0.0.1" in done.stderr
    assert "Traceback" not in done.stderr
    assert (out / "ray.log").exists()
    prewarm = json.loads((out / "report.json").read_text())["prewarm"]
    assert len(prewarm) == 1 and "runtime_resources" in prewarm[0]["package"]
