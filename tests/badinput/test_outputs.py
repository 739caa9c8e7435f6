"""Bad-input catalogue, outputs: where a command may write, and what a failed write leaves.

Each row asks a verb to write somewhere it must not (onto an input, onto another output of the
same command, over a file this tool did not write, into a read-only folder) and asserts exit 2,
one stderr line naming the path and the rule that refused, no traceback, and that no file that
existed before changed (sha256 before/after). Rows further down check what is allowed (a
previous output, ``--overwrite``), a full disk mid-run (a file-size limit in a subprocess: the
JSONL keeps whole lines, no temporary file) and stale run records.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cuvil_perception.drives.synth import make_drive

from ._runner import (REPO, assert_one_line_error, assert_unchanged, cli, cli_under_file_limit,
                      snapshot)

PIPELINE = ("pipeline: outputs\nstages:\n  - {id: drive, op: replay}\n"
            "  - {id: out, op: jsonl, inputs: {points: drive/points}, params: {path: out.jsonl}}\n")
TWO_SINKS = PIPELINE + ("  - {id: again, op: jsonl, inputs: {points: drive/points}, "
                        "params: {path: out.jsonl}}\n")
YOLO = ("pipeline: model\nstages:\n  - {id: drive, op: replay}\n"
        "  - {id: yolo, op: yolo.detect, inputs: {image: drive/image},\n"
        "     params: {model: model.onnx}}\n"
        "  - {id: out, op: jsonl, inputs: {d: yolo/detections}, params: {path: out.jsonl}}\n")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("outputs-drive") / "drive"
    make_drive(out, 3, seed=11)
    return out


@pytest.fixture
def work(source, tmp_path) -> Path:
    """A folder with a pipeline, a drive link, a file and a folder this tool did not write."""
    (tmp_path / "p.yaml").write_text(PIPELINE)
    (tmp_path / "two.yaml").write_text(TWO_SINKS)
    (tmp_path / "drive").symlink_to(source)
    (tmp_path / "notes.txt").write_text("the user's own notes\n")
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.png").write_bytes(b"not really a png")
    return tmp_path


def _run(work: Path, *args: str, pipeline: str = "p.yaml"):
    return cli("run", str(work / pipeline), "--replay", str(work / "drive"), *args, cwd=work)


# (row id, arguments after `run p.yaml --replay drive`, rule, fragment of the path named)
REFUSED = [
    ("out-is-the-pipeline", ["--out", "p.yaml"], "input", "p.yaml"),
    ("out-inside-the-drive", ["--out", "drive/velodyne_points/timestamps.txt"], "input",
     "timestamps.txt"),
    ("record-inside-the-drive", ["--record", "drive/record.json"], "input", "drive/record.json"),
    ("viz-is-the-drive", ["--viz", "drive"], "input", "drive"),
    ("trace-is-the-pipeline", ["--trace", "p.yaml"], "input", "p.yaml"),
    ("record-is-out", ["--out", "r.jsonl", "--record", "r.jsonl"], "same-output", "r.jsonl"),
    ("trace-is-out", ["--out", "r.jsonl", "--trace", "r.jsonl"], "same-output", "r.jsonl"),
    ("trace-is-record", ["--record", "x.json", "--trace", "x.json"], "same-output", "x.json"),
    ("out-over-a-user-file", ["--out", "notes.txt"], "not-ours", "notes.txt"),
    ("trace-over-a-user-file", ["--trace", "notes.txt"], "not-ours", "notes.txt"),
    ("record-over-a-user-file", ["--record", "notes.txt"], "not-ours", "notes.txt"),
    ("viz-into-a-user-folder", ["--viz", "photos"], "not-ours", "photos"),
    ("out-is-a-folder", ["--out", "photos"], "wrong-kind", "photos"),
    ("viz-is-a-file", ["--viz", "notes.txt"], "wrong-kind", "notes.txt"),
    ("out-under-a-file", ["--out", "notes.txt/out.jsonl"], "wrong-kind", "notes.txt"),
    ("out-over-a-system-file", ["--out", "/etc/hostname"], "not-ours", "/etc/hostname"),
]


@pytest.mark.parametrize("args, rule, named", [row[1:] for row in REFUSED],
                         ids=[row[0] for row in REFUSED])
def test_run_refuses_the_output_path(work, args, rule, named):
    before = snapshot(work, Path("/etc/hostname"))
    result = _run(work, *args)
    assert_one_line_error(result, f"output-path rule '{rule}'", named)
    assert_unchanged(before)
    assert not (work / "out.jsonl").exists()  # refused before any sink opened


def test_two_sinks_on_one_path_are_refused(work):
    before = snapshot(work)
    assert_one_line_error(_run(work, pipeline="two.yaml"), "output-path rule 'same-output'",
                          "out.jsonl", "stage 'again'")
    assert_unchanged(before)


def test_decisions_record_is_an_input(work):
    first = _run(work, "--frames", "1", "--record", "rec.json")
    assert first.code == 0, first.stderr
    before = snapshot(work / "rec.json")
    result = _run(work, "--decisions", "rec.json", "--record", "rec.json")
    assert_one_line_error(result, "output-path rule 'input'", "rec.json", "--decisions")
    assert_unchanged(before)


def test_model_file_is_an_input(work):
    model = REPO / "cuvil_perception" / "models" / "yolov8_tiny_random_640.onnx"
    (work / "model.onnx").symlink_to(model)
    (work / "y.yaml").write_text(YOLO)
    before = snapshot(model)
    assert_one_line_error(_run(work, "--out", "model.onnx", pipeline="y.yaml"),
                          "output-path rule 'input'", "model.onnx")
    assert_unchanged(before)


@pytest.fixture
def read_only(tmp_path):
    """A read-only folder: chmod for a normal user, a read-only tmpfs for root."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("running as root without mount: no way to make a read-only folder")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("option, name", [("--record", "r.json"), ("--trace", "t.json"),
                                          ("--viz", "pictures"), ("--out", "o.jsonl")])
