"""Fixtures and helpers shared by the fleet tests (local pool and Ray).

A fleet of three tiny synthetic drives (2 frames each), a corrupt drive, a *union drive* (the
frames of the three drives one after the other in one drive: what a single run over all of
them sees), and the single-run results the fleet must reproduce exactly.
"""

from __future__ import annotations

import os
import shutil
import traceback
from pathlib import Path

import pytest
from click.testing import CliRunner

import cuvil_perception.testing.ops  # noqa: F401  (test.exit: a stage that kills its worker)
from cuvil_perception.drives import read_timestamps, write_timestamps
from cuvil_perception.drives.synth import make_drive

REPO = Path(__file__).resolve().parents[1]
FUSION = REPO / "configs" / "fusion.yaml"
FRAMES = 2
SEEDS = (20, 21, 22)
STREAM_FILES = {"image_02": ".png", "velodyne_points": ".bin", "labels": ".json"}

# replay -> test.exit (kills its process on frame 1 while `marker` is missing) -> jsonl
EXIT_PIPELINE = """pipeline: fleet_exit
stages:
  - {{id: drive, op: replay}}
  - id: die
    op: test.exit
    inputs: {{points: drive/points}}
    params: {{at_frame: 1, how: {how}, marker: {marker}, sleep_ms: {sleep_ms}{hold}}}
  - {{id: out, op: jsonl, inputs: {{points: die/y, labels: drive/labels}},
     params: {{path: points.jsonl}}}}
"""


def cli(*args: str):
    """``cuvil-perception ARGS`` in this process: (exit code, stdout, stderr); a traceback that
    escaped the CLI fails the test."""
    from cuvil_perception.cli.app import cli as group

    result = CliRunner().invoke(group, list(args), prog_name="cuvil-perception",
                                env={"COLUMNS": "200"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        pytest.fail("".join(traceback.format_exception(result.exception)))
    return result.exit_code, result.stdout, result.stderr


def _shared(tmp_path_factory, name: str) -> tuple[Path, bool]:
    """A folder shared by every test module of the session (their session fixtures are
    separate instances: each module imports them), and whether it is new."""
    path = tmp_path_factory.getbasetemp() / "fleet-shared" / name
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path, new


@pytest.fixture(scope="session")
def fleet_dir(tmp_path_factory) -> Path:
    """``drive_0000`` .. ``drive_0002`` (2 frames, seeds 20..22) via ``make-drive --count``."""
    out, new = _shared(tmp_path_factory, "drives")
    if new:
        code, _, stderr = cli("make-drive", str(out), "--count", str(len(SEEDS)), "--frames",
                              str(FRAMES), "--seed", str(SEEDS[0]))
        assert code == 0, stderr
    return out


@pytest.fixture(scope="session")
def drives(fleet_dir) -> list[Path]:
    return sorted(fleet_dir.glob("drive_*"))


@pytest.fixture(scope="session")
def corrupt_drive(drives, tmp_path_factory) -> Path:
    """A copy of drive_0000 whose second scan is cut mid-point (a DriveError on frame 1)."""
    target, new = _shared(tmp_path_factory, "drive_corrupt")
    if not new:
        return target
    shutil.copytree(drives[0], target)
    scan = target / "velodyne_points" / "data" / "0000000001.bin"
    os.truncate(scan, scan.stat().st_size - 5)
    return target


@pytest.fixture(scope="session")
def union_drive(drives, tmp_path_factory) -> Path:
    """The drives' frames in fleet order in one drive (times shifted 10 s per drive)."""
    target, new = _shared(tmp_path_factory, "union")
    if not new:
        return target
    target.mkdir()
    for name in ("calib_cam_to_cam.txt", "calib_velo_to_cam.txt"):  # the same for every seed
        shutil.copy(drives[0] / name, target / name)
    stamps = {"image_02": [], "velodyne_points": []}
    index = 0
    for number, drive in enumerate(drives):
        shift = number * 10_000_000_000
        for stream in stamps:
            stamps[stream] += [t + shift for t in read_timestamps(drive / stream /
                                                                  "timestamps.txt")]
        for frame in range(FRAMES):
            for stream, suffix in STREAM_FILES.items():
                folder = target / stream / ("data" if stream != "labels" else "")
                folder.mkdir(parents=True, exist_ok=True)
                source = drive / stream / ("data" if stream != "labels" else "")
                shutil.copy(source / f"{frame:010d}{suffix}", folder / f"{index:010d}{suffix}")
            index += 1
    for stream, values in stamps.items():
        write_timestamps(target / stream / "timestamps.txt", values)
    return target


def exit_pipeline(folder: Path, how: str = "exit", marker: Path | None = None,
                  sleep_ms: float = 0.0, hold: Path | None = None) -> Path:
    """The test.exit pipeline in ``folder``; ``marker`` None: a marker that already exists
    (the stage then never kills anything); ``hold``: its prewarm waits while that file is
    there (test.exit's ``hold``)."""
    if marker is None:
        marker = folder / "never-die"
        marker.touch()
    path = folder / "exit.yaml"
    path.write_text(EXIT_PIPELINE.format(how=how, marker=marker, sleep_ms=sleep_ms,
                                         hold=f", hold: {hold}" if hold else ""))
    return path


def single_run_bytes(pipeline: Path, drive: Path, out: Path) -> bytes:
    """The jsonl bytes of ``run PIPELINE --replay DRIVE --no-deadlines`` (one drive, alone)."""
    code, _, stderr = cli("run", str(pipeline), "--replay", str(drive), "--out", str(out),
                          "--no-deadlines")
    assert code == 0, stderr
    return out.read_bytes()


def rewrite_drive(target: Path, seed: int) -> Path:
    """A drive written again with another seed at ``target`` (a changed drive)."""
    shutil.rmtree(target)
    make_drive(target, FRAMES, seed)
    return target


@pytest.fixture(scope="session")
def union_scores(union_drive) -> list[dict]:
    """``eval`` of fusion.yaml over the union drive: what pooled AP must equal exactly."""
    from cuvil_perception.eval import evaluate_pipeline
    from cuvil_perception.graph import apply_cli_sources, load_pipeline

    if union_drive not in _UNION_SCORES:
        pipeline = apply_cli_sources(load_pipeline(FUSION, validate=False), replay=union_drive)
        _UNION_SCORES[union_drive] = evaluate_pipeline(pipeline, workers=1).as_dict()["results"]
    return _UNION_SCORES[union_drive]


_UNION_SCORES: dict[Path, list[dict]] = {}


def read_jsonl(path: Path) -> list[dict]:
    """Every line of a JSONL file parsed (a torn or invalid line fails the test)."""
    import json

    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]
