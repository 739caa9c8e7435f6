"""Determinism on the shipped pipelines and the bundled sample drive: a replay without enforced
deadlines is a pure function of the drive (identical bytes for 1 and 2 workers, run after run)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cuvil_perception.graph import apply_cli_sources, load_pipeline
from cuvil_perception.rt import RunOptions, run_pipeline, run_sequential

REPO = Path(__file__).resolve().parents[1]
DRIVE = REPO / "datasets" / "sample_drive"
CONFIGS = ("demo", "lidar_pillars", "camera_yolo")


def prepared(name: str, out_dir: Path):
    """The shipped pipeline with every output redirected into ``out_dir``."""
    config = REPO / "configs" / f"{name}.yaml"
    if not config.is_file() or not DRIVE.is_dir():
        pytest.skip(f"{config.name} or the sample drive is not there yet")
    pipeline = load_pipeline(config, validate=False)
    apply_cli_sources(pipeline, replay=DRIVE, out=out_dir / "out.jsonl")
    for stage in pipeline.stages:
        if stage.op == "png":
            stage.params["dir"] = str(out_dir / "png")
    return pipeline.validate()


def digest(out_dir: Path) -> dict[str, str]:
    """sha256 of every output file (the run record, which holds timings, excluded)."""
    return {str(p.relative_to(out_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out_dir.rglob("*")) if p.is_file() and "record" not in p.name}


@pytest.mark.parametrize("name", CONFIGS)
def test_replay_is_byte_identical_for_1_and_2_workers_run_after_run(tmp_path, name):
    frames = 6 if name == "demo" else 4
    seen = []
    for run in range(3):
        for workers in (1, 2):
            out = tmp_path / f"{workers}-{run}"
            result = run_pipeline(prepared(name, out), RunOptions(
                workers=workers, frames=frames, enforce_deadlines=False))
            assert result.frames == frames and result.compiles_after_frame0 == 0
            seen.append(digest(out))
    assert len(seen[0]) >= 1 and all(d == seen[0] for d in seen)
    lines = (tmp_path / "1-0" / "out.jsonl").read_text().splitlines()
    assert [json.loads(x)["frame"] for x in lines] == list(range(frames))
    sequential = tmp_path / "sequential"
    run_sequential(prepared(name, sequential), RunOptions(frames=frames))
    assert digest(sequential) == seen[0]
