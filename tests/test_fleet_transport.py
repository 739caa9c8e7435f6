"""Drives that travel: a node that cannot read a drive, its bytes shipped instead, and drives
named by URL (``file://``, and ``s3://`` on a local S3-compatible server bound to 127.0.0.1)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from cuvil_perception.fleet import DriveTask, discover, execute, make_job
from cuvil_perception.fleet.runner import _retry
from cuvil_perception.fleet.transport import pack
from fleet_support import (FUSION, cli, drives, fleet_dir, union_drive,  # noqa: F401
                           union_scores)


@pytest.fixture(scope="module")
def eval_job(drives):
    job, _, _ = make_job("eval", str(FUSION), discover([str(drives[0])]), None, workers=1)
    return job


def test_a_drive_this_node_cannot_read_is_retryable_elsewhere_with_its_bytes(eval_job, drives,
                                                                             tmp_path):
    gone = tmp_path / "elsewhere" / drives[0].name  # what a node without the drive sees
    task = DriveTask(0, str(gone), drives[0].name)
    outcome = execute(eval_job, task)
    error = outcome["error"]
    assert outcome["status"] == "failed" and error["type"] == "DriveNotHere"
    assert error["retryable"] and error["elsewhere"]
    assert "this node cannot read the drive (no such file or folder here)" in error["message"]
    assert "labels" not in error["message"]  # not mistaken for a corrupt drive
    retry = _retry(task, dict(outcome, where={"host": "h", "pid": 1, "node": "n1"}))
    assert retry.attempt == 2 and retry.avoid == ("n1",) and retry.ship

    shipped = execute(eval_job, retry, pack(str(drives[0])))  # the bytes, not the path
    here = execute(eval_job, DriveTask(0, str(drives[0]), drives[0].name))
    assert shipped["status"] == "ok", shipped.get("error")
    assert shipped["scores"] == here["scores"] and shipped["frames"] == here["frames"]


def test_file_urls_read_through_fsspec(eval_job, drives):
    pytest.importorskip("fsspec")
    url = f"file://{drives[1]}"
    found = discover([f"file://{drives[0].parent}/drive_000[12]"])
    assert [d.location for d in found] == [url, f"file://{drives[2]}"]
    assert [d.name for d in found] == [drives[1].name, drives[2].name]
    fetched = execute(eval_job, DriveTask(0, url, drives[1].name))
    here = execute(eval_job, DriveTask(0, str(drives[1]), drives[1].name))
    assert fetched["status"] == "ok", fetched.get("error")
    assert fetched["scores"] == here["scores"]


@pytest.fixture(scope="module")
def s3(monkeypatch_module):
    """A moto S3 server on 127.0.0.1 (an ephemeral port); the AWS variables point at it."""
    server_module = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for name, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch_module.setenv(name, value)
    yield endpoint
    server.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_s3_urls_and_globs(s3, drives, union_scores, tmp_path):
    import fsspec

    fs = fsspec.filesystem("s3")
    fs.mkdir("fleet")
    for drive in drives:
        fs.put(str(drive), f"fleet/drives/{drive.name}", recursive=True)
    out = tmp_path / "out"
    code, _, stderr = cli("fleet", "eval", str(FUSION), "s3://fleet/drives/drive_*", "--out",
                          str(out), "--local", "2")
    assert code == 0, stderr
    report = json.loads((out / "report.json").read_text())
    assert report["pooled"]["scores"] == union_scores
    assert [d["name"] for d in report["per_drive"]] == [d.name for d in drives]
    code, _, stderr = cli("fleet", "eval", str(FUSION), "s3://fleet/drives/drive_*", "--out",
                          str(out), "--local", "2", "--resume")
    assert code == 0 and "3 already done" in stderr  # ETags fingerprint the remote drives
    code, _, stderr = cli("fleet", "eval", str(FUSION), "s3://fleet/nothing_*", "--out",
                          str(tmp_path / "none"))
    assert code == 2 and "matches no drive" in stderr


def test_a_missing_url_is_one_line(tmp_path):
    pytest.importorskip("fsspec")
    code, _, stderr = cli("fleet", "eval", str(FUSION), f"file://{tmp_path}/no_drive",
                          "--out", str(tmp_path / "out"))
    assert code == 2 and "no such drive" in stderr and len(stderr.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []
    assert not Path(tmp_path / "out").exists()
