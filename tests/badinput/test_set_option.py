"""Bad-input catalogue, ``--set STAGE.PARAM=VALUE``: a command-line override of a pipeline value.

An unknown stage or param is one line with a "did you mean" (exit 2); a value goes through the
same checks as the same value written in the YAML, and its error names ``--set STAGE.PARAM``
where a YAML error names file:line. Rows are generated from every op's numeric params (the
values of `test_params`), plus the stage fields ``--set`` allows (deadline_ms, on_miss, tag);
``inspect`` refuses each with the line ``run`` prints, and every verb that loads a pipeline
(run, inspect, eval, bench, compile, fleet, profile) has the option.
"""

from __future__ import annotations

import pytest

from ._runner import REPO, assert_one_line_error, assert_unchanged, cli, snapshot
from .test_params import _ops, _required_params, _rows

DRIVE = REPO / "datasets" / "sample_drive"
PILLARS = ("pipeline: p\nstages:\n"
           f"  - {{id: drive, op: replay, params: {{path: {DRIVE}}}}}\n"
           "  - id: detect\n    op: pillars.detect\n    inputs: {points: drive/points}\n"
           "    params: {model: builtin:pointpillars_cuvil_demo.onnx}\n"
           "  - {id: log, op: jsonl, inputs: {boxes: detect/boxes}, params: {path: out.jsonl}}\n")


@pytest.mark.parametrize(("op_name", "param_name", "value"), _rows())
def test_bad_numeric_value_names_the_set_option(tmp_path, op_name, param_name, value):
    cls = _ops()[op_name]
    text = "\n".join(["pipeline: badparam", "stages:", "  - id: probe", f"    op: {op_name}",
                      "    params:", *(_required_params(cls, param_name) or ["      {}"]), ""])
    path = tmp_path / "p.yaml"
    path.write_text(text.replace("    params:\n      {}", "    params: {}"))
    before = snapshot(tmp_path)
    result = cli("inspect", str(path), "--set", f"probe.{param_name}={value}")
    assert_one_line_error(result, f"error: --set probe.{param_name}: stage 'probe': field "
                                  f"'params.{param_name}': ")
    assert_unchanged(before)


# (--set value, fragments of the one error line); the pipeline is PILLARS
ROWS = {
    "unknown-stage": ("detekt.score_threshold=0.3",
                      ["--set detekt.score_threshold: the pipeline has no stage 'detekt'",
                       "did you mean 'detect'?", "(stages: drive, detect, log)"]),
    "unknown-param": ("detect.score_thresold=0.3",
                      ["--set detect.score_thresold: op 'pillars.detect' of stage 'detect' has "
                       "no param 'score_thresold'", "did you mean 'score_threshold'?",
                       "stage fields: deadline_ms, on_miss, tag"]),
    "no-equals": ("detect.score_threshold", ["expected STAGE.PARAM=VALUE"]),
    "no-dot": ("score_threshold=0.3", ["expected STAGE.PARAM=VALUE"]),
    "empty-key": ("=0.3", ["expected STAGE.PARAM=VALUE"]),
    "nan": ("detect.score_threshold=.nan",
            ["--set detect.score_threshold: stage 'detect': field 'params.score_threshold': "
             "must be a finite number, got nan"]),
    "inf": ("detect.nms_threshold=.inf", ["field 'params.nms_threshold'", "finite"]),
    "huge-float": ("detect.score_threshold=1e999", ["must be a finite number, got inf"]),
    "huge-int": ("detect.max_pillars=10000000000", ["field 'params.max_pillars'",
                                                     "limit is 2 GiB"]),
    "huge-digits": ("detect.max_pillars=" + "9" * 40, ["--set detect.max_pillars: integer of 40 "
                                                      "digits (at most 30)"]),
    "empty": ("detect.score_threshold=", ["field 'params.score_threshold': must be a number, "
                                          "got null"]),
    "wrong-type": ("detect.score_threshold=high", ["must be a number, got string 'high'"]),
    "list-for-number": ("detect.score_threshold=[0, 1]", ["got list [0, 1]"]),
    "short-list": ("detect.voxel_size=[0.16, 0.16]", ["field 'params.voxel_size'", "2 items"]),
    "yaml-tag": ("detect.score_threshold=!!python/object:os.system {}",
                 ["--set detect.score_threshold: YAML tag '!!python/object:os.system' is not "
                  "allowed"]),
    "yaml-syntax": ("detect.voxel_size=[0.16, 0.16", ["--set detect.voxel_size: YAML syntax "
                                                      "error"]),
    "no-bundled-model": ("detect.model=builtin:nope.onnx", ["field 'params.model'",
                                                            "no bundled model 'nope.onnx'"]),
    "missing-model": ("detect.model=nowhere.onnx", ["--set detect.model: stage 'detect': field "
                                                    "'params.model'", "no such file"]),
    "deadline-negative": ("detect.deadline_ms=-5",
                          ["--set detect.deadline_ms: stage 'detect': field 'deadline_ms': "
                           "must be a positive number of milliseconds, got -5"]),
    "deadline-nan": ("detect.deadline_ms=.nan", ["field 'deadline_ms'", "got nan"]),
    "deadline-inf": ("detect.deadline_ms=.inf", ["field 'deadline_ms'", "got inf"]),
    "deadline-empty": ("detect.deadline_ms=", ["field 'deadline_ms'", "got 'null'"]),
    "deadline-wrong-type": ("detect.deadline_ms=soon", ["field 'deadline_ms'", "got 'soon'"]),
    "on-miss-unknown": ("detect.on_miss=dorp", ["field 'on_miss': unknown on_miss 'dorp'",
                                                "did you mean 'drop'?"]),
    "on-miss-without-deadline": ("detect.on_miss=reuse_last",
                                 ["--set detect.on_miss: stage 'detect': field 'on_miss': "
                                  "on_miss 'reuse_last' without a 'deadline_ms'"]),
    "e2e-negative": ("e2e_deadline_ms=-1", ["--set e2e_deadline_ms: field 'e2e_deadline_ms': "
                                            "must be a positive number of milliseconds, got -1"]),
    "e2e-inf": ("e2e_deadline_ms=.inf", ["field 'e2e_deadline_ms'", "got inf"]),
    "e2e-wrong-type": ("e2e_deadline_ms=[1]", ["field 'e2e_deadline_ms'", "got [1]"]),
    "pipeline-field-unknown": ("e2e_deadline=100", ["expected STAGE.PARAM=VALUE",
                                                     "or e2e_deadline_ms=VALUE"]),
    "tag-unknown": ("detect.tag=gpu", ["--set detect.tag: stage 'detect': field 'tag': unknown "
                                       "tag 'gpu'"]),
}


