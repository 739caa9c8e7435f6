"""Bounds-checked kernel builds (``CUVIL_KERNEL_DEBUG=1`` / ``debug=True``) through the callers
that bind a spec once and call it with raw addresses: the package's ops, a wrapper like theirs,
the fusion demo from the command line. The callable `get_kernel` returns supplies the hidden error
record, so the checked build gives the release build's bytes and an out-of-range index raises
`KernelIndexError` through the wrapper."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile import get_kernel
from cuvil_perception.compile.keys import cache_key, fast_key
from cuvil_perception.compile.lang import Buf, f32, i32, kernel
from cuvil_perception.compile.optimize import DEFAULT_OPTIONS
from cuvil_perception.compile.render_ir import render
from cuvil_perception.compile.target import host_target
from cuvil_perception.errors import KernelIndexError
from cuvil_perception.ops.pillars import PillarConfig, PointPillars
from cuvil_perception.ops.pillars.native import _Bound
from cuvil_perception.ops.pillars.op import RANDOM_MODEL

REPO = Path(__file__).resolve().parents[1]
THIS = Path(__file__).resolve()


@kernel
def gather(src: Buf[f32, "n"], index: Buf[i32, "m"], out: Buf[f32, "m"], *, n: int, m: int):
    for j in range(m):
        out[j] = src[index[j]]  # marker: gather-read


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(THIS.read_text().splitlines(), 1)
                if f"marker: {marker}" in text and "next(" not in text)


class GatherKernel(_Bound):
    """A wrapper shaped like the package's: buffers and their addresses bound once."""

    def __init__(self, n: int, m: int):
        super().__init__()
        self.spec = gather.spec(n=n, m=m)
        self.src = np.arange(n, dtype=np.float32) * 10
        self.out = np.zeros(m, np.float32)

    def __call__(self, index: np.ndarray) -> np.ndarray:
        self._call(self.src.ctypes.data, index.ctypes.data, self.out.ctypes.data)
        return self.out


@pytest.mark.parametrize("switch", ["env", "decorator"])
def test_out_of_range_raises_through_a_raw_address_wrapper(switch, monkeypatch):
    if switch == "env":
        monkeypatch.setenv("CUVIL_KERNEL_DEBUG", "1")
        wrapped = GatherKernel(8, 3).open()
    else:
        wrapped = GatherKernel(8, 3)
        wrapped.spec = gather.spec(debug=True, n=8, m=3)
        wrapped.open()
    assert wrapped.spec.error_record is not None
    np.testing.assert_array_equal(wrapped(np.array([7, 0, 2], np.int32)), [70, 0, 20])
    with pytest.raises(KernelIndexError) as info:
        wrapped(np.array([1, 9, 2], np.int32))
    assert f"{THIS}:{_line('gather-read')}:" in str(info.value)
    assert "index 9 out of range for axis 0 of 'src' (extent 8)" in str(info.value)
    with pytest.raises(KernelIndexError, match="index -1 out of range"):
        wrapped(np.array([-1, 0, 0], np.int32))
    with pytest.raises(TypeError, match="takes 3 arguments \\(4 given\\)"):
        wrapped.kernel(0, 0, 0, 0)  # the record is the binding's, never the caller's


def test_the_debug_callable_releases_the_gil_and_release_is_the_bare_function():
    debug, release = get_kernel(gather.spec(debug=True, n=4, m=4)), \
        get_kernel(gather.spec(debug=False, n=4, m=4))
    for native in (debug.native, release):
        assert isinstance(native, ctypes._CFuncPtr)
        # ctypes releases the GIL around a foreign call unless FUNCFLAG_PYTHONAPI is set.
        assert not type(native)._flags_ & ctypes._FUNCFLAG_PYTHONAPI
    assert debug.spec.call_args == release.spec.args == ("ptr", "ptr", "ptr")


def test_a_python_thread_runs_during_a_debug_build_call():
    from cuvil_perception.compile import examples as ex
    from cuvil_perception.testing.gil import CallProbe, size_for

    k = get_kernel(ex.exp_accumulate.spec(debug=True, n=4096))
    x = np.random.default_rng(0).uniform(-3, 3, 4096).astype(np.float32)
    y = np.zeros_like(x)
    reps = size_for(lambda n: k(x.ctypes.data, y.ctypes.data, n), 0.05)  # ~50 ms a call
    with CallProbe() as probe:
        timed = probe.wrap(k)
        for _ in range(3):
            timed(x.ctypes.data, y.ctypes.data, reps)
    assert probe.progress_share() >= 0.75


