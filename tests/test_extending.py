"""docs/extending.md, done the way it says: a throwaway op, sink and verb, each the example
block the page shows, written into the file the page names and registered the way the page says,
work end to end on the bundled sample drive; and the page lists at most 3 files for each kind.

"The file the page names" is inside the package (``cuvil_perception/ops/near_points.py``): the
test writes it into a temporary folder that it appends to the package's ``__path__``, so the
module is ``cuvil_perception.ops.near_points`` as it would be in the checkout. The op's
``pyproject.toml`` line becomes what installing writes from it: an ``entry_points.txt`` in a
``*.dist-info`` folder on ``sys.path``, which ``importlib.metadata`` reads like the installed
package's own; the registry then loads the entry points anew, as a fresh process does.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

import cuvil_perception.cli as cli_package
import cuvil_perception.ops as ops_package
from cuvil_perception.cli import app
from cuvil_perception.cli.app import cli
from cuvil_perception.drives import Drive
from cuvil_perception.graph import registry

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "extending.md"
SAMPLE = REPO / "datasets" / "sample_drive"
KINDS = ("an op", "a sink", "a verb", "a drive format", "a kernel")
NEW_MODULES = ("cuvil_perception.ops.near_points", "cuvil_perception.ops.counts_csv",
               "cuvil_perception.cli.frames_cmd")


def _page_blocks() -> list[tuple[str, str]]:
    """(the ``not run`` reason before it, its text) of every fenced block of the page."""
    text = PAGE.read_text(encoding="utf-8")
    return re.findall(r"<!-- not run: (.*?) -->\n```\w*\n(.*?)^```$", text, flags=re.S | re.M)


def example(name: str) -> str:
    """The example block whose ``not run`` reason starts with ``name`` (a file path)."""
    found = [body for reason, body in _page_blocks() if reason.startswith(name)]
    assert len(found) == 1, f"docs/extending.md: no single example block for {name}"
    return found[0]


def files_table() -> dict[str, dict[str, list[str]]]:
    """'an op' -> {"code": [paths], "docs": [paths], "test": [paths]}: the hand-edited files of
    its row (the ``regenerated`` column is not counted)."""
    rows = re.findall(r"^\| (an? [a-z ]+) \| (.*?) \| (.*?) \| (.*?) \| (.*?) \|$",
                      PAGE.read_text(encoding="utf-8"), flags=re.M)
    return {kind: {column: re.findall(r"`([^`]+)`", cell)
                   for column, cell in zip(("code", "docs", "test"), cells[:3])}
            for kind, *cells in rows if kind in KINDS}


def _entry_points_txt() -> str:
    """The pyproject lines of the op and the sink, as pip writes them into entry_points.txt."""
    lines = example("a line of pyproject.toml").strip().splitlines()
    group = re.fullmatch(r'\[project\.entry-points\."(.+)"\]', lines[0]).group(1)
    sink_line = re.search(r'`(counts_csv = "[^"]+")`', PAGE.read_text(encoding="utf-8")).group(1)
    entries = [line.replace('"', "") for line in (*lines[1:], sink_line)]
    return f"[{group}]\n" + "\n".join(entries) + "\n"


@pytest.fixture
def extended(tmp_path, monkeypatch):
    """The three example modules in the package, the op and sink entry points installed, the
    verb added: what the three files of each kind amount to in a fresh process."""
    registry.registered()  # the built-ins first, for good: their modules are imported once
    for package, name in ((ops_package, "near_points"), (ops_package, "counts_csv"),
                          (cli_package, "frames_cmd")):
        folder = tmp_path / "package" / package.__name__.rsplit(".", 1)[-1]
        folder.mkdir(parents=True, exist_ok=True)
        block = f"{package.__name__.replace('.', '/')}/{name}.py"  # the file the page names
        (folder / f"{name}.py").write_text(example(block), encoding="utf-8")
        if str(folder) not in package.__path__:
            monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    dist = tmp_path / "site" / "cuvil_extending_example-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: cuvil-extending-example\n"
                                   "Version: 0\n")
    (dist / "entry_points.txt").write_text(_entry_points_txt())
    monkeypatch.syspath_prepend(str(dist.parent))
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_loaded", False)  # a fresh process loads the entry points
    before = dict(cli.commands)
    app.add_verbs(cli)
    yield tmp_path
    cli.commands.clear()
    cli.commands.update(before)
    for name in NEW_MODULES:
        sys.modules.pop(name, None)


def _cli(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="cuvil-perception",
                              env={"COLUMNS": "200"})


def test_the_page_lists_at_most_three_files_for_each_kind():
    """Three files each, tests included, for an op, a sink, a verb, a drive format (whose
    docs table, like docs/ops.md, is regenerated, not written) and a kernel (whose throwaway
    one is tests/test_add_kernel.py's)."""
    table = files_table()
    assert sorted(table) == sorted(KINDS)
    for kind, columns in table.items():
        files = [name for column in ("code", "docs", "test") for name in columns[column]]
        for name in files:  # a file that exists, or a new one in a folder that does
            parts = Path(name).parts
            fixed = parts[:next((i for i, p in enumerate(parts) if "<" in p), len(parts))]
            assert fixed and REPO.joinpath(*fixed).exists(), f"docs/extending.md: {kind}: {name}"
        assert len(files) <= 3, f"docs/extending.md: {kind} touches {files}"
    assert table["an op"]["code"][1] == table["a sink"]["code"][1] == "pyproject.toml"
    assert table["a verb"]["code"] == ["cuvil_perception/cli/<verb>_cmd.py"]
    drive_page = (REPO / "docs" / "drive-format.md").read_text(encoding="utf-8")
    assert "**Adding a format touches 3 files:**" in drive_page
    assert table["a drive format"]["code"][1] == "cuvil_perception/drives/registry.py"
    assert table["a drive format"]["docs"] == []  # its row of the formats table is generated
    assert "`cuvil-perception ops --drive-formats`" in drive_page


def test_the_op_and_the_sink_run_in_a_pipeline_on_the_sample_drive(extended):
    yaml = example("needs the two example ops").replace("../datasets/sample_drive", str(SAMPLE))
    out = extended / "out" / "counts.csv"
    yaml = yaml.replace("../runs/near_points/counts.csv", str(out))
    (extended / "near.yaml").write_text(yaml)
    assert registry.lookup("example.near_points").__module__ == NEW_MODULES[0]
    assert _cli("inspect", str(extended / "near.yaml")).exit_code == 0
    done = _cli("run", str(extended / "near.yaml"), "--frames", "3")
    assert done.exit_code == 0, done.output
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["frame", "timestamp_ns", "all", "near"] and len(rows) == 4
    drive = Drive(SAMPLE)
    for k, row in enumerate(rows[1:]):
        frame = drive.read(k)
        points = frame.points
        near = int((np.hypot(points[:, 0], points[:, 1]) < np.float32(20)).sum())
        assert row == [str(k), str(frame.scan_ns), str(len(points)), str(near)]
        assert 0 < near < len(points)
    again = _cli("run", str(extended / "near.yaml"), "--frames", "1")  # its own earlier output
    assert again.exit_code == 0 and len(out.read_text().splitlines()) == 2, again.output
    out.unlink()  # the user's own file where the sink's was: the record beside it is not its
    out.write_text("frame,mine\n0,1\n")
    replaced = _cli("run", str(extended / "near.yaml"), "--frames", "1")
    assert replaced.exit_code == 2 and "counts.csv" in replaced.output, replaced.output
    assert out.read_text() == "frame,mine\n0,1\n"
    other = extended / "other.csv"  # a sink's path param is a protected run output
    other.write_text("someone else's file\n")
    refused = _cli("run", str(extended / "near.yaml"), "--frames", "1", "--set",
                   f"counts.path={other}")
    assert refused.exit_code == 2 and "other.csv" in refused.output, refused.output
    assert other.read_text() == "someone else's file\n"


def test_the_op_is_described_and_its_bad_values_refused_like_a_builtin(extended):
    shown = _cli("ops", "example.near_points")
    assert shown.exit_code == 0 and "max_range" in shown.output
    from cuvil_perception.cli.ops_markdown import ops_markdown

    page = ops_markdown()  # what `ops --markdown > docs/ops.md` regenerates
    assert "## `example.near_points`" in page and "## `example.counts_csv`" in page
    yaml = example("needs the two example ops").replace("../datasets/sample_drive", str(SAMPLE))
    (extended / "near.yaml").write_text(yaml)
    for value in ("nan", "-1", "1e300", "abc"):
        refused = _cli("inspect", str(extended / "near.yaml"), "--set", f"near.max_range={value}")
        assert refused.exit_code == 2, (value, refused.output)
        assert "max_range" in refused.output and "Traceback" not in refused.output


def test_the_verb_runs_from_the_cli_and_refuses_bad_usage_with_exit_2(extended):
    done = _cli("frames", str(SAMPLE))
    assert done.exit_code == 0, done.output
    drive = Drive(SAMPLE)
    span = (drive.lidar.stamps[drive.pairs[-1][0]] - drive.lidar.stamps[drive.pairs[0][0]]) / 1e9
    assert done.output == f"{SAMPLE}: {len(drive)} frames over {span:.3f} s\n"
    shown = _cli("frames", "--help")
    assert shown.exit_code == 0 and "--sync-ms" in shown.output
    for args in ((), ("--bogus", str(SAMPLE)), ("--sync-ms", "nan", str(SAMPLE)),
                 ("--sync-ms", "-1", str(SAMPLE)), (str(extended / "no_such_drive"),)):
        refused = _cli("frames", *args)
        assert refused.exit_code == 2, (args, refused.output)
        assert refused.output.startswith("error: ") and refused.output.count("\n") == 1, (
            args, refused.output)


def test_the_verb_section_is_all_docs_cli_md_needs(extended, tmp_path, monkeypatch):
    """The docs/cli.md check passes with the page's section added and fails without it."""
    import test_docs

    section = example("the docs/cli.md section").replace("~~~", "```")
    page = tmp_path / "cli.md"
    page.write_text(test_docs.CLI_PAGE.read_text(encoding="utf-8"))
    monkeypatch.setattr(test_docs, "CLI_PAGE", page)
    with pytest.raises(AssertionError, match="no section for `cuvil-perception frames`"):
        test_docs.test_every_verb_and_option_is_in_docs_cli_md()
    page.write_text(page.read_text(encoding="utf-8") + "\n" + section)
    test_docs.test_every_verb_and_option_is_in_docs_cli_md()
    usage = re.search(r"```sh\n(.*?)\n```", section, flags=re.S).group(1)
    assert _cli(*usage.split()[1:]).exit_code == 0


def test_every_cmd_module_is_a_verb_and_a_broken_one_fails_loudly(tmp_path, monkeypatch):
    modules = app.verb_modules()
    assert len(modules) == len(cli.commands) >= 15
    assert sorted(m[:-len("_cmd")].replace("_", "-") for m in modules) == sorted(cli.commands)
    folder = tmp_path / "cli"
    folder.mkdir()
    monkeypatch.setattr(cli_package, "__path__", [*cli_package.__path__, str(folder)])
    (folder / "misnamed_cmd.py").write_text(
        "import click\n\n@click.command('other')\ndef other():\n    pass\n")
    group = click.Group()
    try:
        with pytest.raises(TypeError, match="misnamed_cmd must define exactly one click "
                                            "command named 'misnamed'"):
            app.add_verbs(group)
        (folder / "misnamed_cmd.py").write_text("import no_such_module_for_a_verb\n")
        sys.modules.pop("cuvil_perception.cli.misnamed_cmd", None)
        with pytest.raises(ModuleNotFoundError, match="no_such_module_for_a_verb"):
            app.add_verbs(group)
    finally:
        sys.modules.pop("cuvil_perception.cli.misnamed_cmd", None)
