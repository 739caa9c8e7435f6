"""Shared by the library tests: the pipeline's PointPillars kernels and the host's outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile.toolchain import Toolchain, find_toolchain
from cuvil_perception.errors import ToolchainError
from cuvil_perception.graph import builtin_models_dir
from cuvil_perception.ops.pillars.config import HeadConfig, PillarConfig
from cuvil_perception.ops.pillars.kernel_decode import decode_spec
from cuvil_perception.ops.pillars.kernel_nms import nms_spec
from cuvil_perception.ops.pillars.kernel_pfn import fold_weights, pfn_spec
from cuvil_perception.ops.pillars.kernel_pillarize import pillarize_spec
from cuvil_perception.ops.pillars.kernel_scatter_lines import scatter_lines_spec
from cuvil_perception.ops.pillars.model import PointPillars

MODEL = builtin_models_dir() / "pointpillars_cuvil_demo.onnx"
CONFIG = PillarConfig(max_pillars=16000)  # configs/lidar_pillars.yaml
HEAD = HeadConfig()
TRIPLE = "aarch64-linux-gnu"


def aarch64_toolchain() -> Toolchain:
    """The aarch64 cross toolchain with its qemu-user runner, or a skip saying what is missing."""
    try:
        tools = find_toolchain(TRIPLE)
    except ToolchainError as exc:
        pytest.skip(f"{exc} (make setup installs it)")
    if not tools.emulator:
        pytest.skip("qemu-user or libc6-dev-arm64-cross is not installed (make setup does)")
    return tools


def pillars_specs() -> list:
    """The kernels the lidar pipeline runs (scatter: the whole-line streaming kernel)."""
    return [pillarize_spec(CONFIG), pfn_spec(CONFIG), scatter_lines_spec(CONFIG, True),
            decode_spec(CONFIG, HEAD), nms_spec(HEAD)]


def model() -> PointPillars:
    return PointPillars.from_onnx(MODEL, CONFIG, HEAD).open()


def weights_file(pp: PointPillars, path: Path) -> Path:
    """The folded PFN weights [14, C] then bias [C], float32 (what the C example reads)."""
    weights, bias = fold_weights(pp.split.pfn)
    np.concatenate([weights.ravel(), bias.ravel()]).astype("<f4").tofile(path)
    return path


def scan(path: Path) -> np.ndarray:
    return np.fromfile(path, np.float32).reshape(-1, 4)


def head_maps(pp: PointPillars, points: np.ndarray) -> tuple[np.ndarray, ...]:
    """(cls, box, dir) maps of the backbone for one scan, each float32 C-contiguous."""
    return tuple(np.ascontiguousarray(m, np.float32) for m in pp.runner(pp.bev(points)))


def assert_pfn_close(got: np.ndarray, want: np.ndarray) -> None:
    """The documented PFN tolerance (tests/test_pillars_preprocess.py): rtol 1e-5, atol 1e-6 x
    the largest feature."""
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * scale)


def assert_decode_close(got: dict, want) -> None:
    """Candidates: counts, labels and anchor indices exact; boxes and scores within the decode
    tolerance (rtol 1e-5, atol 1e-5: ``irutil.vexp`` / sigmoid rounding)."""
    n = want.count
    assert (got["count"], got["overflow"]) == (n, want.overflow)
    np.testing.assert_array_equal(got["labels"], want.labels[:n])
    np.testing.assert_array_equal(got["anchor"], want.anchor[:n])
    np.testing.assert_allclose(got["scores"], want.scores[:n], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["boxes"], want.boxes[:n], rtol=1e-5, atol=1e-5)
