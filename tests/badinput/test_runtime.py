"""Bad input to the runtime-placement params of the detector ops (execution_provider) and to the
``quantize`` verb: wrong values, wrong types, providers this machine lacks -> one clear error,
exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuvil_perception.errors import PipelineError
from cuvil_perception.graph import Pipeline
from cuvil_perception.ops.onnx_runner import available_providers

from ._runner import assert_one_line_error, cli

REPO = Path(__file__).resolve().parents[2]
NAN, INF = float("nan"), float("inf")
MISSING = next(p for p in ("cuda", "tensorrt", "openvino") if p not in available_providers())

PROVIDER_ROWS = [
    ("gpu", "must be one of 'cpu', 'cuda', 'tensorrt', 'openvino'"),
    ("", "must be one of 'cpu', 'cuda'"),
    ("CPU", "must be one of 'cpu'"),
    (3, "must be a string"),
    (NAN, "must be a string"),
    (INF, "must be a string"),
    (["cpu"], "must be a string"),
    ("x" * 10_000, "must be one of 'cpu'"),
    (MISSING, f"execution provider '{MISSING}'"),
]
DETECTORS = [("yolo.detect", "builtin:yolov8_cuvil_demo.onnx", "image"),
             ("pillars.detect", "builtin:pointpillars_cuvil_demo.onnx", "points")]


def detector(op: str, model: str, port: str, **params) -> Pipeline:
    p = Pipeline("bad")
    p.add("drive", "replay", path=str(REPO / "datasets" / "sample_drive"))
    p.add("det", op, inputs={port: f"drive/{port}"}, model=model, **params)
    return p


@pytest.mark.parametrize("op,model,port", DETECTORS, ids=[d[0] for d in DETECTORS])
@pytest.mark.parametrize("value,message", PROVIDER_ROWS, ids=range(len(PROVIDER_ROWS)))
def test_execution_provider_is_checked_when_the_pipeline_is_built(op, model, port, value,
                                                                  message):
    with pytest.raises(PipelineError) as info:
        detector(op, model, port, execution_provider=value).validate()
    assert "stage 'det': field 'params.execution_provider'" in str(info.value)
    assert message in str(info.value)


def test_a_missing_provider_names_what_to_install():
    with pytest.raises(PipelineError) as info:
        detector(*DETECTORS[0], execution_provider=MISSING).validate()
    assert "is not in this onnxruntime (available: cpu" in str(info.value)
    assert "install onnxruntime-" in str(info.value)


def test_a_provider_needs_the_onnxruntime_runtime():
    with pytest.raises(PipelineError, match="needs runtime onnxruntime"):
        detector(*DETECTORS[1], runtime="opencv", execution_provider=MISSING).validate()


def test_inspect_refuses_a_provider_that_is_not_installed(tmp_path):
    yaml = (REPO / "configs" / "fusion.yaml").read_text()
    yaml = yaml.replace("runtime: auto        # onnxruntime when installed (the dev extra), else "
                        "OpenCV DNN\n    deadline_ms", f"runtime: auto\n      execution_provider: "
                        f"{MISSING}\n    deadline_ms", 1)
    assert f"execution_provider: {MISSING}" in yaml
    config = tmp_path / "fusion.yaml"
    config.write_text(yaml.replace("../datasets", str(REPO / "datasets")))
    line = assert_one_line_error(cli("inspect", str(config)), str(config),
                                 "params.execution_provider", f"'{MISSING}'")
    assert "install onnxruntime-" in line


RUNTIME_ROWS = [
    ("gpu", "must be one of 'auto', 'opencv', 'onnxruntime', 'native', got 'gpu'"),
    ("", "must be one of 'auto', 'opencv', 'onnxruntime', 'native', got ''"),
    ("Native", "must be one of 'auto', 'opencv', 'onnxruntime', 'native'"),
    (3, "must be a string"),
    (NAN, "must be a string"),
    (INF, "must be a string"),
    (["native"], "must be a string"),
    ("x" * 10_000, "must be one of 'auto'"),
]


@pytest.mark.parametrize("value,message", RUNTIME_ROWS, ids=range(len(RUNTIME_ROWS)))
def test_pillars_runtime_is_checked_when_the_pipeline_is_built(value, message):
    with pytest.raises(PipelineError) as info:
        detector(*DETECTORS[1], runtime=value).validate()
    assert "stage 'det': field 'params.runtime'" in str(info.value)
    assert message in str(info.value)


def test_yolo_has_no_native_runtime():
    with pytest.raises(PipelineError, match="field 'params.runtime': must be one of"):
        detector(*DETECTORS[0], runtime="native").validate()


def test_the_native_runtime_takes_no_provider():
    with pytest.raises(PipelineError, match="needs runtime onnxruntime \\(runtime is 'native'\\)"):
        detector(*DETECTORS[1], runtime="native", execution_provider=MISSING).validate()


def test_a_model_the_native_runtime_cannot_lower_is_refused_by_inspect_as_by_run(tmp_path):
    """The INT8 demo model (QDQ nodes) with runtime native: exit 2, one line naming the op."""
    drive = REPO / "datasets" / "sample_drive"
    config = tmp_path / "p.yaml"
    config.write_text(f"stages:\n  - {{id: drive, op: replay, params: {{path: {drive}}}}}\n"
                      "  - id: pp\n    op: pillars.detect\n    inputs: {points: drive/points}\n"
                      "    params:\n      model: builtin:pointpillars_cuvil_demo.int8.onnx\n"
                      "      runtime: native\n")
    fragments = ("pointpillars_cuvil_demo.int8.onnx: runtime 'native' cannot lower node",
                 "DequantizeLinear)")
    ran = assert_one_line_error(cli("run", str(config), "--frames", "1"), *fragments)
    assert ran == assert_one_line_error(cli("inspect", str(config)), *fragments)
