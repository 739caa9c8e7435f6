"""Documentation that is executed: every fenced block of README.md, docs/*.md, datasets/README.md
and the model card runs here, and docs/cli.md documents every option of every verb.

Blocks by their info string:

* ``python``: executed, in a scratch folder where ``configs``, ``datasets`` and
  ``cuvil_perception`` point into the repository (so the snippet's relative paths work and what
  it writes stays out of the checkout);
* ``yaml``: a pipeline (``stages:``) is loaded and validated with the strict loader (paths
  relative to ``configs/``) and its ``rt:`` block checked; a fragment of pipeline fields is
  validated inside a one-stage pipeline; a budgets file (``budgets:``) is parsed;
* ``sh``: every ``cuvil-perception ...`` line is parsed by the real command tree (verb, options,
  option values and arguments must all be valid); the cheap ones (``ops``, ``inspect`` without
  ``--profile``, ``cache info``, ``convert``, ``bag info``, ``--version``, ``make-drive`` of
  <= 2 frames into a new folder, ``run`` with ``--frames`` <= 4) are also run in order (a later
  line may read what an earlier one wrote) and must exit 0. ``[...]`` marks optional parts
  (parsed with them), ``#`` starts a comment, a trailing ``\\`` continues the line;
* ``json``: parsed; ``text``: a layout or output listing, not run.

A block that cannot run here (a live camera, an hour of training) is preceded by a visible
``<!-- not run: REASON -->`` line; the reason must not be empty.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cuvil_perception.cli.app import cli

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "datasets" / "README.md",
        REPO / "cuvil_perception" / "models" / "MODEL_CARD.md"]
CLI_PAGE = REPO / "docs" / "cli.md"
KINDS = ("python", "yaml", "sh", "json", "text")
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    kind: str
    text: str
    not_run: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of ``doc``, with the ``not run`` mark of the line before each."""
    found, lines = [], doc.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        mark = NOT_RUN.search(previous)
        found.append(Block(doc, index + 1, match.group(1), "\n".join(lines[index + 1:end]) + "\n",
                           mark.group(1) if mark else None))
        index = end + 1
    return found