def test_read_only_folder_is_refused_before_the_run(work, read_only, option, name):
    before = snapshot(work)
    result = _run(work, option, str(read_only / name))
    assert_one_line_error(result, "output-path rule 'not-writable'", str(read_only))
    assert_unchanged(before)


def test_previous_outputs_are_replaced_and_overwrite_lifts_not_ours(work):
    first = _run(work, "--frames", "1", "--trace", "t.json", "--viz", "v")
    assert first.code == 0, first.stderr
    again = _run(work, "--frames", "1", "--trace", "t.json", "--viz", "v")
    assert again.code == 0, again.stderr  # its own outputs: recognised, replaced
    forced = _run(work, "--frames", "1", "--out", "notes.txt", "--overwrite")
    assert forced.code == 0, forced.stderr
    assert json.loads((work / "notes.txt").read_text().splitlines()[0])["frame"] == 0
    # --overwrite never lifts the rules that protect inputs and the run's own outputs
    assert_one_line_error(_run(work, "--out", "p.yaml", "--overwrite"), "rule 'input'")


def _render(work: Path, *args: str):
    return cli("render", str(work / "out.jsonl"), *args, cwd=work)


def test_render_and_bench_and_eval_outputs_follow_the_policy(work):
    assert _run(work, "--frames", "1").code == 0
    before = snapshot(work)
    assert_one_line_error(_render(work, "--out", "photos", "--no-video"), "rule 'not-ours'",
                          "photos")
    assert_one_line_error(_render(work, "--out", "drive", "--no-video"), "rule 'input'")
    budgets = work / "b.yaml"
    budgets.write_text("budgets:\n  - {stage: out, p99_ms: 1000}\n")
    before = snapshot(work)
    assert_one_line_error(cli("bench", str(work / "p.yaml"), "--budgets", str(budgets),
                              "--plot", str(work / "photos"), cwd=work), "rule 'not-ours'")
    assert_one_line_error(cli("eval", str(work / "p.yaml"), "--out", str(work / "notes.txt"),
                              cwd=work), "rule 'not-ours'", "notes.txt")
    assert_unchanged(before)


def test_bench_never_writes_the_pipelines_outputs(work):
    budgets = work / "b.yaml"
    budgets.write_text("budgets:\n  - {stage: out, p99_ms: 100000}\n")
    result = cli("bench", str(work / "p.yaml"), "--replay", str(work / "drive"), "--budgets",
                 str(budgets), "--frames", "1", cwd=work)
    assert result.code == 0, result.stderr
    assert not (work / "out.jsonl").exists() and not (work / "out.jsonl.record.json").exists()


def test_stale_record_beside_an_output_is_never_used(work, tmp_path_factory):
    """A run whose record goes elsewhere removes the older record beside its jsonl, and render
    refuses a finished record whose digest is not the file's (no silent wrong drive)."""
    assert _run(work, "--frames", "2").code == 0
    stale = json.loads((work / "out.jsonl.record.json").read_text())
    assert _run(work, "--frames", "1", "--record", "elsewhere.json").code == 0
    assert not (work / "out.jsonl.record.json").exists()
    (work / "out.jsonl.record.json").write_text(json.dumps(stale))  # put the stale one back
    before = snapshot(work)
    result = _render(work, "--out", "pictures", "--no-video")
    assert_one_line_error(result, "out.jsonl", "describes another run", "--drive")
    assert_unchanged(before)


