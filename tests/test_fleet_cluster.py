"""Fleet replay on a real 2-node Ray cluster on this machine, on the loopback only.

Both nodes (and the driver) are on 127.0.0.2: Ray rewrites 127.0.0.1 into the machine's network
address, and leaves the other loopback addresses as they are (``fleet/ray_connect.py``).

The worker node runs in its own mount namespace (``unshare -m``, as root) with a tmpfs over the
folder of the cluster's drives: like a node of a real cluster without a shared file system, it
cannot read them. The fleet ships their bytes to it, and it still runs drives. Then its raylet
is killed while it prewarms: the fleet goes on with the head node alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cuvil_perception.fleet import read_results
from fleet_support import (FUSION, REPO, cli, drives, exit_pipeline, fleet_dir,  # noqa: F401
                           single_run_bytes)

ray = pytest.importorskip("ray", reason="Ray is in the dev extra; install it with make setup")
RAY = Path(sys.executable).with_name("ray")
LOOPBACK = "127.0.0.2"
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="the worker node's mount namespace needs root + unshare")
# a killed raylet is noticed in ~2 s instead of ~30 s
FAST_HEALTH = {"RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
               "RAY_health_check_failure_threshold": "3"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _start(argv: list[str], log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO), RAY_USAGE_STATS_ENABLED="0", **FAST_HEALTH)
    env["RAY_AUTH_MODE"] = "token"  # Ray's default for a new cluster; every node needs it
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # Ray's one-node mode refuses a second
    with open(log, "w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def _wait_for(log: Path, text: str, process: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        assert process.poll() is None, log.read_text(errors="replace")
        time.sleep(0.2)
    pytest.fail(f"{log}: no {text!r} within {timeout} s")


def _stop(process: subprocess.Popen) -> None:
    """``ray start --block`` stops the processes it started on SIGTERM; then its group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``(address, drives folder the worker cannot read, its 6 drives)``. Token auth on, as
    a new Ray cluster has it: the token is Ray's own file (``ray get-auth-token --generate``
    makes it, as a first ``ray.init`` would)."""
    root = tmp_path_factory.mktemp("cluster")
    subprocess.run([str(RAY), "get-auth-token", "--generate"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hidden = root / "hidden"
    code, _, stderr = cli("make-drive", str(hidden), "--count", "6", "--frames", "2", "--seed",
                          "40")
    assert code == 0, stderr
    port = _free_port()
    address = f"{LOOPBACK}:{port}"
    common = ["--block", "--node-ip-address", LOOPBACK, "--num-cpus", "1",
              "--disable-usage-stats"]
    dashboard = _free_port()  # its job server takes `ray job submit`
    head = _start([str(RAY), "start", "--head", "--port", str(port), "--dashboard-host",
                   LOOPBACK, "--dashboard-port", str(dashboard), *common], root / "head.log")
    processes = [head]
    try:
        _wait_for(root / "head.log", "Ray runtime started", head)
        worker = _start(["unshare", "-m", "sh", "-c", f"mount -t tmpfs tmpfs {hidden} && exec "
                         + " ".join([str(RAY), "start", "--address", address, *common])],
                        root / "worker.log")
        processes.append(worker)
        _wait_for(root / "worker.log", "Ray runtime started", worker)
        yield address, hidden, sorted(hidden.glob("drive_*")), f"http://{LOOPBACK}:{dashboard}"
    finally:
        for process in reversed(processes):
            _stop(process)
        current = Path("/tmp/ray/ray_current_cluster")  # `ray stop` would remove it
        if current.exists() and current.read_text().strip() == address:
            current.unlink()


def fleet(*args: str, auth: bool = True, **env_vars: str) -> tuple[int, str, str]:
    """``cuvil-perception ARGS`` in a new process (a driver of its own, as a user runs it;
    test ops registered), with Ray's token auth on (``auth``), which Ray turns on by itself
    only for a cluster it finds, never for an address given."""
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_AUTH_MODE", None)
    if auth:
        env["RAY_AUTH_MODE"] = "token"
    env.update(env_vars)
    main = ("import sys, cuvil_perception.testing.ops; from cuvil_perception.cli import main; "
            "main(sys.argv[1:])")
    done = subprocess.run([sys.executable, "-c", main, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


def test_a_node_that_cannot_read_the_drives_gets_their_bytes(cluster, tmp_path):
    address, hidden, drives, _ = cluster
    out = tmp_path / "ray"
    code, _, stderr = fleet("fleet", "eval", str(FUSION), str(hidden / "drive_*"), "--out",
                          str(out), "--ray", address)
    assert code == 0, stderr
    report = json.loads((out / "report.json").read_text())
    assert f"joined the Ray cluster at {address}: 2 node(s), 2 CPU(s)" in report["backend"]
    prewarm = {row["where"]["node"]: row for row in report["prewarm"]}
    assert len(prewarm) == 2
    blind = [node for node, row in prewarm.items() if row["unreadable"]]
    assert len(blind) == 1 and prewarm[blind[0]]["unreadable"] == list(range(6))
    nodes = {d["where"]["node"] for d in report["per_drive"]}
    assert nodes == set(prewarm)  # both nodes ran drives, the blind one from shipped bytes
    assert all(d["attempts"] == 1 for d in report["per_drive"])
    finished = re.findall(r"\] drive_\d+: ok, .* on \S+ node ([0-9a-f]{8})", stderr)
    assert len(finished) == 6 and {n for n in finished} == {n[:8] for n in prewarm}
    per_node = {n["node"]: n["drives"] for n in report["nodes"]}  # the nodes table
    assert set(per_node) == set(prewarm) and sum(per_node.values()) == 6
    assert min(per_node.values()) >= 1

    local = tmp_path / "local"
    code, _, stderr = cli("fleet", "eval", str(FUSION), str(hidden / "drive_*"), "--out",
                          str(local), "--local", "1")
    assert code == 0, stderr
    expected = json.loads((local / "report.json").read_text())["pooled"]["scores"]
    assert report["pooled"]["scores"] == expected
    assert (out / "ray.log").exists()


def test_a_refused_token_says_why_and_how_to_fix_it(cluster, drives, tmp_path):
    code, _, stderr = fleet("fleet", "eval", str(FUSION), str(drives[0]), "--out",
                            str(tmp_path / "out"), "--ray", cluster[0], auth=False,
                            RAY_NUM_REDIS_GET_RETRIES="2")  # Ray's ~20 s of retries: 2
    assert code == 2, stderr
    assert "Unauthenticated" in stderr and "InvalidAuthToken" in stderr  # Ray's reason
    assert "set RAY_AUTH_MODE=token" in stderr  # and the fix
    assert len(stderr.strip().splitlines()) == 1


def test_ray_job_submit_recipe(cluster, drives, tmp_path):
    """docs/fleet.md's recipe: the fleet as a Ray job (its entrypoint joins with --ray auto,
    which reads the RAY_ADDRESS the job sets)."""
    address, _, _, dashboard = cluster
    out = tmp_path / "out"
    env = dict(os.environ, RAY_ADDRESS=dashboard, RAY_AUTH_MODE="token", PYTHONPATH=str(REPO))
    entry = [sys.executable, "-m", "cuvil_perception", "fleet", "eval", str(FUSION),
             str(drives[0]), "--ray", "auto", "--out", str(out)]
    done = subprocess.run([str(RAY), "job", "submit", "--", *entry], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "succeeded" in done.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["drives"]["ok"] == 1
    assert report["backend"].startswith(f"joined the Ray cluster at {address} (RAY_ADDRESS=")


def _raylet_in_other_namespace() -> int | None:
    """The pid of the worker node's raylet: the raylet whose mount namespace is not ours."""
    mine = os.readlink("/proc/self/ns/mnt")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            if name == "raylet" and os.readlink(entry / "ns" / "mnt") != mine:
                return int(entry.name)
        except OSError:
            continue
    return None


