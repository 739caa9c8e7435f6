"""Bad-input catalogue, fleet: drives, list files, --local N, --ray, results and out folders.

Every row runs ``cuvil-perception fleet ...`` (or ``make-drive --count``) in this process and
asserts exit 2, one stderr line naming what is wrong, no traceback, and no file changed. Nothing
runs a drive: each mistake is caught before the first one starts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fleet_support import FUSION, drives, fleet_dir  # noqa: F401  (fixtures)

from ._runner import assert_one_line_error, assert_unchanged, cli, snapshot

HUGE = str(10**12)


@pytest.fixture
def place(tmp_path, drives):
    """tmp_path with a list file, a non-UTF-8 list, a foreign results file and a plain file."""
    (tmp_path / "missing.txt").write_text(f"{drives[0]}\n# comment\nno/such/drive\n")
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00drive\n")
    (tmp_path / "empty.list").write_text("# nothing\n\n")
    (tmp_path / "nested.txt").write_text("@other.txt\n")
    (tmp_path / "foreign" / "results.jsonl").parent.mkdir()
    (tmp_path / "foreign" / "results.jsonl").write_text('{"frame": 0}\n')
    (tmp_path / "a-file").write_text("not a folder\n")
    (tmp_path / "mine").mkdir()  # the user's own reports where --out points
    (tmp_path / "mine" / "report.html").write_text("<p>my report</p>\n")
    (tmp_path / "ratio.yaml").write_text("budgets:\n  - {stage: yolo, p50_ratio: 2, "
                                         "reference: pillars}\n")
    return tmp_path


# name: (extra arguments (DRIVES and options; {t} = tmp folder, {d} = a good drive),
#        fragments the one error line must hold)
ROWS = {
    "missing-drive": (["{t}/no_such_drive"], ["no_such_drive", "no such drive"]),
    "empty-glob": (["{t}/drive_*"], ["drive_*", "matches no drive"]),
    "list-missing-drive": (["{t}/missing.txt"], ["missing.txt:3", "no/such/drive"]),
    "list-not-utf8": (["{t}/binary.txt"], ["binary.txt", "cannot read the drive list"]),
    "list-absent": (["@{t}/absent.txt"], ["absent.txt", "no such drive list"]),
    "list-empty": (["{t}/empty.list"], ["empty.list", "names no drive"]),
    "list-nested": (["{t}/nested.txt"], ["nested.txt:1", "cannot name another list"]),
    "empty-path": ([""], ["empty drive path"]),
    "local-zero": (["{d}", "--local", "0"], ["--local", "'0'"]),
    "local-huge": (["{d}", "--local", HUGE], ["--local", HUGE]),
    "local-nan": (["{d}", "--local", "nan"], ["--local", "'nan'"]),
    "local-inf": (["{d}", "--local", "inf"], ["--local", "'inf'"]),
    "local-fraction": (["{d}", "--local", "1.5"], ["--local", "'1.5'"]),
    "local-empty": (["{d}", "--local="], ["--local", "''"]),
    "local-negative": (["{d}", "--local", "-1"], ["--local", "'-1'"]),
    "local-negative-attached": (["{d}", "--local=-1"], ["--local", "'-1'"]),
    "local-minus-inf": (["{d}", "--local=-inf"], ["--local", "'-inf'"]),
    "local-nan-attached": (["{d}", "--local=nan"], ["--local", "'nan'"]),
    "local-huge-negative": (["{d}", "--local", f"-{HUGE}"], ["--local", f"'-{HUGE}'"]),
    "local-word": (["{d}", "--local", "two"], ["--local", "'two'"]),
    "local-option-as-value": (["{d}", "--local=--frames"], ["--local", "'--frames'"]),
    # a bare --local still means N = auto (last word, or before another option)
    "local-bare-last": (["{t}/no_such_drive", "--local"], ["no_such_drive", "no such drive"]),
    "local-bare-then-ray": (["{d}", "--local", "--ray", "local"], ["not both"]),
    "local-and-ray": (["{d}", "--local", "2", "--ray", "local"], ["not both"]),
    "ray-empty": (["{d}", "--ray", " "], ["--ray needs an address"]),
    "ship-package-without-ray": (["{d}", "--ship-package"], ["--ship-package", "needs --ray"]),
    "url-missing-drive": (["file://{t}/no_such_drive"], ["no_such_drive", "no such drive"]),
    "url-empty-glob": (["file://{t}/drive_*"], ["drive_*", "matches no drive"]),
    "url-unknown-protocol": (["nosuchproto://bucket/drive"], ["nosuchproto"]),
    "out-is-a-file": (["{d}", "--out", "{t}/a-file"], ["a-file", "not a folder"]),
    "foreign-results": (["{d}", "--out", "{t}/foreign", "--resume"],
                        ["foreign/results.jsonl:1", "not a fleet results file"]),
    "out-inside-a-drive": (["{d}", "--out", "{d}/fleet"], ["report.json", "rule 'input'"]),
    "out-over-user-report": (["{d}", "--out", "{t}/mine"],
                             ["mine/report.html", "choose another --out", "rule 'not-ours'"]),
    "ratio-budget-in-eval": (["{d}", "--budgets", "{t}/ratio.yaml"],
                             ["ratio.yaml:2", "fleet bench"]),
}


@pytest.mark.parametrize(("extra", "fragments"), list(ROWS.values()), ids=list(ROWS))
def test_bad_fleet_input(place, drives, extra, fragments):
    args = [a.format(t=place, d=drives[0]) for a in extra]
    before = snapshot(place)
    assert_one_line_error(cli("fleet", "eval", str(FUSION), *args, cwd=place), *fragments)
    assert_unchanged(before)
    assert not (place / "runs").exists()


def test_ray_without_ray_names_the_extra(drives, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    result = cli("fleet", "eval", str(FUSION), str(drives[0]), "--ray", "auto", "--out",
                 str(tmp_path / "out"))
    assert_one_line_error(result, "--ray needs Ray", "cuvil-perception[fleet]")
    assert not (tmp_path / "out").exists()


def test_existing_results_need_resume(drives, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text('{"format": "cuvil-fleet-results/1"}\n')
    before = snapshot(tmp_path)
    result = cli("fleet", "eval", str(FUSION), str(drives[0]), "--out", str(out))
    assert_one_line_error(result, "results.jsonl", "--resume")
    assert_unchanged(before)


@pytest.mark.parametrize("extra", [["--local=-1"], ["--workers", "0"], ["--workers", "nan"],
                                   ["--frames", "-3"], ["--frames", "inf"]],
                         ids=["local-negative", "workers-zero", "workers-nan", "frames-negative",
                              "frames-inf"])
def test_bad_fleet_option_values(drives, tmp_path, extra):
    """Values click itself rejects (its usage message): exit 2, the value named, no run."""
    result = cli("fleet", "eval", str(FUSION), str(drives[0]), "--out", str(tmp_path / "out"),
                 *extra)
    assert result.code == 2 and not result.crash and "Traceback" not in result.stderr
    assert extra[-1].split("=")[-1] in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("count", ["0", "-1", "nan", "1.5", HUGE, ""])
def test_make_drive_bad_count(tmp_path, count):
    result = cli("make-drive", str(tmp_path / "fleet"), "--count", count)
    assert result.code == 2 and not result.crash and "--count" in result.stderr
    assert not (tmp_path / "fleet").exists()


def test_make_drive_count_refuses_a_full_drive(tmp_path):
    (tmp_path / "fleet" / "drive_0001").mkdir(parents=True)
    (tmp_path / "fleet" / "drive_0001" / "mine.txt").write_text("keep\n")
    result = cli("make-drive", str(tmp_path / "fleet"), "--count", "2", "--frames", "1")
    assert_one_line_error(result, "drive_0001", "not empty")
    assert not (tmp_path / "fleet" / "drive_0000").exists()  # nothing written before refusing


def test_make_drive_count_into_a_file(tmp_path):
    (tmp_path / "a-file").write_text("x\n")
    before = snapshot(tmp_path)
    result = cli("make-drive", str(tmp_path / "a-file"), "--count", "2", "--frames", "1")
    assert_one_line_error(result, "a-file", "not a folder")
    assert_unchanged(before)


def test_two_fleets_on_one_out_the_second_is_refused(drives, tmp_path):
    """A fleet holds its OUT folder for its life (`rt.output_lock`): a second fleet there
    stops before writing anything, naming the first one's pid."""
    import os

    from cuvil_perception.rt.output_lock import hold
    from cuvil_perception.rt.output_policy import Claim

    out = tmp_path / "out"
    with hold([Claim("--out", out, folder=True)]):
        result = cli("fleet", "eval", str(FUSION), str(drives[0]), "--out", str(out))
    assert_one_line_error(result, "output-path rule 'busy'", str(out), f"pid {os.getpid()}")
    assert not out.exists()


