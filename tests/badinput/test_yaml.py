"""Bad-input catalogue, pipeline YAML: hostile or broken files -> exit 2, one line, no traceback.

Each row is a pipeline text, the line:column the message must name and fragments it must hold
(the field path and what is wrong). Nothing in a hostile file is ever constructed or run: the
``!!python/object`` rows would create a file if it were.
"""

from __future__ import annotations

import pytest

from ._runner import assert_one_line_error, assert_unchanged, cli, snapshot

GOOD_STAGE = "  - id: drive\n    op: replay\n"

ROWS = {
    "python-object-tag": ("stages:\n  - id: a\n    op: !!python/object/apply:os.system "
                          "['touch HACKED']\n", "3:9", ["stages[0].op", "!!python/object"]),
    "python-name-tag": ("stages: !!python/name:os.system\n", "1:9", ["'stages'", "not allowed"]),
    "custom-tag": ("stages:\n  - id: a\n    op: !Ref replay\n", "3:9", ["stages[0].op", "!Ref"]),
    "binary-tag": ("pipeline: !!binary aGVsbG8=\nstages: []\n", "1:11", ["'pipeline'", "!!binary"]),
    "set-tag": ("stages: !!set {a: null}\n", "1:9", ["!!set"]),
    "float-tag": (f"stages:\n{GOOD_STAGE}    deadline_ms: !!float 5\n", "4:18",
                  ["stages[0].deadline_ms", "'!!float' is not allowed"]),
    "str-tag-on-a-key": ("!!str stages: []\n", "1:1", ["!!str"]),
    "float-tag-on-nan-text": (f"stages:\n{GOOD_STAGE}    deadline_ms: !!float .nan\n", "4:18",
                              ["!!float"]),
    "non-specific-tag": (f"stages:\n{GOOD_STAGE}    deadline_ms: ! 5\n", "4:18",
                         ["deadline_ms", "not allowed"]),
    "seq-tag": ("stages: !!seq []\n", "1:9", ["'stages'", "!!seq"]),
    "merge-key": ("base: &b {op: replay}\nstages:\n  - <<: *b\n    id: a\n", "3:5",
                  ["stages[0].<<", "merge keys"]),
    "deep-nesting": ("stages: " + "[" * 3000 + "]" * 3000 + "\n", "1:72", ["'stages'", "deeper"]),
    "deep-mapping": ("rt: " + "{a: " * 200 + "1" + "}" * 200 + "\n", "1:", ["'rt'", "deeper"]),
    "400-digit-int": (f"stages:\n{GOOD_STAGE}    deadline_ms: {'9' * 400}\n", "4:18",
                      ["stages[0].deadline_ms", "400 digits"]),
    "5000-digit-int": (f"stages:\n{GOOD_STAGE}    deadline_ms: {'1' * 5000}\n", "4:18",
                       ["5000 digits"]),
    "huge-e2e": (f"e2e_deadline_ms: {'7' * 40}\nstages:\n{GOOD_STAGE}", "1:18", ["40 digits"]),
    "nan-deadline": (f"stages:\n{GOOD_STAGE}    deadline_ms: .nan\n", "4:18",
                     ["deadline_ms", "positive"]),
    "inf-e2e": (f"e2e_deadline_ms: .inf\nstages:\n{GOOD_STAGE}", "1:18", ["e2e_deadline_ms"]),
    "empty-file": ("", "1:1", ["empty"]),
    "bad-date": (f"stages:\n{GOOD_STAGE}    params: {{path: 2020-13-45}}\n", "4:20",
                 ["month"]),
    "syntax": ("stages: [\n", "2:1", ["YAML syntax error"]),
    "tab-indent": ("stages:\n\t- id: a\n", "2:1", ["YAML syntax error"]),
    "stages-not-list": ("stages: {a: 1}\n", "1:9", ["'stages'", "must be a list"]),
    "misspelt-input": ("stages:\n  - id: drive\n    op: replay\n  - id: crop\n    op: lidar.crop\n"
                       "    inputs: {pionts: drive/points}\n", "6:22",
                       ["stage 'crop'", "inputs.pionts", "did you mean 'points'"]),
    "misspelt-stage-field": (f"stages:\n{GOOD_STAGE}    parms: {{}}\n", "4:5",
                             ["stage 'drive'", "parms", "did you mean 'params'"]),
    "unknown-rt-knob": (f"rt: {{mlock: true}}\nstages:\n{GOOD_STAGE}", "1:5",
                        ["rt.mlock", "unknown rt knob"]),
    "duplicate-key": (f"stages:\n{GOOD_STAGE}    op: camera\n", "4:5", ["appears twice"]),
    "on-miss-without-deadline": (f"stages:\n{GOOD_STAGE}    on_miss: fail\n", "4:14",
                                 ["stage 'drive'", "field 'on_miss'", "without a 'deadline_ms'"]),
    "sink-without-inputs": (f"stages:\n{GOOD_STAGE}  - {{id: out, op: jsonl}}\n", "4:5",
                            ["stage 'out'", "field 'inputs'", "would write nothing"]),
    "sink-with-empty-inputs": (f"stages:\n{GOOD_STAGE}  - {{id: out, op: jsonl, inputs: {{}}}}\n",
                               "4:", ["stage 'out'", "field 'inputs'", "would write nothing"]),
}