def test_debug_and_release_builds_are_apart_in_memory_and_on_disk():
    debug, release = gather.spec(debug=True, n=4, m=4), gather.spec(debug=False, n=4, m=4)
    assert debug != release and debug.release() == release and release.release() is release
    assert gather.static_params(debug) == gather.static_params(release) == {"n": 4, "m": 4}
    target = host_target()
    assert fast_key(debug, target, DEFAULT_OPTIONS) != fast_key(release, target, DEFAULT_OPTIONS)
    assert cache_key(render(debug), debug, target, DEFAULT_OPTIONS) != \
        cache_key(render(release), release, target, DEFAULT_OPTIONS)
    assert get_kernel(debug) is not get_kernel(release)


def _pillar_outputs(model: PointPillars, points: np.ndarray) -> list[bytes]:
    pillars = model.pillarize(points)
    out = [pillars.voxels[:pillars.count].tobytes(), model.pfn(pillars)[:pillars.count].tobytes()]
    return out + [a.tobytes() for a in model.detect(points)]


@pytest.mark.parametrize("sparse", [False, True])
def test_pillars_debug_build_gives_the_release_bytes_on_kitti(sparse, kitti_frames, monkeypatch):
    clouds = [np.fromfile(p, np.float32).reshape(-1, 4) for p in sorted(kitti_frames)[:2]]
    monkeypatch.setenv("CUVIL_KERNEL_DEBUG", "0")
    release = PointPillars.from_onnx(RANDOM_MODEL, PillarConfig(), sparse=sparse).open()
    monkeypatch.setenv("CUVIL_KERNEL_DEBUG", "1")
    debug = PointPillars.from_onnx(RANDOM_MODEL, PillarConfig(), sparse=sparse).open()
    assert all(s.error_record is not None for s in debug.kernels())
    assert not any(s.error_record is not None for s in release.kernels())
    for points in clouds:
        assert _pillar_outputs(debug, points) == _pillar_outputs(release, points)


def _fusion(tmp_path: Path, debug: bool) -> tuple[list, dict]:
    out = tmp_path / f"{'debug' if debug else 'release'}.jsonl"
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("CUVIL_KERNEL_DEBUG", None)
    if debug:
        env["CUVIL_KERNEL_DEBUG"] = "1"
    done = subprocess.run([sys.executable, "-m", "cuvil_perception", "run", "configs/fusion.yaml",
                           "--replay", "datasets/sample_drive", "--frames", "3", "--rate", "0",
                           "--no-deadlines", "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    record = json.loads(out.with_name(out.name + ".record.json").read_text())
    return [json.loads(line)["outputs"] for line in out.read_text().splitlines()], record


def test_fusion_demo_runs_bounds_checked_with_the_release_outputs(tmp_path):
    """The regression guard: the CLI demo (YOLO head, sparse PointPillars) under the switch."""
    release, _ = _fusion(tmp_path, debug=False)
    debug, record = _fusion(tmp_path, debug=True)
    assert len(debug) == 3 and debug == release
    assert release[0]["boxes"]["shape"][0] > 0 and release[0]["detections"]["shape"][0] > 0
    # Every kernel of the run was a checked build, and nothing else was bound after prewarm.
    names = {row["name"] for row in record["prewarm"] if row["static"].startswith("_debug=true")}
    assert {"yolo.scan", "yolo.nms", "pillars.pillarize", "pillars.conv_scatter"} <= names
    assert all("_debug=true" in row["static"] for row in record["prewarm"])
    assert record["compile"]["compiles_after_frame0"] == 0


def test_target_objects_are_release_builds(tmp_path):
    """``compile --target`` objects: a debug spec is written as its release build (the error
    record is decoded by the Python binding, which code linking the object does not have)."""
    from cuvil_perception.compile import write_objects

    debug, release = gather.spec(debug=True, n=4, m=4), gather.spec(debug=False, n=4, m=4)
    (got,) = write_objects([debug], "aarch64-linux-gnu", tmp_path / "debug")
    (want,) = write_objects([release], "aarch64-linux-gnu", tmp_path / "release")
    assert got.name == want.name and got.read_bytes() == want.read_bytes()