def test_a_node_lost_during_the_prewarm_leaves_its_work_to_the_others(cluster, drives,
                                                                        tmp_path):
    """The worker node is lost while its prewarm task is held (its raylet and the task's
    worker process killed: a machine that went away); every drive still runs, on the head, and
    the prewarm row says the node was lost (this test ends the worker node)."""
    address = cluster[0]
    hold = tmp_path / "hold"
    hold.touch()
    pipeline = exit_pipeline(tmp_path, hold=hold)
    raylet = _raylet_in_other_namespace()
    assert raylet is not None

    def kill_when_held() -> None:
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                held = [int(p.suffix[1:]) for p in tmp_path.glob("hold.*")]
                theirs = [pid for pid in held if _in_other_namespace(pid)]
                if theirs:  # the node is lost: its raylet, and the worker it ran the task in
                    os.kill(raylet, signal.SIGKILL)
                    os.kill(theirs[0], signal.SIGKILL)
                    return
                time.sleep(0.05)
        finally:
            hold.unlink()

    killer = threading.Thread(target=kill_when_held)
    killer.start()
    out = tmp_path / "out"
    code, _, stderr = fleet("fleet", "run", str(pipeline), *map(str, drives), "--out",
                            str(out), "--no-deadlines", "--ray", address)
    killer.join()
    assert code == 0, stderr
    assert "Traceback" not in stderr
    noise = [line for line in stderr.splitlines() if line.startswith("[20") or "(raylet)" in line]
    assert not noise, noise  # Ray's own messages went to OUT/ray.log
    report = json.loads((out / "report.json").read_text())
    lost = [row for row in report["prewarm"] if row.get("lost")]
    assert len(lost) == 1 and "lost during the prewarm" in lost[0]["error"]["message"]
    assert report["drives"]["ok"] == 3
    for drive in drives:
        expected = single_run_bytes(pipeline, drive, tmp_path / f"{drive.name}.jsonl")
        assert (out / "drives" / drive.name / "points.jsonl").read_bytes() == expected
    rows = read_results(out / "results.jsonl")
    assert {r["where"]["node"] for r in rows} != {lost[0]["where"]["node"]}


def _in_other_namespace(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    except OSError:
        return False
