"""Roles: a user's own detector op (defined here, not in the package) is scored by ``eval``,
drawn by ``render`` and summarised by ``run --summary`` through the roles it declares, and no
module outside ops/ decides by a built-in op's name."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from cuvil_perception.drives import Drive
from cuvil_perception.errors import UsageError
from cuvil_perception.eval import evaluate_pipeline
from cuvil_perception.graph import (Op, Param, Pipeline, PortSpec, Sink, apply_cli_sources,
                                    register, registered, roles)

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


@register
class UserRunLog(Sink):
    """A user's run log: one line per frame in the run-log schema, to its own ``file`` param."""

    name = "usertest.runlog"
    sink_roles = {"run_log": "file"}
    params = (Param("file", Path, Path("log.jsonl"), "where the lines go"),)

    def open(self, ctx) -> None:
        Path(self.p["file"]).parent.mkdir(parents=True, exist_ok=True)
        self._out = open(self.p["file"], "w", encoding="utf-8")

    def process(self, inputs, frame):
        outputs = {name: {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.tolist()}
                   for name, a in inputs.items()}
        self._out.write(json.dumps({"frame": frame.index, "timestamp_ns": frame.timestamp_ns,
                                    "stamps": frame.stamps, "stale": frame.stale,
                                    "outputs": outputs}) + "\n")
        return {}

    def close(self) -> None:
        if getattr(self, "_out", None) is not None:
            self._out.close()


def user_pipeline(out: Path, sink: str = "jsonl", param: str = "path") -> Pipeline:
    p = Pipeline("user")
    p.add("drive", "replay", path=str(SAMPLE))
    p.add("det", "usertest.detector", inputs={"truth": "drive/labels"})
    p.add("log", sink, **{param: str(out)}, inputs={
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


def test_user_run_log_gets_out_summary_and_pictures(sample_drive, tmp_path) -> None:
    from cuvil_perception.cli.frame_summary import run_summaries
    from cuvil_perception.rt import RunOptions, run_pipeline
    from cuvil_perception.viz import render_result

    out = tmp_path / "run" / "mine.jsonl"
    p = apply_cli_sources(user_pipeline(tmp_path / "x", "usertest.runlog", "file"), out=out)
    assert p.stage("log").params["file"] == str(out.resolve())  # --out
    result = run_pipeline(p.validate(), RunOptions(frames=2, enforce_deadlines=False))
    assert [o["stage"] for o in roles.run_logs(result.outputs)] == ["log"]
    assert result.record_path == out.with_name("mine.jsonl.record.json")
    record = json.loads(result.record_path.read_text())
    assert list(record["output_digests"]) == [str(out.resolve())]
    tables = run_summaries(p, result.outputs)  # --summary
    assert [[c.header for c in t.columns] for t in tables] == [["frame", "t (s)", "det"]]
    drive = Drive(sample_drive)
    assert list(tables[0].columns[2].cells) == [f"{len(drive.read(k).labels)} cuboids"
                                                for k in range(2)]
    summary = render_result(p, result, tmp_path / "viz", video=False)  # --viz, then render
    assert summary.frames == 2 and (summary.camera_dir / "000001.png").is_file()
    pictures = [cv2.imread(str(summary.camera_dir / f"{k:06d}.png")) for k in range(2)]
    assert any(len(drive.read(k).labels) and not np.array_equal(pictures[k], drive.read(k).image)
               for k in range(2))


def test_sink_roles() -> None:
    assert roles.sink_param("jsonl", roles.RUN_LOG) == "path"
    assert roles.sink_param("usertest.runlog", roles.RUN_LOG) == "file"
    assert roles.sink_param("mcap", roles.LIVE_VIEW) == "live"
    assert roles.sink_param("mcap", roles.RUN_LOG) is None
    assert roles.sink_param("no.such.op", roles.RUN_LOG) is None
    # the op a stage is added of (eval's capture, --foxglove): ours, though a user's plays it too
    assert roles.sink_op(roles.RUN_LOG) == "jsonl" and roles.sink_op(roles.LIVE_VIEW) == "mcap"
    assert roles.sink_op("no_such_role") is None
    outputs = [{"stage": "a", "op": "jsonl", "param": "path", "path": "a.jsonl"},
               {"stage": "b", "op": "png", "param": "dir", "path": "frames"},
               {"stage": "c", "op": "usertest.runlog", "param": "file", "path": "c.jsonl"},
               {"stage": "d", "op": "no.such.op", "param": "path", "path": "d.jsonl"}]
    assert [o["stage"] for o in roles.run_logs(outputs)] == ["a", "c"]


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


def builtin_ops() -> set[str]:
    """Every op name this package registers (``jsonl``, ``mcap``, ``png``, ``replay``, ...)."""
    return {name for name, cls in registered().items()
            if cls.__module__.startswith("cuvil_perception.")}


def _constants(node: ast.AST) -> list[ast.Constant]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [item for item in items if isinstance(item, ast.Constant)]


def _is_op_ref(node: ast.AST) -> bool:
    """``x.op``, ``x["op"]``, ``x.get("op")``, or a variable ``op`` / ``op_name``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "op"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "op"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "get" and bool(node.args) and \
            isinstance(node.args[0], ast.Constant) and node.args[0].value == "op"
    return isinstance(node, ast.Name) and node.id in ("op", "op_name")


def _ops_used_as_ops(node: ast.AST) -> list[ast.Constant]:
    """Constants that stand where an op name goes: compared with an op reference, given as
    ``pipeline.add(id, OP, ...)``'s op, or assigned to an op reference."""
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        if any(_is_op_ref(side) for side in sides):
            return [c for side in sides for c in _constants(side)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "add":
        return _constants(node.args[1]) if len(node.args) > 1 else \
            [c for k in node.keywords if k.arg == "op" for c in _constants(k.value)]
    if isinstance(node, ast.Assign) and any(_is_op_ref(t) for t in node.targets):
        return _constants(node.value)
    return []


def builtin_op_names(tree: ast.AST, ops: set[str] | None = None) -> list[int]:
    """Lines where code names a built-in op: a dotted op name anywhere but in a docstring, a
    source op name (``replay``, ``bag``, ``camera``: also CLI words) in a comparison, or any
    built-in op name (``jsonl``, ``mcap``, ...: also file formats) used as an op."""
    ops = builtin_ops() if ops is None else ops
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in DOTTED_OPS and \
                id(node) not in docstrings:
            lines.append(node.lineno)
        if isinstance(node, ast.Compare):
            lines += [c.lineno for side in [node.left, *node.comparators]
                      for c in _constants(side) if c.value in SOURCE_OPS]
        lines += [c.lineno for c in _ops_used_as_ops(node) if c.value in ops]
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
    assert {"jsonl", "mcap", "png", "replay"} <= builtin_ops()
    as_ops = ('a = [s for s in p.stages if s.op == "jsonl"]\n'
              'b = o["op"] != "jsonl"\n'
              'c = stage.get("op") in ("png", "mcap")\n'
              'p.add("live", "mcap", inputs={}, live=x)\n'
              'p.add("cap", op="jsonl")\n'
              'stage.op = "mcap"\n')
    assert builtin_op_names(ast.parse(as_ops)) == [1, 2, 3, 4, 5, 6]
    formats = ('kind = "mcap"\nok = kind == "mcap" or path.suffix == ".jsonl"\n'
               'F = {"mcap": 1}\nfmt in ("mcap", "sqlite3")\nparts.add("jsonl")\n')
    assert builtin_op_names(ast.parse(formats)) == []
