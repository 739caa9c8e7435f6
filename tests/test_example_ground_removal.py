"""The custom-op tutorial (docs/custom-kernel-op.md): the example ground-removal kernel against
its numpy twin, its op on the sample drive through ``op: package.module:Class``, bad params, and
op plugins (entry points, import paths)."""

from __future__ import annotations

import json
import os
import re
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.errors import PipelineError
from cuvil_perception.graph import Pipeline, load_pipeline, plugins, register

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "custom-kernel-op.md"
sys.path.insert(0, str(EXAMPLES))
from ground_removal import reference  # noqa: E402
from ground_removal.kernel import remove_ground  # noqa: E402

STATIC = dict(x0=0.0, y0=-39.68, cell=1.0, nx=70, ny=80, height=0.25, capacity=4096,
              cells=70 * 80)
NAN, INF = float("nan"), float("inf")


def _both(points: np.ndarray, **static):
    """(native, reference, interpreted) results: (passed, out, lowest) each."""
    runs = []
    for fn in (remove_ground, reference.remove_ground, remove_ground.py_func):
        low = np.zeros(static["cells"], np.float32)
        out = np.zeros((static["capacity"], 4), np.float32)
        with np.errstate(invalid="ignore"):  # inf - inf in the interpreted kernel
            runs.append((fn(points, len(points), low, out, **static), out, low))
    return runs


def _random_points(rng, n: int) -> np.ndarray:
    pts = np.column_stack([rng.uniform(-5, 75, n), rng.uniform(-45, 45, n),
                           rng.uniform(-3, 1, n), rng.uniform(0, 1, n)]).astype(np.float32)
    pts[rng.choice(n, 20, replace=False), rng.integers(0, 3, 20)] = NAN
    pts[rng.choice(n, 5, replace=False), 2] = INF
    return pts


@pytest.mark.parametrize("seed", [0, 1])
def test_kernel_equals_numpy_twin_on_random_points(seed):
    native, ref, _ = _both(_random_points(np.random.default_rng(seed), 3000), **STATIC)
    assert native[0] == ref[0] and 0 < native[0] < 3000
    np.testing.assert_array_equal(native[1], ref[1])  # exact: only float32 +, -, / and moves
    np.testing.assert_array_equal(native[2], ref[2])


def test_interpreted_kernel_equals_compiled_on_small_input():
    native, _, interpreted = _both(_random_points(np.random.default_rng(5), 200),
                                   **{**STATIC, "capacity": 50, "height": 0.0})
    assert native[0] == interpreted[0] > 50  # overflow: only the first 50 are written
    np.testing.assert_array_equal(native[1], interpreted[1])


def test_kernel_equals_numpy_twin_on_real_kitti(kitti_frames):
    for path in kitti_frames[:3]:
        points = np.fromfile(path, np.float32).reshape(-1, 4)
        native, ref, _ = _both(points, **{**STATIC, "capacity": len(points)})
        assert native[0] == ref[0] and native[0] < len(points)
        np.testing.assert_array_equal(native[1], ref[1])


def _config(repo_root, tmp_path, **params) -> Path:
    text = (EXAMPLES / "ground_removal.yaml").read_text()
    text = text.replace("../runs/ground_removal/points.jsonl", str(tmp_path / "out.jsonl"))
    text = text.replace("../datasets/", f"{repo_root}/datasets/")
    for name, value in params.items():
        text = text.replace("      height: 0.25", f"      height: 0.25\n      {name}: {value}")
    path = EXAMPLES / f".test-{tmp_path.name}.yaml"  # beside the package: imported by path
    path.write_text(text)
    return path


@pytest.mark.parametrize("debug", [False, True])
def test_tutorial_config_runs_on_the_sample_drive(repo_root, tmp_path, monkeypatch, debug):
    """Also bounds-checked (``CUVIL_KERNEL_DEBUG=1``): the op calls its kernel unchanged."""
    from cuvil_perception.rt import RunOptions, run_pipeline

    monkeypatch.setenv("CUVIL_KERNEL_DEBUG", "1" if debug else "0")
    config = _config(repo_root, tmp_path)
    try:
        result = run_pipeline(load_pipeline(config),
                              RunOptions(frames=2, workers=1, write_record=False))
    finally:
        config.unlink()
    assert result.compiles_after_frame0 == 0
    assert [r["name"] for r in result.prewarm] == ["example.ground_removal"]
    assert result.prewarm[0]["static"].startswith("_debug=true") == debug
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(lines) == 2
    kept = lines[0]["outputs"]["points"]["shape"]
    assert kept[1] == 4 and 1000 < kept[0]