@pytest.mark.parametrize(("value", "fragments"), list(ROWS.values()), ids=list(ROWS))
def test_inspect_refuses_a_bad_set_exactly_as_run(tmp_path, value, fragments):
    (tmp_path / "p.yaml").write_text(PILLARS)
    before = snapshot(tmp_path)
    ran = cli("run", "p.yaml", "--frames", "1", "--set", value, cwd=tmp_path)
    inspected = cli("inspect", "p.yaml", "--set", value, cwd=tmp_path)
    assert assert_one_line_error(ran, *fragments) == assert_one_line_error(inspected, *fragments)
    assert_unchanged(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]


@pytest.mark.parametrize("verb", [
    ["eval"], ["compile"], ["bench", "--budgets", "b.yaml"],
    ["fleet", "run", "--out", "fleet"], ["profile", "--out", "prof"],
], ids=["eval", "compile", "bench", "fleet", "profile"])
def test_every_verb_that_loads_a_pipeline_takes_set(tmp_path, verb):
    (tmp_path / "p.yaml").write_text(PILLARS)
    (tmp_path / "b.yaml").write_text("budgets:\n  - {stage: detect, p99_ms: 1000}\n")
    if verb[0] == "fleet":
        args = [*verb[:2], "p.yaml", str(DRIVE), *verb[2:]]
    else:
        args = [verb[0], "p.yaml", *verb[1:]]
    result = cli(*args, "--set", "detect.score_thresold=0.3", cwd=tmp_path)
    assert_one_line_error(result, "--set detect.score_thresold:", "did you mean "
                                  "'score_threshold'?")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.yaml", "p.yaml"]


def test_set_values_reach_the_stage_and_the_run_record(tmp_path):
    """Applied in order (the last of a key wins), checked like YAML values (a list included),
    shown by inspect, and kept in the run record's ``pipeline.overrides``."""
    import json

    (tmp_path / "p.yaml").write_text(PILLARS)
    sets = ["detect.score_threshold=0.2", "detect.score_threshold=0.3",
            "detect.deadline_ms=900", "detect.voxel_size=[0.16, 0.16, 4.0]",
            "e2e_deadline_ms=950"]
    args = [arg for value in sets for arg in ("--set", value)]
    inspected = cli("inspect", "p.yaml", *args, cwd=tmp_path)
    assert inspected.code == 0, inspected.stderr
    assert "900 ms" in inspected.stdout and "e2e deadline 950 ms" in inspected.stdout
    assert f"--set: {', '.join(sets)}" in inspected.stdout
    ran = cli("run", "p.yaml", "--frames", "1", *args, cwd=tmp_path)
    assert ran.code == 0, ran.stderr
    record = json.loads((tmp_path / "out.jsonl.record.json").read_text())
    assert record["pipeline"]["overrides"] == sets
    detect = next(s for s in record["pipeline"]["stages"] if s["id"] == "detect")
    assert detect["params"]["score_threshold"] == 0.3 and detect["deadline_ms"] == 900
    assert detect["params"]["voxel_size"] == [0.16, 0.16, 4.0]
    assert record["pipeline"]["e2e_deadline_ms"] == 950


def test_a_relative_path_in_set_is_relative_to_the_working_directory(tmp_path):
    """As for --replay: ``--set detect.model=m.onnx`` is the m.onnx beside the user, not beside
    the YAML (which sits in another folder here)."""
    import shutil

    from cuvil_perception.graph import builtin_models_dir

    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "p.yaml").write_text(PILLARS)
    shutil.copy(builtin_models_dir() / "pointpillars_cuvil_demo.onnx", tmp_path / "m.onnx")
    result = cli("inspect", "cfg/p.yaml", "--set", "detect.model=m.onnx", cwd=tmp_path)
    assert result.code == 0, result.stderr
    result = cli("inspect", "cfg/p.yaml", "--set", "detect.model=cfg/m.onnx", cwd=tmp_path)
    assert_one_line_error(result, "--set detect.model:", f"{tmp_path / 'cfg' / 'm.onnx'}: no "
                                  "such file")
