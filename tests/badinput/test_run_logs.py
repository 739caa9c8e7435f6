"""Bad-input catalogue, run logs read back (``render``, ``eval --run``): a hand-edited frame
number. A run writes whole frame indices from 0 up, in increasing order; a line that says
otherwise (a frame 10^12 of a 3-frame drive, a negative or fractional one, a repeat) is refused
with exit 2 and one line naming file:line, and no picture is drawn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ._runner import assert_one_line_error, cli, replay_work

@pytest.fixture(scope="module")
def run_log(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("run-logs")
    replay_work(work, 3, seed=13)
    assert cli("run", str(work / "p.yaml"), "--replay", str(work / "drive"), cwd=work).code == 0
    return work / "out.jsonl"


ROWS = {"huge": (1, 10**12, "from 0 to 1,000,000,000"), "negative": (0, -1, "got -1"),
        "fraction": (1, 1.5, "got 1.5"), "text": (1, "7", "got 7"), "boolean": (0, True, "True"),
        "null": (0, None, "got None"), "repeated": (2, 1, "frame 1 after frame 1"),
        "backwards": (2, 0, "frame 0 after frame 1")}


@pytest.mark.parametrize("row", list(ROWS), ids=list(ROWS))
def test_render_refuses_a_frame_number_a_run_never_writes(run_log, tmp_path, row):
    line_index, value, fragment = ROWS[row]
    lines = run_log.read_text().splitlines()
    doc = json.loads(lines[line_index])
    doc["frame"] = value
    lines[line_index] = json.dumps(doc)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    result = cli("render", str(edited), "--drive", str(run_log.parent / "drive"), "--out",
                 str(tmp_path / "viz"), "--no-video")
    assert_one_line_error(result, f"edited.jsonl:{line_index + 1}", fragment)
    assert not (tmp_path / "viz").exists()