@pytest.mark.parametrize("pattern", ["locked/drive_0", "locked/*/drive_*", "locked/**/*.mcap"])
def test_a_drive_path_through_an_unreadable_folder_is_one_line(drives, tmp_path, monkeypatch,
                                                               pattern):
    """What an unprivileged user meets on a folder they cannot read (the tests run as root,
    which reads everything, so the folder's stat calls are made to fail as they would)."""
    import errno
    import os
    import pathlib

    locked = tmp_path / "locked"
    (locked / "a").mkdir(parents=True)
    real_stat, real_scandir = pathlib.Path.stat, os.scandir

    def stat(self, *args, **kwargs):
        if str(self).startswith(str(locked) + os.sep):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_stat(self, *args, **kwargs)

    def scandir(path="."):
        if os.fspath(path).startswith(str(locked)):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(pathlib.Path, "stat", stat)
    monkeypatch.setattr(os, "scandir", scandir)
    result = cli("fleet", "eval", str(FUSION), pattern, "--out", str(tmp_path / "out"),
                 cwd=tmp_path)
    assert_one_line_error(result, pattern)
    assert not (tmp_path / "out").exists()


_HEADER = '{"format": "cuvil-fleet-results/1", "mode": "eval", "pipeline": "p.yaml"}\n'
_LATENCY = {"stages": [{"id": "s", "op": "o", "tag": "compute", "deadline_ms": None}],
            "e2e_deadline_ms": None, "wall_ns": {"s": [1]}, "cpu_ns": {"s": [1]},
            "e2e_ns": [1]}
