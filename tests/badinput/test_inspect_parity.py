"""Bad-input catalogue, inspect = run: what ``run`` refuses before its first frame is
refused by ``inspect`` too, with the same line (docs/cli.md: "exits 2 where run would").

Each row runs the same bad input through ``run`` and ``inspect`` (no ``--profile``: nothing is
opened, no sensor touched) and asserts exit 2, one identical line, no traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ._runner import assert_one_line_error, cli

CAMERA = ("stages:\n  - {id: drive, op: replay}\n"
          "  - {id: out, op: jsonl, inputs: {image: drive/image}, params: {path: out.jsonl}}\n")

CAMERA_ROWS = [
    ("device-node", "/dev/video99", "camera /dev/video99: no such device"),
    ("device-index", "99", "camera 99: no such device (/dev/video99 does not exist)"),
    ("video-file", "missing_clip.avi", "camera missing_clip.avi: no such video file"),
]


@pytest.mark.parametrize("device,message", [r[1:] for r in CAMERA_ROWS],
                         ids=[r[0] for r in CAMERA_ROWS])
def test_inspect_refuses_a_camera_that_is_not_there(tmp_path: Path, device, message):
    (tmp_path / "p.yaml").write_text(CAMERA)
    ran = cli("run", "p.yaml", "--camera", device, "--frames", "1", cwd=tmp_path)
    inspected = cli("inspect", "p.yaml", "--camera", device, cwd=tmp_path)
    assert assert_one_line_error(ran, message) == assert_one_line_error(inspected, message)
    assert not (tmp_path / "out.jsonl").exists()


YAML_ROWS = [
    ("deadline-auto-misspelled", "stages:\n  - {id: drive, op: replay}\n"
     "  - {id: out, op: jsonl, inputs: {image: drive/image}, params: {path: out.jsonl}, "
     "deadline_ms: atuo}\n",
     "p.yaml:3:96: stage 'out': field 'deadline_ms': must be a positive number of milliseconds, "
     "got 'atuo' (did you mean 'auto'?)"),
    ("deadline-auto-on-an-op-without-warm-up", "stages:\n  - {id: drive, op: replay}\n"
     "  - {id: out, op: jsonl, inputs: {image: drive/image}, params: {path: out.jsonl}, "
     "deadline_ms: auto}\n",
     "p.yaml:3:96: stage 'out': field 'deadline_ms': deadline_ms 'auto' needs an op that times "
     "its warm-up passes, and op 'jsonl' runs none"),
    ("on-miss-without-deadline", "stages:\n  - {id: drive, op: replay, on_miss: reuse_last}\n",
     "p.yaml:2:38: stage 'drive': field 'on_miss': on_miss 'reuse_last' without a 'deadline_ms'"),
    ("sink-without-inputs", "stages:\n  - {id: drive, op: replay}\n"
     "  - {id: out, op: jsonl, params: {path: out.jsonl}}\n",
     "p.yaml:3:5: stage 'out': field 'inputs': sink op 'jsonl' has no inputs"),
]


@pytest.mark.parametrize("text,message", [r[1:] for r in YAML_ROWS], ids=[r[0] for r in YAML_ROWS])
def test_inspect_refuses_a_pipeline_exactly_as_run(tmp_path: Path, text, message):
    (tmp_path / "p.yaml").write_text(text)
    ran = cli("run", "p.yaml", "--frames", "1", cwd=tmp_path)
    inspected = cli("inspect", "p.yaml", cwd=tmp_path)
    assert assert_one_line_error(ran, message) == assert_one_line_error(inspected, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]
