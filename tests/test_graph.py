"""Pipeline DSL: YAML fixtures with their expected errors, the Python API, ordering."""

from __future__ import annotations

from pathlib import Path

import pytest

import graph_ops  # noqa: F401  (registers graphtest.* ops)
from cuvil_perception.errors import PipelineError, UsageError
from cuvil_perception.graph import Pipeline, apply_cli_sources, load_pipeline, parse_pipeline

FIXTURES = Path(__file__).parent / "pipelines"
INVALID = sorted(FIXTURES.glob("invalid-*.yaml"))


def _expectation(path: Path) -> list[str]:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name} has no '# expect:' line"
    return [part.strip() for part in first[len("# expect: "):].split("|")]


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_pipeline_names_line_stage_and_field(path):
    position, *fragments = _expectation(path)
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{position}:"), message
    for fragment in fragments:
        assert fragment in message, message
    assert isinstance(info.value, UsageError)


def test_valid_pipeline_is_parsed_in_full():
    p = load_pipeline(FIXTURES / "valid-chain.yaml")
    assert p.name == "chain" and p.e2e_deadline_ms == 50
    assert p.order == ["src", "double", "out"]
    double = p.stage("double")
    assert double.resolved_params == {"factor": 2.0, "width": 4, "mode": "mul"}
    assert double.degrade_params == {"factor": 3.0, "width": 4, "mode": "mul"}
    assert double.degrade.frames == 4 and double.on_miss == "degrade"
    assert double.deadline_ms == 5 and double.effective_tag == "compute"
    assert p.stage("src").effective_tag == "io"
    assert p.stage("out").input_specs["b"].describe() == "int32[N]"
    assert double.output_specs["values"].describe() == "float32[4]"


def test_python_api_builds_the_same_pipeline_as_yaml():
    yaml_p = load_pipeline(FIXTURES / "valid-chain.yaml")
    p = Pipeline("chain", e2e_deadline_ms=50)
    src = p.add("src", "graphtest.counter")
    double = p.add("double", "graphtest.scale", inputs={"values": src.out("values")}, factor=2,
                   deadline_ms=5, on_miss="degrade",
                   degrade={"params": {"factor": 3}, "frames": 4})
    p.add("out", "graphtest.collect", inputs={"a": double.out("values"), "b": "src/ids"})
    p.validate()
    assert p.order == yaml_p.order
    for a, b in zip(p.ordered(), yaml_p.ordered()):
        assert (a.op, a.resolved_params, a.inputs, a.deadline_ms, a.on_miss, a.degrade_params) == \
            (b.op, b.resolved_params, b.inputs, b.deadline_ms, b.on_miss, b.degrade_params)
        assert a.output_specs == b.output_specs


def test_python_api_errors_name_the_stage_and_field():
    p = Pipeline("p")
    p.add("src", "graphtest.counter")
    p.add("x", "graphtest.scale", inputs={"values": "src/values"}, factor="big")
    with pytest.raises(PipelineError, match=r"stage 'x': field 'params.factor': must be a number"):
        p.validate()


def test_order_is_topological_and_follows_declaration_order_on_ties():
    text = """
stages:
  - {id: late, op: graphtest.scale, inputs: {values: mid/values}}
  - {id: src, op: graphtest.counter}
  - {id: mid, op: graphtest.scale, inputs: {values: src/values}}
  - {id: side, op: graphtest.scale, inputs: {values: src/values}}
  - {id: sink, op: graphtest.collect, inputs: {a: late/values, b: side/values}}
"""
    p = parse_pipeline(text).validate()
    assert p.order == ["src", "mid", "late", "side", "sink"]
    assert [s.id for s in p.consumers("src")] == ["mid", "side"]


def test_cli_overrides_swap_replay_for_camera_and_refuse_impossible_wiring(tmp_path):
    text = """
stages:
  - {id: drive, op: replay}
  - {id: sink, op: jsonl, inputs: {img: drive/image}}
"""
    p = apply_cli_sources(parse_pipeline(text), camera="/dev/video3", out=tmp_path / "o.jsonl")
    assert p.stage("drive").op == "camera"
    assert p.stage("drive").params == {"device": "/dev/video3"}
    assert p.stage("sink").params["path"] == str(tmp_path / "o.jsonl")
    lidar = parse_pipeline(text.replace("drive/image", "drive/points"))
    with pytest.raises(PipelineError, match="a live camera does not provide"):
        apply_cli_sources(lidar, camera="0")
    with pytest.raises(UsageError, match="not both"):
        apply_cli_sources(parse_pipeline(text), camera="0", replay="d")


def test_builtin_model_paths_resolve_to_package_data():
    from cuvil_perception.graph import Param

    param = Param("model", Path)
    shipped = sorted((Path(__file__).resolve().parents[1] / "cuvil_perception" / "models")
                     .glob("*.onnx"))
    assert shipped, "the package ships at least one model"
    assert param.coerce(f"builtin:{shipped[0].name}", None) == shipped[0]
    with pytest.raises(ValueError, match="no bundled model 'nope.onnx'"):
        param.coerce("builtin:nope.onnx", None)
