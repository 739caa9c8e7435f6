"""Roles: a user's own detector op (defined here, not in the package) is scored by ``eval``,
drawn by ``render`` and summarised by ``run --summary`` through the roles it declares, and no
module outside ops/ decides by a built-in op's name."""

from __future__ import annotations

import ast
from pathlib import Path

import cv2
import numpy as np
import pytest

from cuvil_perception.drives import Drive
from cuvil_perception.errors import UsageError
from cuvil_perception.eval import evaluate_pipeline
from cuvil_perception.graph import Op, Pipeline, PortSpec, apply_cli_sources, register, roles

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "datasets" / "sample_drive"
PACKAGE = REPO / "cuvil_perception"
DOTTED_OPS = ("yolo.detect", "pillars.detect", "fusion.associate")
SOURCE_OPS = ("replay", "bag", "camera")


@register
class UserDetector(Op):
    """A user's detector: perfect 2D and 3D boxes from the labels, under its own port names."""

    name = "usertest.detector"
    roles = {"detections_2d": "cam", "boxes_3d": "cuboids", "scores_3d": "conf",
             "labels_3d": "cls"}
    summary_port = "cuboids"

    @staticmethod
    def bev_range(params):
        return (0.0, -40.0, 70.4, 40.0)

    def summarize(self, port, value):
        return f"{len(value)} cuboids"

    def input_ports(self):
        return (PortSpec("truth", "float32", (None, 12)),)

    def output_ports(self):
        return (PortSpec("cam", "float32", (None, 6)), PortSpec("cuboids", "float32", (None, 7)),
                PortSpec("conf", "float32", (None,)), PortSpec("cls", "int32", (None,)))

    def process(self, inputs, frame):
        truth = inputs["truth"]
        seen = truth[:, 8] >= 0
        cam = np.concatenate([truth[seen, 8:12], np.full((seen.sum(), 1), 0.9, np.float32),
                              truth[seen, :1]], axis=1)
        return {"cam": cam, "cuboids": truth[:, 1:8].copy(),
                "conf": np.full(len(truth), 0.8, np.float32), "cls": truth[:, 0].astype(np.int32)}


def user_pipeline(out: Path) -> Pipeline:
    p = Pipeline("user")
    p.add("drive", "replay", path=str(SAMPLE))
    p.add("det", "usertest.detector", inputs={"truth": "drive/labels"})
    p.add("log", "jsonl", path=str(out), inputs={
        "a": "det/cam", "b": "det/cuboids", "c": "det/conf", "d": "det/cls"})
    return p


def test_user_detector_gets_eval_scores(sample_drive, tmp_path) -> None:
    report = evaluate_pipeline(user_pipeline(tmp_path / "x.jsonl"), frames=4)
    assert [(s.stage, s.metric) for s in report.scores] == [("det", "2d"), ("det", "bev")]
    for metric in ("2d", "bev"):
        for cls in ("car", "pedestrian", "cyclist"):
            assert report.score("det", metric).ap(cls) == pytest.approx(1.0)


def test_user_detector_gets_pictures_and_summary_columns(sample_drive, tmp_path) -> None:
    from cuvil_perception.cli.frame_summary import summary_columns
    from cuvil_perception.rt import RunOptions, run_pipeline
    from cuvil_perception.viz import render_run

    out = tmp_path / "run" / "user.jsonl"
    p = user_pipeline(out)
    p.validate()
    run_pipeline(p, RunOptions(frames=2, enforce_deadlines=False))
    summary = render_run(out, tmp_path / "viz", video=False)  # the drive from the run record
    assert summary.frames == 2
    drive = Drive(sample_drive)
    drawn = 0
    for k in range(2):
        picture = cv2.imread(str(summary.camera_dir / f"{k:06d}.png"))
        if len(drive.read(k).labels):
            drawn += 1
            assert not np.array_equal(picture, drive.read(k).image)  # the boxes are drawn
    assert drawn
    columns = summary_columns(p, "log")
    assert [c.title for c in columns] == ["det"]
    assert columns[0].describe(np.zeros((3, 7), np.float32)) == "3 cuboids"


def test_overrides_follow_the_drive_role(tmp_path) -> None:
    p = user_pipeline(tmp_path / "x.jsonl")
    apply_cli_sources(p, replay=tmp_path)
    assert p.stage("drive").params["path"] == str(tmp_path.resolve())
    q = Pipeline("nodrive")
    q.add("det", "usertest.detector")
    with pytest.raises(UsageError, match="--replay given"):
        apply_cli_sources(q, replay=tmp_path)
    assert roles.drive_param("replay") == "path" and roles.live_op("bag") == "camera"
    assert roles.is_detector("usertest.detector") and not roles.is_detector("jsonl")
    assert roles.op_roles("no.such.op") == {} and roles.op_roles("nosuch.module:Op") == {}


def builtin_op_names(tree: ast.AST) -> list[int]:
    """Lines where code names a built-in op: a dotted op name anywhere but in a docstring, or a
    source op name (``replay``, ``bag``, ``camera``: also CLI words) in a comparison."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in DOTTED_OPS and \
                id(node) not in docstrings:
            lines.append(node.lineno)
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                lines += [item.lineno for item in items if isinstance(item, ast.Constant)
                          and item.value in SOURCE_OPS]
    return sorted(set(lines))


def test_no_module_outside_ops_names_a_builtin_op() -> None:
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "ops":
            continue
        text = path.read_text()
        hits += [f"{path.relative_to(REPO)}:{n}: {text.splitlines()[n - 1].strip()}"
                 for n in builtin_op_names(ast.parse(text))]
    assert not hits, "\n".join(hits)


def test_the_scan_finds_op_names() -> None:
    code = 'x = s.op == "replay"\nD = {"yolo.detect": 1}\ny = op in ("bag", "jsonl")\n'
    assert builtin_op_names(ast.parse(code)) == [1, 2, 3]