@pytest.mark.parametrize("name, value, message", [
    ("cell", NAN, "must be a finite number"),
    ("cell", INF, "must be a finite number"),
    ("cell", 0.0, "must be in (0, 1000] m, got 0"),
    ("cell", 1e-4, "cells is more than"),
    ("cell", "x", "must be a number"),
    ("height", NAN, "must be a finite number"),
    ("height", -1.0, "must be in [0, 1000] m, got -1"),
    ("capacity", 0, "must be in [1, 10000000], got 0"),
    ("capacity", 10**12, "must be in [1, 10000000]"),
    ("x_range", [5.0, 5.0], "low < high"),
    ("x_range", [NAN, 5.0], "must be a finite number"),
    ("x_range", [-1e308, 1e308], "item 0 must be in [-1000, 1000] m"),  # was an OverflowError
    ("cell", 5e-324, "cells is more than"),  # 69.12 / cell overflows: was an OverflowError
    ("y_range", [], "length 2"),
])
def test_bad_params_name_the_field(name, value, message):
    p = Pipeline("bad")
    p.add("drive", "replay", path="datasets/sample_drive")
    p.add("ground", "ground_removal.op:GroundRemoval", inputs={"points": "drive/points"},
          **{name: value})
    with pytest.raises(PipelineError) as info:
        p.validate()
    assert name in str(info.value) and message in str(info.value)


@pytest.mark.parametrize("path, message", [
    ("no_such_pkg.ops:Thing", "cannot import 'no_such_pkg.ops'"),
    ("ground_removal.op:Missing", "has no attribute 'Missing'"),
    ("json:loads", "is not an Op subclass"),
    ("ground_removal.op:", "write package.module:Class"),
])
def test_op_import_path_errors_are_pipeline_errors(path, message):
    p = Pipeline("bad")
    p.add("drive", "replay", path="datasets/sample_drive")
    p.add("x", path, inputs={"points": "drive/points"})
    with pytest.raises(PipelineError, match=message) as info:
        p.validate()
    assert "stage 'x'" in str(info.value) and "'op'" in str(info.value)


def test_entry_points_register_ops_and_a_broken_plugin_only_warns(monkeypatch):
    from cuvil_perception.graph.op import Op

    class _Plugin(Op):
        name = "test.plugin_from_entry_point"

    module = type(sys)("fake_plugin_pkg")
    module.Plugin = _Plugin
    monkeypatch.setitem(sys.modules, "fake_plugin_pkg", module)
    builtin = list(metadata.entry_points(group=plugins.GROUP))
    eps = builtin + [metadata.EntryPoint("good", "fake_plugin_pkg:Plugin", plugins.GROUP),
                     metadata.EntryPoint("broken", "fake_missing_pkg_xyz", plugins.GROUP)]
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: eps)
    with pytest.warns(UserWarning, match="op plugin 'broken'"):
        names = plugins.load_entry_points(register)
    assert names == [ep.name for ep in builtin] + ["good", "broken"]
    from cuvil_perception.graph import lookup
    assert lookup("test.plugin_from_entry_point") is _Plugin


def test_a_stale_install_without_the_builtin_entry_points_says_how_to_fix_it(monkeypatch):
    from cuvil_perception.errors import UsageError
    from cuvil_perception.graph import register

    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: [])
    with pytest.raises(UsageError, match="declares no built-in ops.*reinstall"):
        plugins.load_entry_points(register)


def test_a_builtin_op_module_that_fails_to_import_is_raised_not_skipped(monkeypatch):
    from cuvil_perception.graph import register

    eps = [metadata.EntryPoint("gone", "cuvil_perception.ops.no_such_module", plugins.GROUP)]
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: eps)
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        plugins.load_entry_points(register)


def test_builtin_ops_are_entry_points_and_graph_does_not_import_ops():
    declared = {ep.value for ep in metadata.entry_points(group=plugins.GROUP)}
    assert "cuvil_perception.ops.pillars" in declared and "cuvil_perception.ops.yolo" in declared
    graph = Path(plugins.__file__).parent
    for source in graph.glob("*.py"):
        text = source.read_text()
        assert "from .. import ops" not in text and "from ..ops" not in text, source.name


