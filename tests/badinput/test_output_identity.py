"""Bad-input catalogue, outputs are files, not names: hard links, symlinked parents, two names of
one file, and two runs on one output.

The output-path rules compare files (device + inode, links resolved), so every row here names a
path that *looks* new but is an input or another output; each is refused with exit 2, one line
naming the path and the rule, and nothing changed. A run holds an exclusive lock on each of its
outputs: a second run on the same ``--out`` stops with exit 2 naming the first one's pid, and
the first run's file is whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuvil_perception.drives.synth import make_drive
from cuvil_perception.rt.output_lock import hold, lock_path
from cuvil_perception.rt.output_policy import Claim

from ._runner import REPO, assert_one_line_error, assert_unchanged, cli, snapshot

PIPELINE = ("pipeline: outputs\nstages:\n  - {id: drive, op: replay}\n"
            "  - {id: out, op: jsonl, inputs: {points: drive/points}, params: {path: out.jsonl}}\n")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("identity-drive") / "drive"
    make_drive(out, 4, seed=12)
    return out


@pytest.fixture
def work(source, tmp_path) -> Path:
    (tmp_path / "p.yaml").write_text(PIPELINE)
    os.link(next((source / "velodyne_points" / "data").glob("*.bin")), tmp_path / "scan.bin")
    (tmp_path / "other").mkdir()
    os.link(tmp_path / "p.yaml", tmp_path / "other" / "pipeline-copy.yaml")
    (tmp_path / "scans").symlink_to(source / "velodyne_points" / "data")
    (tmp_path / "prev.jsonl").write_text("")
    os.link(tmp_path / "prev.jsonl", tmp_path / "prev-link.json")
    return tmp_path


def _run(work: Path, *args: str):
    return cli("run", str(work / "p.yaml"), "--replay", _drive(work), *args, cwd=work)


def _drive(work: Path) -> str:
    return str(Path(os.path.realpath(work / "scans")).parents[1])


REFUSED = [
    ("out-is-a-hard-link-to-a-drive-scan", ["--out", "scan.bin"], "input", "scan.bin"),
    ("out-is-a-hard-link-of-the-pipeline-in-another-folder",
     ["--out", "other/pipeline-copy.yaml"], "input", "pipeline-copy.yaml"),
    ("out-under-a-symlinked-parent-inside-the-drive", ["--out", "scans/new.jsonl"], "input",
     "new.jsonl"),
    ("record-is-another-name-of-out", ["--out", "prev.jsonl", "--record", "prev-link.json"],
     "same-output", "prev-link.json"),
]


@pytest.mark.parametrize("args, rule, named", [row[1:] for row in REFUSED],
                         ids=[row[0] for row in REFUSED])
def test_run_refuses_a_file_behind_another_name(work, source, args, rule, named):
    before = snapshot(work / "scan.bin", work / "p.yaml", source)
    result = _run(work, *args)
    assert_one_line_error(result, f"output-path rule '{rule}'", named)
    assert_unchanged(before)


def test_a_held_output_is_refused_naming_the_holder(work):
    out = work / "out.jsonl"
    with hold([Claim("--out", out)]):
        result = _run(work, "--out", "out.jsonl")
        assert_one_line_error(result, "output-path rule 'busy'", "out.jsonl",
                              f"pid {os.getpid()}")
    assert not out.exists()  # refused before any sink opened
    assert not lock_path(out.resolve()).exists()  # released and removed
    assert _run(work, "--out", "out.jsonl", "--frames", "1").code == 0  # free again


def test_a_lock_left_by_a_killed_run_is_taken_over(work):
    stale = lock_path((work / "out.jsonl").resolve())
    stale.write_text("999999 somewhere\n")  # no process holds it
    result = _run(work, "--out", "out.jsonl", "--frames", "1")
    assert result.code == 0, result.stderr
    assert not stale.exists()


def test_two_runs_on_one_out_the_second_is_refused(work):
    """A paced first run holds out.jsonl; the second stops with exit 2 naming its pid; the
    first completes with every frame and a record that says so."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.Popen([sys.executable, "-m", "cuvil_perception", "run", "p.yaml",
                              "--replay", _drive(work), "--out", "out.jsonl", "--rate", "2"],
                             cwd=work, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    lock = lock_path((work / "out.jsonl").resolve())
    deadline = time.monotonic() + 120
    while not (lock.exists() and lock.read_text().strip()) and first.poll() is None:
        assert time.monotonic() < deadline, "the first run never took its lock"
        time.sleep(0.05)
    second = _run(work, "--out", "out.jsonl")
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert_one_line_error(second, "output-path rule 'busy'", f"pid {first.pid}")
    lines = (work / "out.jsonl").read_text().splitlines()
    assert [json.loads(line)["frame"] for line in lines] == [0, 1, 2, 3]
    record = json.loads((work / "out.jsonl.record.json").read_text())
    assert record["status"] == "completed" and record["run"]["pid"] == first.pid


def test_eval_into_scores_another_eval_holds_is_refused(work):
    """eval --out holds its scores file (and the timing file beside it) for the evaluation's
    life: a second eval writing there meanwhile stops before evaluating, naming the holder."""
    scores = work / "scores.json"
    with hold([Claim("--out", scores, kind="scores")]):
        result = cli("eval", str(work / "p.yaml"), "--out", str(scores), cwd=work)
    assert_one_line_error(result, "output-path rule 'busy'", "scores.json", f"pid {os.getpid()}")
    assert not scores.exists()
    assert not lock_path(scores.resolve()).exists()