ALL_BLOCKS = [block for doc in DOCS for block in blocks(doc)]


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    """A working folder whose configs/, datasets/ and cuvil_perception/ are the repository's."""
    for name in ("configs", "datasets", "cuvil_perception"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_block_is_labelled_and_every_skip_says_why():
    for block in ALL_BLOCKS:
        assert block.kind in KINDS, (f"{block.where}: label the block ```{' or ```'.join(KINDS)}"
                                     f" (got ```{block.kind})")
        if block.not_run is not None:
            assert block.not_run, f"{block.where}: '<!-- not run: -->' needs a reason"
    assert len([b for b in ALL_BLOCKS if b.not_run is None and b.kind != "text"]) >= 15


def _ids(kind: str) -> tuple[list[Block], list[str]]:
    chosen = [b for b in ALL_BLOCKS if b.kind == kind and b.not_run is None]
    return chosen, [b.where for b in chosen]


PYTHON, PYTHON_IDS = _ids("python")
YAML, YAML_IDS = _ids("yaml")
SHELL, SHELL_IDS = _ids("sh")
JSON, JSON_IDS = _ids("json")


@pytest.mark.parametrize("block", PYTHON, ids=PYTHON_IDS)
def test_python_snippet_runs(block, scratch):
    """Run from a file, so code that reads its own source (kernels) finds it."""
    import runpy

    path = scratch / f"snippet_{block.doc.stem}_{block.line}.py".replace("-", "_")
    path.write_text(block.text, encoding="utf-8")
    runpy.run_path(str(path), run_name="__doc_snippet__")


@pytest.mark.parametrize("block", YAML, ids=YAML_IDS)
def test_yaml_example_loads(block):
    import yaml

    from cuvil_perception.graph import parse_pipeline
    from cuvil_perception.graph.yaml_loader import PIPELINE_FIELDS
    from cuvil_perception.rt.budgets import parse_budgets
    from cuvil_perception.rt.knobs import parse_knobs

    data = yaml.safe_load(block.text)
    assert isinstance(data, dict), f"{block.where}: a YAML example is a mapping"
    if "budgets" in data:
        parse_budgets(block.text, REPO / "configs" / "example.budgets.yaml")
        return
    text = block.text
    if "stages" not in data:
        assert set(data) <= set(PIPELINE_FIELDS), f"{block.where}: unknown fields {set(data)}"
        text += "stages:\n  - {id: drive, op: replay}\n"
    pipeline = parse_pipeline(text, block.where, base_dir=REPO / "configs").validate()
    parse_knobs(pipeline)


@pytest.mark.parametrize("block", JSON, ids=JSON_IDS)
def test_json_example_parses(block):
    json.loads(block.text)


def commands(text: str) -> list[list[str]]:
    """The ``cuvil-perception`` command lines of a shell block, as argument lists."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in joined.splitlines():
        words = shlex.split(line.replace("[", " ").replace("]", " "), comments=True)
        if words and words[0] == "cuvil-perception":
            found.append(words[1:])
        elif words:
            raise AssertionError(f"not a cuvil-perception command: {line!r} (mark the block "
                                 f"'<!-- not run: REASON -->' if it cannot run here)")
    return found


def resolve(args: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """(command, its arguments, the verb path) for ``cuvil-perception ARGS``."""
    command, rest, path = cli, list(args), []
    while isinstance(command, click.Group) and rest and rest[0] in command.commands:
        path.append(rest[0])
        command = command.commands[rest.pop(0)]
    return command, rest, path


def _cheap(args: list[str]) -> bool:
    command, rest, path = resolve(args)
    if path in (["ops"], ["cache", "info"], ["convert"], ["bag", "info"]) or args == ["--version"]:
        return True
    if path == ["make-drive"]:  # small, and never into an existing folder (datasets/...)
        return "--frames" in rest and int(rest[rest.index("--frames") + 1]) <= 2 \
            and not Path(rest[0]).exists()
    if path == ["inspect"]:
        return "--profile" not in rest
    if path == ["run"] and "--frames" in rest:
        return int(rest[rest.index("--frames") + 1]) <= 4
    return False


@pytest.mark.parametrize("block", SHELL, ids=SHELL_IDS)
def test_shell_commands_parse_and_the_cheap_ones_run(block, scratch):
    lines = commands(block.text)
    assert lines, f"{block.where}: no cuvil-perception command in the block"
    for args in lines:
        command, rest, path = resolve(args)
        if isinstance(command, click.Group):
            assert args == ["--version"], f"{block.where}: {args}: no such verb"
        else:
            try:
                command.make_context(" ".join(["cuvil-perception", *path]), list(rest))
            except click.ClickException as exc:
                raise AssertionError(f"{block.where}: cuvil-perception {shlex.join(args)}: "
                                     f"{exc.format_message()}") from None
        if _cheap(args):
            result = CliRunner().invoke(cli, args, prog_name="cuvil-perception")
            assert result.exit_code == 0, (f"{block.where}: cuvil-perception {shlex.join(args)} "
                                           f"exited {result.exit_code}: {result.output}")


def test_relative_links_point_to_files():
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    for doc in DOCS:
        for target in link.findall(doc.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (doc.parent / target).exists(), f"{doc.relative_to(REPO)}: {target}"


# -- docs/cli.md: one reference page for every option of every verb --------------------------

def _walk(command: click.Command, path: tuple[str, ...] = ()):
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(sub, path + (name,))


def _sections() -> dict[str, str]:
    """'cuvil-perception run' -> the text of its ``## cuvil-perception run`` section."""
    text = CLI_PAGE.read_text(encoding="utf-8")
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _documented(section: str) -> set[str]:
    """First words of the table rows: `--rate R` -> --rate, `PIPELINE` -> PIPELINE."""
    names = set()
    for cell in re.findall(r"^\| `([^`]+)`", section, flags=re.M):
        names.add(cell.split()[0])
    return names


def _expected(command: click.Command) -> set[str]:
    names = set()
    for param in command.params:
        if isinstance(param, click.Argument):
            names.add(param.human_readable_name)
        else:
            names.update(o for o in (*param.opts, *param.secondary_opts)
                         if o.startswith("--") and o != "--help")
    return names


def test_every_verb_and_option_is_in_docs_cli_md():
    sections = _sections()
    problems = []
    for path, command in _walk(cli):
        title = " ".join(("cuvil-perception",) + path)
        if title not in sections:
            problems.append(f"docs/cli.md has no section for `{title}`: add '## {title}' with "
                            f"what it does, a usage example in a ```sh block and a table "
                            f"'| argument / option | meaning |'")
            continue
        documented, expected = _documented(sections[title]), _expected(command)
        for name in sorted(expected - documented):
            problems.append(f"docs/cli.md: `{title}` {name} is not documented: add a row "
                            f"'| `{name} ...` | what it does, its default |' to the table under "
                            f"'## {title}'")
        for name in sorted(n for n in documented - expected if n.startswith("--") or n.isupper()):
            problems.append(f"docs/cli.md: '## {title}' documents {name}, which `{title}` does "
                            f"not have: remove or rename the row")
    assert not problems, "\n".join(problems)


def test_the_cli_page_check_can_fail(monkeypatch):
    """A verb with an undocumented option is reported with the exact place to document it."""
    @click.command("frobnicate")
    @click.option("--wobble", type=int)
    def frobnicate(wobble):
        """A verb nobody documented."""

    cli.add_command(frobnicate)
    try:
        with pytest.raises(AssertionError, match=r"'## cuvil-perception frobnicate'"):
            test_every_verb_and_option_is_in_docs_cli_md()
    finally:
        cli.commands.pop("frobnicate")
    monkeypatch.setattr(f"{__name__}._documented", lambda section: set())
    with pytest.raises(AssertionError, match=r"`cuvil-perception run` --rate is not documented"):
        test_every_verb_and_option_is_in_docs_cli_md()


def test_every_verb_has_a_usage_example_that_the_suite_runs():
    parsed = {tuple(resolve(args)[2]) for block in SHELL for args in commands(block.text)}
    for path, command in _walk(cli):
        if path and not isinstance(command, click.Group):
            assert path in parsed, f"no ```sh example of `cuvil-perception {' '.join(path)}`"


def test_env_switches_in_the_docs_exist():
    from cuvil_perception import config

    source = Path(config.__file__).read_text(encoding="utf-8")
    for doc in DOCS:
        for name in set(re.findall(r"\bCUVIL_[A-Z_]+\b", doc.read_text(encoding="utf-8"))):
            assert f'"{name}"' in source, \
                f"{doc.relative_to(REPO)}: {name} is not read in config.py"



def test_docs_ops_md_is_what_the_ops_declare():
    from cuvil_perception.cli.ops_markdown import ops_markdown

    page = REPO / "docs" / "ops.md"
    assert page.read_text(encoding="utf-8") == ops_markdown(), (
        "docs/ops.md is out of date with the ops' declarations: run "
        "`cuvil-perception ops --markdown > docs/ops.md`")
