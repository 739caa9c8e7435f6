"""A user op's mistakes through the CLI: a kernel that does not compile (one line at the kernel's
file:line:col, exit 2) and a ``kernels()`` that raises (one line naming the stage, the op class
and the exception, exit 1 like an op whose ``open()`` raises). The op is the tutorial's example
(examples/ground_removal) copied under another name and broken on purpose."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cuvil_perception.cli.app import cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
KEPT = "    kept = 0\n"
KERNELS = "        return [remove_ground.spec(**self.static())]\n"


def _broken_op(repo_root: Path, tmp_path: Path, package: str, old: str, new: str,
               file: str) -> Path:
    """The example package copied as ``package`` (op and kernel renamed, so it registers beside
    the original) with ``old`` replaced by ``new`` in ``file``; returns its pipeline file."""
    shutil.copytree(EXAMPLES / "ground_removal", tmp_path / package)
    for path in (tmp_path / package).glob("*.py"):
        text = path.read_text().replace("example.ground_removal", f"example.{package}")
        if path.name == file:
            assert old in text
            text = text.replace(old, new)
        path.write_text(text)
    config = (EXAMPLES / "ground_removal.yaml").read_text()
    config = config.replace("ground_removal.op:GroundRemoval", f"{package}.op:GroundRemoval")
    config = config.replace("../datasets/", f"{repo_root}/datasets/")
    config = config.replace("../runs/ground_removal/points.jsonl", str(tmp_path / "out.jsonl"))
    (tmp_path / "pipeline.yaml").write_text(config)
    return tmp_path / "pipeline.yaml"


def _error_lines(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.strip()]


@pytest.mark.parametrize("verb", [["compile"], ["run", "--frames", "1"], ["inspect"]])
def test_kernel_source_error_is_file_line_with_caret_and_exit_2(repo_root, tmp_path, verb):
    """One error line naming file:line:col, then the source line and a caret under the column
    (as a compiler prints it), no traceback."""
    package = f"user_op_source_{verb[0]}"
    config = _broken_op(repo_root, tmp_path, package, KEPT, KEPT + '    kept = "x"\n',
                        "kernel.py")
    result = CliRunner().invoke(cli, [verb[0], str(config), *verb[1:]])
    kernel = tmp_path / package / "kernel.py"
    line = kernel.read_text().splitlines().index('    kept = "x"') + 1
    assert result.exit_code == 2, result.output
    assert _error_lines(result) == [f"error: {kernel}:{line}:12: in kernel remove_ground: "
                                    f"a str constant; write a number instead",
                                    '    kept = "x"',
                                    "           ^"]
    assert "Traceback" not in result.output


@pytest.mark.parametrize("verb", [["compile"], ["run", "--frames", "1"]])
def test_kernels_method_raising_names_stage_and_op(repo_root, tmp_path, verb):
    package = f"user_op_kernels_{verb[0]}"
    config = _broken_op(repo_root, tmp_path, package, KERNELS,
                        "        return [1 // (self.p['capacity'] - self.p['capacity'])]\n",
                        "op.py")
    result = CliRunner().invoke(cli, [verb[0], str(config), *verb[1:]])
    assert result.exit_code == 1, result.output
    assert _error_lines(result) == [
        f"error: stage 'ground' (op {package}.op:GroundRemoval): kernels() raised "
        f"ZeroDivisionError: integer division or modulo by zero"]
    assert isinstance(result.exception, SystemExit)


def test_check_method_raising_is_one_line_at_the_stage_and_exit_2(repo_root, tmp_path):
    """A bug in an op's check() set off by a param value (the example's grid of a huge range
    was an OverflowError): `inspect` rejects it as `run` would, at the stage, no traceback."""
    check = "    def check(self) -> None:\n"
    config = _broken_op(repo_root, tmp_path, "user_op_check", check,
                        check + "        1 // (self.p['capacity'] - self.p['capacity'])\n",
                        "op.py")
    line = config.read_text().splitlines().index("      cell: 1.0") + 1  # the params
    for verb in (["inspect"], ["run", "--frames", "1"]):
        result = CliRunner().invoke(cli, [verb[0], str(config), *verb[1:]])
        assert result.exit_code == 2, result.output
        assert _error_lines(result) == [
            f"error: {config}:{line}:7: stage 'ground': field 'params': op "
            f"user_op_check.op:GroundRemoval: check() raised ZeroDivisionError: integer "
            f"division or modulo by zero (a bad value should raise ParamProblem(name, reason))"]