@pytest.mark.parametrize(("text", "where", "fragments"), list(ROWS.values()), ids=list(ROWS))
def test_bad_pipeline_yaml(tmp_path, text, where, fragments):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    before = snapshot(tmp_path)
    result = cli("inspect", str(path), cwd=tmp_path)
    assert_one_line_error(result, f"{path}:{where}", *fragments)
    assert_unchanged(before)
    assert sorted(tmp_path.iterdir()) == [path]  # e.g. no HACKED file


def test_exponent_floats_without_a_dot_are_numbers(tmp_path):
    """YAML 1.1 reads ``1e-3`` as a string; the loader reads it as the number users mean."""
    from cuvil_perception.graph import parse_pipeline

    p = parse_pipeline("stages:\n  - id: a\n    op: test.scripted\n    params: {dt_ms: 1e-3}\n")
    assert p.stages[0].params["dt_ms"] == pytest.approx(1e-3)


@pytest.mark.parametrize(("args", "fragment"), [
    (["--rate", "nan"], "'nan' is not a finite number"),
    (["--rate", "inf"], "'inf' is not a finite number"),
    (["--rate", "-1"], "not in the range"),
    (["--rate", "1e400"], "not a finite number"),
    (["--rate", "fast"], "not a valid float"),
    (["--frames", "0"], "not in the range"),
    (["--workers", "-2"], "not in the range"),
    (["--rt-fifo", "0"], "not in the range"),
    (["--rt-fifo", "100"], "not in the range"),
    (["--rt-fifo", "1e400"], "not a valid integer"),
    (["--rt-fifo", "nan"], "not a valid integer"),
    (["--rt-fifo", ""], "not a valid integer"),
])
def test_bad_numeric_cli_option_is_a_usage_error(tmp_path, args, fragment):
    path = tmp_path / "p.yaml"
    path.write_text(f"stages:\n{GOOD_STAGE}")
    result = cli("run", str(path), *args, cwd=tmp_path)
    assert result.code == 2 and not result.crash, result
    assert fragment in result.stderr and "Traceback" not in result.stderr
    assert sorted(tmp_path.iterdir()) == [path]


def test_every_float_option_of_every_verb_refuses_nan():
    """Options other verbs add later are covered too (the wrapper walks the command tree)."""
    import click

    from cuvil_perception.cli.app import cli as group
    from cuvil_perception.cli.finite import FiniteFloat

    def walk(command):
        yield command
        for sub in getattr(command, "commands", {}).values():
            yield from walk(sub)

    floats = [(c.name, p.name) for c in walk(group) for p in c.params
              if isinstance(p.type, (click.types.FloatParamType, click.FloatRange))]
    assert not floats, f"float options without the finite check: {floats}"
    wrapped = [p for c in walk(group) for p in c.params if isinstance(p.type, FiniteFloat)]
    assert len(wrapped) >= 3


@pytest.mark.parametrize(("text", "where", "fragment"), [
    ("budgets: !!python/object/apply:os.system ['touch HACKED']\n", "1:10", "!!python/object"),
    ("frames: " + "9" * 400 + "\nbudgets: []\n", "1:9", "400 digits"),
    ("budgets:\n  - <<: {stage: e2e}\n    p99_ms: 5\n", "2:5", "merge keys"),
], ids=["tag", "huge-int", "merge-key"])
def test_budgets_file_gets_the_same_strict_yaml(tmp_path, text, where, fragment):
    pipeline, budgets = tmp_path / "p.yaml", tmp_path / "b.yaml"
    pipeline.write_text(f"stages:\n{GOOD_STAGE}")
    budgets.write_text(text)
    before = snapshot(tmp_path)
    result = cli("bench", str(pipeline), "--budgets", str(budgets), cwd=tmp_path)
    assert_one_line_error(result, f"{budgets}:{where}", fragment)
    assert_unchanged(before)
    assert sorted(tmp_path.iterdir()) == [budgets, pipeline]
