"""Fleet replay on the local process pool: pooled results, exact per-drive outputs, faults,
resume, Ctrl-C, and the report files."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.errors import UsageError
from cuvil_perception.fleet import ResultsFile, discover, read_results
from cuvil_perception.rt.stats import percentiles
from cuvil_perception.testing.interrupt import python_argv

from fleet_support import (FUSION, REPO, cli, corrupt_drive, drives, exit_pipeline,  # noqa: F401
                           fleet_dir, read_jsonl, rewrite_drive, single_run_bytes, union_drive,
                           union_scores)


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def test_eval_pools_like_one_run_over_every_frame(drives, union_scores, tmp_path):
    out = tmp_path / "fleet"
    code, stdout, stderr = cli("fleet", "eval", str(FUSION), *map(str, drives), "--out",
                               str(out), "--local", "2")
    assert code == 0, stderr
    report = _report(out)
    # pooled AP = AP of one run over the frames of every drive (not a mean of drive APs)
    assert report["pooled"]["scores"] == union_scores
    assert report["drives"] == {"total": 3, "ok": 3, "failed": 0, "unfinished": 0,
                                "resumed": 0}
    rows = read_jsonl(out / "results.jsonl")
    assert rows[0]["format"] == "cuvil-fleet-results/1" and len(rows) == 4
    for row in rows[1:]:
        assert row["where"]["pid"] != os.getpid() and row["where"]["host"]
    # pooled latency = percentiles of every drive's raw samples together
    pooled = {r["stage"]: r for r in report["pooled"]["latency"]}
    walls = np.concatenate([r["latency"]["wall_ns"]["yolo"] for r in rows[1:]]) / 1e6
    assert pooled["yolo"]["frames"] == 6
    assert pooled["yolo"]["p99"] == pytest.approx(percentiles(walls)[2], abs=1e-6)
    _check_html(out / "report.html", drives=3)
    assert "AP pooled over 3 drive(s)" in stdout


def _check_html(path: Path, drives: int) -> None:
    """The page parses, has a plot per AP table and the latency histogram, no network asset."""

    class Collect(HTMLParser):
        tags: list = []
        links: list = []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            self.links += [v for k, v in attrs if k in ("src", "href") and v]

    page = Collect()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    assert page.tags.count("svg") >= 2 and page.tags.count("rect") >= drives
    assert any(link.startswith("data:image/png;base64,") for link in page.links)
    assert not [link for link in page.links if not link.startswith("data:")]


def test_run_outputs_faults_and_resume(drives, corrupt_drive, tmp_path):
    fleet = tmp_path / "drives"
    copies = [shutil.copytree(d, fleet / d.name) for d in drives]  # one is changed below
    pipeline = exit_pipeline(tmp_path, how="kill", marker=tmp_path / "died-once")
    out = tmp_path / "out"
    args = ("fleet", "run", str(pipeline), str(fleet / "drive_*"), str(corrupt_drive),
            "--out", str(out), "--no-deadlines", "--local", "2")
    code, _, stderr = cli(*args)
    assert code == 3, stderr  # a drive failed
    rows = {r["name"]: r for r in read_results(out / "results.jsonl")}
    bad = rows.pop("drive_corrupt")
    assert bad["status"] == "failed" and bad["error"]["type"] == "DriveError"
    assert len(bad["attempts"]) == 1  # a corrupt drive is not retried
    assert "0000000001.bin" in bad["error"]["message"]
    retried = [r for r in rows.values() if len(r["attempts"]) == 2]
    assert len(retried) == 1 and retried[0]["status"] == "ok"  # the worker died once
    assert retried[0]["attempts"][0]["error"]["type"] == "WorkerDied"
    assert "SIGKILL" in retried[0]["attempts"][0]["error"]["message"]
    for drive in copies:  # each drive's output = a single run of that drive, byte for byte
        expected = single_run_bytes(pipeline, drive, tmp_path / f"{drive.name}.jsonl")
        assert (out / "drives" / drive.name / "points.jsonl").read_bytes() == expected
    assert "FAILED" in stderr and "drive_corrupt" in stderr

    code, _, stderr = cli(*args, "--resume")
    assert code == 3 and "3 already done" in stderr
    rewrite_drive(copies[2], seed=99)  # a changed drive is run again
    code, _, stderr = cli(*args, "--resume")
    assert code == 3 and "2 already done" in stderr
    names = [r["name"] for r in read_results(out / "results.jsonl")]
    assert sorted(names[4:]) == ["drive_0002", "drive_corrupt", "drive_corrupt"]
    assert _report(out)["drives"]["resumed"] == 2


def test_ctrl_c_leaves_a_valid_results_file_and_resume_finishes(drives, tmp_path):
    out = tmp_path / "out"
    slow = exit_pipeline(tmp_path, sleep_ms=300)  # >= 0.6 s a drive: time to interrupt
    main = ("import sys, cuvil_perception.testing.ops; from cuvil_perception.cli import main; "
            "main(sys.argv[1:])")  # the CLI with the test ops registered (test.exit)
    # SIGINT armed in the child: a suite run in the background inherits it ignored
    args = [*python_argv(main), "fleet", "run", str(slow),
            *map(str, drives), "--out", str(out), "--local", "1"]
    process = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if results.exists() and results.read_text().count("\n") >= 2:  # header + 1 drive
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "--resume" in stderr, stderr
    done = read_jsonl(results)[1:]
    assert 1 <= len(done) < 3 and all(r["status"] == "ok" for r in done)

    code, _, stderr = cli("fleet", "run", str(slow), *map(str, drives), "--out", str(out),
                          "--local", "1", "--resume")
    assert code == 0, stderr
    assert f"{len(done)} already done" in stderr
    assert len(read_results(results)) == 3


def test_discover_globs_lists_and_duplicates(drives, tmp_path):
    listing = tmp_path / "fleet.txt"
    listing.write_text(f"# my fleet\n{drives[1]}\n\n{drives[0].parent}/drive_000[02]\n")
    found = discover([f"@{listing}", str(drives[1])])
    assert [d.path for d in found] == [drives[1], drives[0], drives[2]]
    assert [d.name for d in found] == ["drive_0001", "drive_0000", "drive_0002"]
    twins = discover([str(drives[0]), str(shutil.copytree(drives[0], tmp_path / "drive_0000"))])
    assert len({d.name for d in twins}) == 2  # same folder name: told apart by a path hash


def test_results_file_drops_a_torn_line_and_refuses_a_foreign_file(tmp_path):
    path = tmp_path / "results.jsonl"
    results = ResultsFile(path, {"mode": "eval"}, resume=False)
    row = {"drive": "/d", "name": "d", "fingerprint": "f", "pipeline_hash": "h", "status": "ok"}
    results.append(row)
    results.close()
    with open(path, "a") as handle:
        handle.write('{"drive": "/e", "fingerp')  # the driver was killed mid-line
    resumed = ResultsFile(path, {"mode": "eval"}, resume=True)
    assert list(resumed.finished().values()) == [row]
    resumed.append(dict(row, drive="/e"))
    resumed.close()
    assert [r["drive"] for r in read_results(path)] == ["/d", "/e"]
    with pytest.raises(UsageError, match="--resume"):
        ResultsFile(path, {}, resume=False)
    foreign = tmp_path / "other.jsonl"
    foreign.write_text('{"frame": 0}\n')
    with pytest.raises(UsageError, match="not a fleet results file"):
        ResultsFile(foreign, {}, resume=True)
    assert foreign.read_text() == '{"frame": 0}\n'


def test_bench_budgets_pooled_and_worst_drives_exit_1(drives, tmp_path):
    pipeline = exit_pipeline(tmp_path)  # never dies
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text("budgets:\n  - {stage: die, p99_ms: 0.000001}\n"
                       "  - {stage: e2e, p99_ms: 1000000}\n")
    out = tmp_path / "out"
    code, stdout, stderr = cli("fleet", "bench", str(pipeline), *map(str, drives), "--budgets",
                               str(budgets), "--out", str(out), "--local", "2")
    assert code == 1, stderr  # a budget is breached, no drive failed
    report = _report(out)
    assert [v["passed"] for v in report["pooled"]["budgets"]] == [False, True]
    die, e2e = report["worst"]
    assert die["budget"] == "die: p99 <= 1e-06 ms" and die["breaches"] == 3
    values = [d["value"] for d in die["drives"]]
    assert values == sorted(values, reverse=True) and len(values) == 3
    assert e2e["breaches"] == 0
    for drive in report["per_drive"]:
        assert [v["passed"] for v in drive["budgets"]] == [False, True]
    assert "worst drives per budget" in stdout and "BREACH" in stdout