def test_a_verb_never_replaces_another_kind_of_output(work):
    """Outputs carry a kind: eval's scores never silently replace a run's detections, a trace
    never a run record, a run's JSONL never eval's scores (``--overwrite`` lifts the rule)."""
    assert _run(work, "--frames", "1", "--out", "out.jsonl").code == 0
    (work / "scores.json").write_text('{\n "format": "cuvil-eval/1",\n "scores": []\n}\n')
    before = snapshot(work / "out.jsonl", work / "out.jsonl.record.json", work / "scores.json")
    assert_one_line_error(cli("eval", str(work / "p.yaml"), "--out", str(work / "out.jsonl"),
                              cwd=work), "rule 'other-kind'", "out.jsonl", "detections")
    assert_one_line_error(_run(work, "--frames", "1", "--out", "o2.jsonl", "--trace",
                               "out.jsonl.record.json"), "rule 'other-kind'", "record")
    assert_one_line_error(_run(work, "--frames", "1", "--out", "scores.json"),
                          "rule 'other-kind'", "scores")
    assert_unchanged(before)
    assert _run(work, "--frames", "1", "--out", "scores.json", "--overwrite").code == 0


@pytest.mark.parametrize("head", ['{"frame": 0, "label": "mine"}\n', '{"frame":0}\n',
                                  '{"frame":0,"timestamp_ns":1,"mine":{}}\n'])
def test_a_users_jsonl_with_a_frame_key_is_not_ours(work, head):
    (work / "mine.jsonl").write_text(head)
    before = snapshot(work / "mine.jsonl")
    assert_one_line_error(_run(work, "--out", "mine.jsonl"), "rule 'not-ours'", "mine.jsonl")
    assert_unchanged(before)


def test_our_own_jsonl_is_recognised_without_its_record(work):
    assert _run(work, "--frames", "1", "--out", "out.jsonl", "--record", "r.json").code == 0
    assert not (work / "out.jsonl.record.json").exists()
    again = _run(work, "--frames", "1", "--out", "out.jsonl", "--record", "r.json")
    assert again.code == 0, again.stderr


def test_make_drive_force_never_deletes_from_a_folder_it_did_not_make(tmp_path):
    """A user's folder that happens to hold drive-like entries (no make-drive marker): --force
    is refused and nothing is removed."""
    user = tmp_path / "mine"
    (user / "image_02").mkdir(parents=True)
    (user / "image_02" / "holiday.png").write_bytes(b"x")
    (user / "calib_cam_to_cam.txt").write_text("my calibration\n")
    before = snapshot(user)
    result = cli("make-drive", str(user), "--frames", "1", "--force")
    assert_one_line_error(result, "mine", "no make-drive marker", "--force")
    assert_unchanged(before)


def test_make_drive_force_removes_only_what_its_marker_lists(tmp_path):
    out = tmp_path / "drive"
    assert cli("make-drive", str(out), "--frames", "1").code == 0
    (out / "notes.txt").write_text("kept\n")
    (out / ".cuvil-drive").write_text(json.dumps({"format": "cuvil-drive/1",
                                                  "made": ["notes.txt", "..", "image_02"]}))
    result = cli("make-drive", str(out), "--frames", "2", "--force")
    assert result.code == 0, result.stderr
    assert (out / "notes.txt").read_text() == "kept\n"  # listed, but not a name make-drive makes
    assert len(list((out / "image_02" / "data").iterdir())) == 2
    assert json.loads((out / ".cuvil-drive").read_text())["made"][0] == "image_02"


_BIND = """
set -e
mount --bind "$1" "$2"
cd "$3"
exec "$4" -m cuvil_perception run p.yaml --replay "$1" --out "$2/velodyne_points/new.jsonl"
"""


def test_out_inside_the_drive_through_a_bind_mount_is_refused(work, source, tmp_path):
    """The drive mounted a second time elsewhere (in a private mount namespace): an output
    under that mount is inside the drive (rule 'input'), though no path says so."""
    import shutil

    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace here (needs root and unshare)")
    mount = tmp_path / "elsewhere"
    mount.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    before = snapshot(source)
    done = subprocess.run(["unshare", "-m", "sh", "-c", _BIND, "sh", _drive(work), str(mount),
                           str(work), sys.executable], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "output-path rule 'input'" in lines[0], done.stderr
    assert_unchanged(before)


def test_render_into_a_folder_another_run_holds_is_refused(work):
    """run --viz holds its folder for the run's life; a render into it meanwhile stops."""
    assert _run(work, "--frames", "1", "--out", "out.jsonl").code == 0
    viz = work / "viz"
    with hold([Claim("--viz", viz, folder=True)]):
        result = cli("render", str(work / "out.jsonl"), "--out", str(viz), "--no-video")
    assert_one_line_error(result, "output-path rule 'busy'", "viz", f"pid {os.getpid()}")
    assert not viz.exists()
    assert cli("render", str(work / "out.jsonl"), "--out", str(viz), "--no-video").code == 0


def test_an_output_on_a_device_takes_no_lock_file_beside_it(work):
    """``--out /dev/null`` (with --overwrite: not a file of ours) runs, and leaves no lock
    file in /dev: a device has nothing to keep whole."""
    result = _run(work, "--frames", "1", "--out", "/dev/null", "--overwrite", "--record",
                  "rec.json")
    assert result.code == 0, result.stderr
    assert not Path("/dev/.null.cuvil-lock").exists()
