"""A real Prometheus server (Debian's ``prometheus`` package, bound to 127.0.0.1, a temporary
storage folder, stopped by its PID) scrapes ``run --metrics`` during a 60-frame paced replay
and sees every frame out: the final count is scraped during ``--metrics-linger``. Skipped where
the ``prometheus`` binary is not installed (the Makefile's APT_PACKAGES installs it)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

PROMETHEUS = shutil.which("prometheus")
FRAMES = 60
PIPELINE = ("pipeline: scraped\nstages:\n  - {id: drive, op: replay}\n"
            "  - {id: out, op: jsonl, inputs: {points: drive/points}, params: {path: out.jsonl}}\n")

pytestmark = pytest.mark.skipif(PROMETHEUS is None,
                                reason="prometheus not installed (Debian package prometheus)")


def long_drive(sample: Path, out: Path, frames: int) -> Path:
    """A KITTI-layout drive of ``frames`` frames at 10 Hz: the sample drive's scans and images
    repeated in order (copies, new timestamps)."""
    out.mkdir()
    for name in ("calib_cam_to_cam.txt", "calib_velo_to_cam.txt"):
        shutil.copy(sample / name, out / name)
    t0 = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    stamps = "".join(f"{(t0 + timedelta(milliseconds=100 * i)):%Y-%m-%d %H:%M:%S.%f}000\n"
                     for i in range(frames))
    for stream, ext in (("velodyne_points", "bin"), ("image_02", "png")):
        files = sorted((sample / stream / "data").glob(f"*.{ext}"))
        (out / stream / "data").mkdir(parents=True)
        for i in range(frames):
            shutil.copy(files[i % len(files)], out / stream / "data" / f"{i:010d}.{ext}")
        (out / stream / "timestamps.txt").write_text(stamps)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, server: subprocess.Popen, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, "prometheus exited"
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"prometheus not ready at {url}")


def query(base: str, promql: str) -> float:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    answer = json.loads(urllib.request.urlopen(url, timeout=5).read())
    (result,) = answer["data"]["result"]
    return float(result["value"][1])


def test_prometheus_sees_every_frame_of_a_paced_replay(repo_root, tmp_path):
    drive = long_drive(repo_root / "datasets" / "sample_drive", tmp_path / "drive", FRAMES)
    (tmp_path / "p.yaml").write_text(PIPELINE)
    metrics_port, web_port = free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        f"scrape_configs:\n  - job_name: cuvil\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_port}']\n")
    base = f"http://127.0.0.1:{web_port}"
    with open(tmp_path / "prometheus.log", "w") as log:
        server = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                   f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                   f"--web.listen-address=127.0.0.1:{web_port}"],
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(f"{base}/-/ready", server)
        run = subprocess.run([sys.executable, "-m", "cuvil_perception", "run", "p.yaml",
                              "--replay", str(drive), "--rate", "1", "--metrics",
                              f"127.0.0.1:{metrics_port}", "--metrics-linger", "3"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        assert len((tmp_path / "out.jsonl").read_text().splitlines()) == FRAMES
        assert query(base, "max_over_time(cuvil_frames_out_total[10m])") == FRAMES
        assert query(base, "max_over_time(cuvil_frames_in_total[10m])") == FRAMES
        assert query(base, 'max_over_time(cuvil_run_state{state="running"}[10m])') == 1
        assert query(base, 'max_over_time(cuvil_run_state{state="finished"}[10m])') == 1
        assert query(base, "max_over_time(cuvil_e2e_latency_seconds_count[10m])") == FRAMES
        assert query(base, 'max_over_time(cuvil_build_info{pipeline="scraped"}[10m])') == 1
    finally:
        server.terminate()
        server.wait(timeout=30)