EDITED_ROWS = {
    "latency-without-wall-ns": ({"latency": {k: v for k, v in _LATENCY.items()
                                             if k != "wall_ns"}}, "KeyError: 'wall_ns'"),
    "latency-a-list": ({"latency": [1, 2]}, "TypeError"),
    "wall-ns-text": ({"latency": dict(_LATENCY, wall_ns={"s": ["fast"]})}, "ValueError"),
    "scores-without-classes": ({"scores": [{"stage": "s", "op": "o", "metric": "bev"}]},
                               "KeyError: 'classes'"),
    "name-missing": ({"name": None}, "'name' is not a string"),
}


@pytest.mark.parametrize("row", list(EDITED_ROWS), ids=list(EDITED_ROWS))
def test_a_hand_edited_results_row_on_resume_is_one_line(drives, tmp_path, row):
    import json

    change, fragment = EDITED_ROWS[row]
    line = dict({"drive": str(drives[0]), "name": "drive_0000", "fingerprint": "f",
                 "pipeline_hash": "h", "status": "ok", "latency": _LATENCY}, **change)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text(_HEADER + json.dumps(line) + "\n")
    before = snapshot(tmp_path)
    result = cli("fleet", "eval", str(FUSION), str(drives[0]), "--out", str(out), "--resume")
    assert_one_line_error(result, "results.jsonl:2", fragment, "--resume runs the drive again")
    assert_unchanged(before)