BIG_LINES = ("pipeline: big\nstages:\n  - {id: src, op: test.scripted, params: {frames: 4, "
             "n: 3000}}\n  - {id: out, op: jsonl, inputs: {v: src/value}, "
             "params: {path: out.jsonl}}\n")


def test_full_disk_keeps_whole_lines_and_names_the_file(tmp_path):
    """A file-size limit (what a full disk looks like to a writer) hit in the middle of line 3:
    exit 2, one line naming the file and how many whole lines it keeps, no partial line, no
    temporary file, and a run record that says the run failed."""
    (tmp_path / "p.yaml").write_text(BIG_LINES)
    free = cli_under_file_limit(tmp_path, 0, "run", "p.yaml", "--record", "free.json")
    assert free.returncode == 0, free.stderr
    sizes = [len(line) + 1 for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    limit = sizes[0] + sizes[1] + sizes[2] // 2
    done = cli_under_file_limit(tmp_path, limit, "run", "p.yaml", "--record", "full.json")
    result = type("R", (), {"code": done.returncode, "stdout": done.stdout,
                            "stderr": done.stderr, "crash": ""})()
    assert_one_line_error(result, "out.jsonl", "writing line 3 failed", "file too large",
                          "keeps its 2 whole line(s)")
    lines = (tmp_path / "out.jsonl").read_text().splitlines(keepends=True)
    assert len(lines) == 2 and all(json.loads(line) for line in lines)
    assert not list(tmp_path.glob(".*.tmp"))
    assert json.loads((tmp_path / "full.json").read_text())["status"] == "failed"


SMALL_LINES = ("pipeline: small\nstages:\n  - {id: src, op: test.scripted, params: {frames: 200, "
               "n: 1}}\n  - {id: out, op: jsonl, inputs: {v: src/value}, "
               "params: {path: out.jsonl}}\n")


def test_full_disk_names_the_jsonl_even_when_the_trace_fails_too(tmp_path):
    """The same limit also stops the --trace written after the run (a full disk stops every
    writer): the error still names the JSONL that lost frames, the trace failure is a warning."""
    (tmp_path / "p.yaml").write_text(SMALL_LINES)
    done = cli_under_file_limit(tmp_path, 8000, "run", "p.yaml", "--trace", "trace.json")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "out.jsonl: writing line" in errors[0], done.stderr
    assert "warning:" in done.stderr and "trace.json" in done.stderr
    assert not (tmp_path / "trace.json").exists() and not list(tmp_path.glob(".*.tmp"))


def test_decisions_of_another_drive_are_refused(work, tmp_path):
    other = tmp_path / "other"
    make_drive(other, 3, seed=12)
    assert _run(work, "--frames", "1", "--record", "rec.json").code == 0
    before = snapshot(work / "rec.json")
    result = cli("run", str(work / "p.yaml"), "--replay", str(other), "--decisions", "rec.json",
                 "--out", "o2.jsonl", "--record", "rec2.json", cwd=work)
    assert_one_line_error(result, "rec.json", "recorded on drive", str(other))
    assert_unchanged(before)
    same = _run(work, "--frames", "1", "--decisions", "rec.json", "--record", "rec3.json")
    assert same.code == 0, same.stderr


PNG = ("pipeline: pictures\nstages:\n  - {id: drive, op: replay}\n"
       "  - {id: pics, op: png, inputs: {image: drive/image}, params: {dir: %s}}\n")


@pytest.mark.parametrize("folder, rule", [("photos", "not-ours"), ("drive", "input"),
                                          ("notes.txt", "wrong-kind")])
def test_png_sink_folder_follows_the_policy(work, folder, rule):
    (work / "png.yaml").write_text(PNG % folder)
    before = snapshot(work)
    assert_one_line_error(_run(work, "--frames", "1", pipeline="png.yaml"),
                          f"output-path rule '{rule}'", folder, "stage 'pics' (png.dir)")
    assert_unchanged(before)


def test_png_sink_folder_of_a_previous_run_is_reused(work):
    """A rerun replaces the folder's frames: a shorter rerun leaves none of the earlier run's
    frames beside its own (the user's own files in it stay)."""
    (work / "png.yaml").write_text(PNG % "pictures")
    for frames in ("3", "1"):
        result = _run(work, "--frames", frames, pipeline="png.yaml")
        assert result.code == 0, result.stderr
        (work / "pictures" / "image" / "notes.png").write_bytes(b"the user's")
    assert (work / "pictures" / ".cuvil-output").is_file()
    assert sorted(p.name for p in (work / "pictures" / "image").iterdir()) == \
        ["000000.png", "notes.png"]


def test_render_rerun_leaves_no_frames_of_the_earlier_render(work):
    assert _run(work, "--frames", "3", "--out", "three.jsonl").code == 0
    assert _run(work, "--frames", "1", "--out", "one.jsonl").code == 0
    assert cli("render", str(work / "three.jsonl"), "--out", str(work / "viz"),
               cwd=work).code == 0
    assert (work / "viz" / "drive.mp4").is_file()
    result = cli("render", str(work / "one.jsonl"), "--out", str(work / "viz"), "--no-video",
                 cwd=work)
    assert result.code == 0, result.stderr
    for folder in ("camera", "bev"):
        assert [p.name for p in (work / "viz" / folder).iterdir()] == ["000000.png"]
    assert not (work / "viz" / "drive.mp4").exists()  # it showed the earlier run


def test_compile_out_follows_the_policy(work):
    before = snapshot(work)
    for folder, rule in ((work / "photos", "not-ours"), (work, "input")):  # work holds p.yaml
        result = cli("compile", str(work / "p.yaml"), "--target", "aarch64-linux-gnu", "--out",
                     str(folder), cwd=work)
        assert_one_line_error(result, f"output-path rule '{rule}'", str(folder))
    assert_unchanged(before)


def test_compile_library_needs_a_manifest_of_ours(work):
    """A user's own library.json does not make a folder ours: --library refuses it whole."""
    (work / "lib").mkdir()
    (work / "lib" / "library.json").write_text('{"name": "my js library"}\n')
    (work / "lib" / "cuvil_outputs.h").write_text("/* mine */\n")
    before = snapshot(work)
    result = cli("compile", str(work / "p.yaml"), "--target", "x86_64-linux-gnu", "--library",
                 str(work / "lib"), cwd=work)
    assert_one_line_error(result, "library.json is not a manifest cuvil-perception wrote")
    assert_unchanged(before)
    assert sorted(p.name for p in (work / "lib").iterdir()) == ["cuvil_outputs.h",
                                                                "library.json"]


def test_full_disk_in_make_drive_and_convert_is_one_line(tmp_path, source):
    """The same file-size limit stops make-drive and convert: exit 2, one line naming OUT and
    why; convert keeps nothing (no bag, no staging folder)."""
    done = cli_under_file_limit(tmp_path, 200_000, "make-drive", "md", "--frames", "2")
    result = type("R", (), {"code": done.returncode, "stdout": done.stdout,
                            "stderr": done.stderr, "crash": ""})()
    assert_one_line_error(result, "md: writing the drive failed (file too large)", "--force")
    done = cli_under_file_limit(tmp_path, 200_000, "convert", str(source), "c.mcap")
    result = type("R", (), {"code": done.returncode, "stdout": done.stdout,
                            "stderr": done.stderr, "crash": ""})()
    assert_one_line_error(result, "c.mcap: writing the bag failed (file too large)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["md"]


MCAP_PIPELINE = ("pipeline: mcapfull\nstages:\n  - {id: drive, op: replay}\n"
                 "  - {id: fox, op: mcap, inputs: {points: drive/points}, "
                 "params: {path: out.mcap, compression: none}}\n")


def test_full_disk_in_the_mcap_sink_names_the_file_exit_2(tmp_path, source):
    """A write the MCAP writer cannot finish is a failed write (exit 2, the file named), as
    for a JSONL sink, not a stage crash (exit 1) with the SDK's error text alone."""
    (tmp_path / "p.yaml").write_text(MCAP_PIPELINE)
    done = cli_under_file_limit(tmp_path, 2_500_000, "run", "p.yaml", "--replay", str(source))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {tmp_path / 'out.mcap'}: writing frame 1 failed"), last


def test_full_disk_in_a_fleet_results_file_is_one_line(tmp_path, source):
    (tmp_path / "p.yaml").write_text(PIPELINE)
    done = cli_under_file_limit(tmp_path, 60, "fleet", "run", "p.yaml", str(source), "--out", "fl")
    result = type("R", (), {"code": done.returncode, "stdout": done.stdout,
                            "stderr": done.stderr, "crash": ""})()
    assert_one_line_error(result, "fl/results.jsonl: writing a row failed (file too large)",
                          "--resume")