def test_fleet_runs_an_op_named_by_path_beside_the_pipeline(repo_root, tmp_path):
    """A fleet worker is a clean interpreter: the tutorial op, imported by path from the
    pipeline file's folder (not installed, not on sys.path), must resolve there as in `run`."""
    import shutil
    import subprocess

    shutil.copytree(EXAMPLES / "ground_removal", tmp_path / "ground_removal",
                    ignore=shutil.ignore_patterns("__pycache__"))
    text = (EXAMPLES / "ground_removal.yaml").read_text()
    text = text.replace("../runs/ground_removal/points.jsonl", "points.jsonl")
    (tmp_path / "p.yaml").write_text(text.replace("../datasets/", f"{repo_root}/datasets/"))
    env = dict(os.environ, PYTHONPATH=str(repo_root))  # this checkout; examples/ not on it
    elsewhere = tmp_path / "elsewhere"  # the working folder (on sys.path with -m) is not it
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, "-m", "cuvil_perception", "fleet", "run",
                           str(tmp_path / "p.yaml"), str(repo_root / "datasets" / "sample_drive"),
                           "--out", str(tmp_path / "fleet"), "--local", "1"], cwd=elsewhere,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in
            (tmp_path / "fleet" / "results.jsonl").read_text().splitlines()[1:]]
    assert [row["status"] for row in rows] == ["ok"], rows


def _typed_files() -> dict[str, str]:
    """The files docs/custom-kernel-op.md tells a user to type, from its fenced blocks."""
    blocks = re.findall(r"^```(\w+)\n(.*?)^```", TUTORIAL.read_text(), re.S | re.M)
    python = [text for kind, text in blocks if kind == "python"]
    yaml = [text for kind, text in blocks if kind == "yaml"]
    files = {"reference.py": python[0], "kernel.py": python[1], "op.py": python[2],
             "test_ground_removal.py": python[3], "ground_removal.yaml": yaml[0],
             "budgets.yaml": yaml[1]}
    for name, marker in (("reference.py", "def remove_ground("), ("kernel.py", "@kernel("),
                         ("op.py", "class GroundRemoval"), ("test_ground_removal.py", "def test_"),
                         ("ground_removal.yaml", "stages:"), ("budgets.yaml", "budgets:")):
        assert marker in files[name], f"the tutorial's blocks moved: {name}"
    return files


def test_the_tutorial_typed_as_written_runs(repo_root, tmp_path, monkeypatch):
    """A newcomer's package typed from the page (op.py is the example's): its test passes, and
    its pipeline runs and benches on the sample drive with no compile after prewarm. The page
    once showed an op excerpt with `...` and undefined names, which nobody could type."""
    from click.testing import CliRunner

    from cuvil_perception.cli.app import cli

    files = _typed_files()
    assert files["op.py"] == (EXAMPLES / "ground_removal" / "op.py").read_text()
    package = tmp_path / "tutorial_typed"  # its own names: the example registers beside it
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in ("reference.py", "kernel.py", "op.py"):
        (package / name).write_text(files[name].replace("example.ground_removal",
                                                        "example.tutorial_typed"))
    monkeypatch.syspath_prepend(str(tmp_path))
    test: dict = {}
    exec(compile(files["test_ground_removal.py"].replace("ground_removal", "tutorial_typed"),
                 "test_ground_removal.py", "exec"), test)
    test["test_kernel_equals_numpy_twin"]()
    (tmp_path / "ground_removal.yaml").write_text(files["ground_removal.yaml"].replace(
        "op: example.ground_removal", "op: tutorial_typed.op:GroundRemoval"))
    (tmp_path / "budgets.yaml").write_text(files["budgets.yaml"])
    drive = str(repo_root / "datasets" / "sample_drive")
    pipeline = str(tmp_path / "ground_removal.yaml")
    run = CliRunner().invoke(cli, ["run", pipeline, "--replay", drive, "--frames", "2"])
    assert run.exit_code == 0, run.output
    assert "0 compile(s) after frame 0" in run.output
    assert len((tmp_path / "runs" / "points.jsonl").read_text().splitlines()) == 2
    bench = CliRunner().invoke(cli, ["bench", pipeline, "--replay", drive, "--budgets",
                                     str(tmp_path / "budgets.yaml"), "--frames", "2"])
    assert bench.exit_code in (0, 1), bench.output  # 1: a breach on a loaded machine
    assert "p50 <= 0.7 x ground_numpy" in bench.output


def test_an_op_whose_package_is_not_installed_says_how_ops_get_registered():
    """After `pip uninstall` of a plugin, its op name is unknown: say where names come from."""
    p = Pipeline("gone")
    p.add("drive", "replay", path="datasets/sample_drive")
    p.add("ground", "example.uninstalled_plugin_op", inputs={"points": "drive/points"})
    with pytest.raises(PipelineError, match=r"unknown op 'example.uninstalled_plugin_op'; "
                                            r"`cuvil-perception ops` lists the registered ops "
                                            r"\(an op of another package is registered while "
                                            r"that package is installed\)"):
        p.validate()
