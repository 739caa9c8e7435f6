"""``profile`` on the sample drive under the real sampler (py-spy): the flame graph names the
native kernels, the detect stage's Python function and ONNX Runtime, per thread; ``--vs`` of
the dense against the sparse PointPillars path shrinks most in the backbone. Checked against
the folded stacks written beside the graphs, never against milliseconds."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from cuvil_perception.cli.app import cli
from cuvil_perception.profile import changes, parse_folded
from cuvil_perception.profile.pyspy import executable

REPO = Path(__file__).resolve().parents[1]
CONFIG = str(REPO / "configs" / "lidar_pillars.yaml")
SVG = "{http://www.w3.org/2000/svg}"
DETECT = "PillarsDetect.process (cuvil_perception/ops/pillars/op.py)"
BACKBONE = "BevRunner.network (cuvil_perception/ops/pillars/model.py)"

pytestmark = pytest.mark.skipif(executable() is None, reason="py-spy not installed (dev extra)")


def _frames(svg: Path) -> dict[str, list]:
    """Frame name -> its <g> elements."""
    out: dict[str, list] = {}
    for g in ET.parse(svg).getroot().iter(SVG + "g"):
        if g.get("class") == "f":
            out.setdefault(g.get("data-n"), []).append(g)
    return out


def _profile(*args: str):
    result = CliRunner().invoke(cli, ["profile", CONFIG, *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_profile_names_kernels_stage_code_and_onnxruntime(tmp_path):
    # 500 Hz: pillarize is ~1 % of the run (~6 samples a run here); the default rate may miss
    # it, and on a loaded machine the sampler gets far fewer than 500 a second: 6 runs
    _profile("--out", str(tmp_path), "--repeat", "6", "--hz", "500")
    frames = _frames(tmp_path / "flamegraph.svg")
    assert "cuvil:pillars.pillarize" in frames
    assert DETECT in frames
    assert any("onnxruntime" in name and name.startswith("[") for name in frames)
    stacks = parse_folded((tmp_path / "stacks.folded").read_text())
    root = frames["all"][0]
    assert float(root.get("data-v")) > 0
    # per-thread views: the executor's named threads are the graph's first level
    threads = {g.get("data-n") for gs in frames.values() for g in gs if g.get("data-d") == "1"}
    assert "cuvil-compute_0" in threads and threads == set(stacks.threads())
    detect_stacks = [s for s in stacks.counts if DETECT in s]
    assert detect_stacks and all(s[0].startswith("cuvil-compute") or s[0] == "main"
                                 for s in detect_stacks)
    speedscope = json.loads((tmp_path / "profile.speedscope.json").read_text())
    assert [p["name"] for p in speedscope["profiles"]] == stacks.threads()


def test_profile_vs_dense_to_sparse_shrinks_most_in_the_backbone(tmp_path):
    # 200 Hz: 2 runs of 4 frames a side; at the default rate (made for longer recordings)
    # ~150 samples a side let a few-sample function top the table of changes
    result = _profile("--set", "detect.sparse=false", "--vs-set", "detect.sparse=true",
                      "--out", str(tmp_path), "--repeat", "2", "--frames", "4", "--hz", "200")
    a = parse_folded((tmp_path / "a-stacks.folded").read_text())
    b = parse_folded((tmp_path / "b-stacks.folded").read_text())
    a.frames = b.frames = 8  # 2 runs of 4 frames each
    top = changes(a, b)[0]
    assert top.self_delta < 0, top
    # the top shrinking frame is the backbone's: most of A's samples of it run under it
    under = sum(n for s, n in a.counts.items() if s[-1] == top.name and BACKBONE in s)
    assert under > 0.8 * sum(n for s, n in a.counts.items() if s[-1] == top.name)
    frames = _frames(tmp_path / "diff.svg")
    fills = {g.find(SVG + "rect").get("fill") for g in frames[BACKBONE]}
    assert any(f.startswith("rgb(") and f.endswith(",255)") and f != "rgb(255,255,255)"
               for f in fills), fills  # blue: shrank
    assert top.name in (tmp_path / "changes.txt").read_text()
    assert "B-A self" in result.output


def test_profile_with_perf_names_the_kernels_from_the_perf_map(tmp_path):
    """perf reads the worker's perf map itself and names threads by their OS names (Python
    frames only on 3.12+, so only native frames are checked)."""
    from cuvil_perception.profile.samplers import refusal

    if refusal("perf") is not None:
        pytest.skip(refusal("perf"))
    _profile("--out", str(tmp_path), "--repeat", "1", "--hz", "1000", "--profiler", "perf")
    stacks = parse_folded((tmp_path / "stacks.folded").read_text())
    names = {frame for stack in stacks.counts for frame in stack}
    assert any(name.startswith("cuvil:pillars.") for name in names)
    assert "cuvil-compute_0" in stacks.threads()
