"""The whole-pipeline C API of ``pillars.detect`` (``<prefix>_open / _detect / _close``).

The native backbone is not there yet, so ``compile --library`` refuses the pipeline (one line)
and ``--kernels-only`` builds the kernels. What is tested of the API: every native stage of
``detect`` (pillarize, PFN, the fused conv + scatter with its state carried over frames,
head_cells, decode, the score sort and rotated NMS, the finite filter) on four KITTI frames in
one handle, linked statically with ``tests/native/replay_backbone.c`` in place of the backbone
(it replays ONNX Runtime's maps for the frame and dumps the map it was given), against
``PointPillars`` in this process: the conv map within the conv_scatter tolerance, the boxes
line by line (count and labels exact, floats rtol 1e-5 / atol 1e-5 as decode), on x86-64 and
under qemu-aarch64; the example's Makefile (``make``, ``make static``, ``make run SCAN=``) and
its lines against ``run``'s JSONL on the bundled drive; the error codes of the handle API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from library_support import aarch64_toolchain, model, scan

from cuvil_perception.compile.library import build_library, symbols_for
from cuvil_perception.compile.prewarm import unique_specs
from cuvil_perception.compile.toolchain import find_toolchain, host_arch
from cuvil_perception.errors import ToolchainError
from cuvil_perception.ops.pillars import c_detect
from cuvil_perception.ops.pillars.c_example_detect import detect_example_files

ROOT = Path(__file__).parent.parent
REPLAY = Path(__file__).parent / "native" / "replay_backbone.c"
ERRORS_PROGRAM = Path(__file__).parent / "native" / "detect_errors.c"
FRAMES = 4
# nm -u of a whole-pipeline archive: libc's allocator, sort and memory calls, and sincos for
# the NMS headings (once per candidate, not in a hot loop); the backbone and the blob are ours.
PIPELINE_UNDEFINED = {"aligned_alloc", "calloc", "free", "memcpy", "memset", "qsort", "sincos",
                      "sin", "cos", "_GLOBAL_OFFSET_TABLE_", "pipe_backbone",
                      "pipe_backbone_workspace", "pipe_weights"}


def _expected(pp, frames: list[Path], work: Path) -> list[tuple]:
    """Run the Python pipeline frame by frame; write what the replay backbone reads."""
    want = []
    for i, frame in enumerate(frames):
        bev = np.array(pp.bev(scan(frame)))
        outputs = pp.runner.network(bev)
        outputs[0].astype("<f4").tofile(work / f"cls_{i}.f32")
        for k, part in enumerate(outputs[1:]):
            part.astype("<f4").tofile(work / f"feat{k}_{i}.f32")
        want.append((bev, pp.postprocess(*pp.runner(bev))))
    return want


def _library(tools, triple: str, work: Path, pp, build: bool = True):
    """The library with its example folder, the replay object, and (``build``) the example
    linked statically with it."""
    specs = [s.release() for s in pp.kernels()]
    symbols = dict(symbols_for(unique_specs(specs), "pipe"))
    lib = build_library(specs, triple, work / "lib", "pipe",
                        parts=[c_detect.render(pp, symbols, "pipe")])
    example = lib.out_dir / "example"
    example.mkdir()
    for name, data in detect_example_files("pipe", Path(tools.cc).name).items():
        (example / name).write_bytes(data)
    replay = work / "replay.o"
    tools.run([tools.cc, "-O2", "-c", "-o", str(replay), str(REPLAY)], "compiling the replay")
    if build:
        subprocess.run(["make", "-s", "-C", str(example), "static", f"CC={tools.cc}",
                        f"LDLIBS={replay}"], check=True, capture_output=True)
    return lib, example / "detect"


def _run_and_compare(tools, triple: str, work: Path, frames: list[Path]) -> None:
    pp = model()
    lib, exe = _library(tools, triple, work, pp)
    undefined = subprocess.run(["nm", "-u", str(lib.static)], capture_output=True, text=True,
                               check=True).stdout.split()
    calls = {s for s in undefined if s not in ("U",) and not s.endswith(".o:")
             and not s.startswith("pipe_k_")}
    assert calls <= PIPELINE_UNDEFINED, calls - PIPELINE_UNDEFINED
    sections = subprocess.run(["objdump", "-h", str(lib.static)], capture_output=True,
                              text=True, check=True).stdout.splitlines()
    assert not [line for line in sections if line.split()[1:2] in ([".data"], [".bss"])
                and int(line.split()[2], 16)], "mutable global state (see the header)"
    want = _expected(pp, frames, work)
    env = dict(os.environ, REPLAY_DIR=str(work), REPLAY_INPUT=str(want[0][0].size),
               REPLAY_PARTS=str(len(pp.plan.feat)))
    done = subprocess.run([*tools.emulator, str(exe), *map(str, frames)], capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    blocks = done.stdout.split("# ")[1:]
    assert len(blocks) == len(frames)
    for i, (block, (bev, (boxes, scores, labels))) in enumerate(zip(blocks, want)):
        got_map = np.fromfile(work / f"input_{i}.f32", np.float32).reshape(bev.shape)
        np.testing.assert_allclose(got_map, bev, rtol=1e-5, atol=1e-5 * np.abs(bev).max())
        rows = [line.split() for line in block.splitlines()[1:]]
        assert len(rows) == len(boxes), f"frame {i}"
        assert len(rows) > 0, f"frame {i}: no boxes, nothing compared"
        got = np.array([[float(v) for v in row[:8]] for row in rows], np.float32)
        np.testing.assert_array_equal([int(row[8]) for row in rows], labels)
        np.testing.assert_allclose(got[:, :7], boxes, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[:, 7], scores, rtol=1e-5, atol=1e-5)


def test_detect_through_every_native_stage_on_the_host(tmp_path, kitti_frames):
    tools = _host_tools()
    _run_and_compare(tools, f"{host_arch()}-linux-gnu", tmp_path, kitti_frames[:FRAMES])


def test_detect_through_every_native_stage_under_qemu_aarch64(tmp_path, kitti_frames):
    tools = aarch64_toolchain()
    _run_and_compare(tools, "aarch64-linux-gnu", tmp_path, kitti_frames[:FRAMES])


@pytest.mark.parametrize("target", ["", "static"])
def test_example_makefile_builds_and_make_run_prints_one_line_per_box(tmp_path, kitti_frames,
                                                                      target):
    """``make`` (the .so) or ``make static`` (the .a), then ``make run SCAN=FILE``: the
    frame's boxes as "x y z l w h yaw score label" lines, those of the Python pipeline."""
    tools = _host_tools()
    pp = model()
    lib, _ = _library(tools, f"{host_arch()}-linux-gnu", tmp_path, pp, build=False)
    (bev, (boxes, scores, labels)), = _expected(pp, kitti_frames[:1], tmp_path)
    example = lib.out_dir / "example"
    replay = tmp_path / "replay.o"
    make = ["make", "-s", "-C", str(example), f"LDLIBS={replay}"]
    subprocess.run(make + ([target] if target else []), check=True, capture_output=True)
    env = dict(os.environ, REPLAY_DIR=str(tmp_path), REPLAY_INPUT=str(bev.size),
               REPLAY_PARTS=str(len(pp.plan.feat)))
    done = subprocess.run(make + ["run", f"SCAN={kitti_frames[0]}"], capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    assert len(rows) == len(boxes) > 0 and all(len(row) == 9 for row in rows)
    got = np.array([[float(v) for v in row[:8]] for row in rows], np.float32)
    np.testing.assert_array_equal(got[:, :7], boxes)
    np.testing.assert_array_equal(got[:, 7], scores)
    np.testing.assert_array_equal([int(row[8]) for row in rows], labels)


def _host_tools():
    try:
        return find_toolchain(f"{host_arch()}-linux-gnu")
    except ToolchainError as exc:
        pytest.skip(str(exc))


def test_detect_error_codes_capacity_and_stats(tmp_path, kitti_frames):
    """open / detect / stats / close on bad arguments (NULL, negative, a config of another
    size), a capacity of one box (ECAPACITY, the best box written), stats' pillar count."""
    tools = _host_tools()
    pp = model()
    lib, _ = _library(tools, f"{host_arch()}-linux-gnu", tmp_path, pp, build=False)
    (bev, _), = _expected(pp, kitti_frames[:1], tmp_path)
    for name in ["cls"] + [f"feat{k}" for k in range(len(pp.plan.feat))]:
        (tmp_path / f"{name}_1.f32").write_bytes((tmp_path / f"{name}_0.f32").read_bytes())
    exe = tmp_path / "errors"
    tools.run([tools.cc, "-std=c11", "-Wall", "-Werror", f"-I{lib.out_dir}", "-o", str(exe),
               str(ERRORS_PROGRAM), str(lib.static), str(tmp_path / "replay.o"), "-lm"],
              "linking the error checks")
    env = dict(os.environ, REPLAY_DIR=str(tmp_path), REPLAY_INPUT=str(bev.size),
               REPLAY_PARTS=str(len(pp.plan.feat)))
    done = subprocess.run([str(exe), str(kitti_frames[0])], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0, done.stderr
    got = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    pillars = pp.pillarize(scan(kitti_frames[0])).count
    assert got == {
        "config_init": "0 1", "config_init_null": "-1", "open_null": "-1",
        "open_bad_size": "-4 1", "open_reserved": "-4", "open": "0",
        "detect_null_handle": "-1", "detect_null_points": "-1", "detect_null_boxes": "-1",
        "detect_negative_n": "-2", "detect_negative_cap": "-2",
        "capacity": f"-5 {got['capacity'].split()[1]} 1",
        "stats": f"8 {pillars}", "stats_range": "-2",
        "strerror": "more boxes than the caller's capacity: the first cap were written",
        "close": "0 0"}
    assert int(got["capacity"].split()[1]) > 1


def test_example_lines_equal_runs_jsonl_on_the_sample_drive(tmp_path):
    """``run configs/lidar_pillars.yaml`` on the bundled drive's first scans, and the example
    (replayed backbone) on the same scans in one handle: the same boxes, scores and labels,
    float32 for float32 (the JSONL prints the shortest repr of each float32)."""
    tools = _host_tools()
    scans = sorted((ROOT / "datasets" / "sample_drive" / "velodyne_points" / "data")
                   .glob("*.bin"))[:2]
    out = tmp_path / "run.jsonl"
    done = subprocess.run([sys.executable, "-m", "cuvil_perception", "run",
                           str(ROOT / "configs" / "lidar_pillars.yaml"), "--frames",
                           str(len(scans)), "--out", str(out), "--no-shed"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    frames = [json.loads(line)["outputs"] for line in out.read_text().splitlines()]
    pp = model()  # the YAML's model and params (library_support: CONFIG, HEAD)
    lib, exe = _library(tools, f"{host_arch()}-linux-gnu", tmp_path, pp)
    want = _expected(pp, scans, tmp_path)
    env = dict(os.environ, REPLAY_DIR=str(tmp_path), REPLAY_INPUT=str(want[0][0].size),
               REPLAY_PARTS=str(len(pp.plan.feat)))
    printed = subprocess.run([str(exe), *map(str, scans)], capture_output=True, text=True,
                             env=env, check=True).stdout
    for frame, block in zip(frames, printed.split("# ")[1:], strict=True):
        rows = [line.split() for line in block.splitlines()[1:]]
        boxes = np.array(frame["boxes"]["data"], np.float32).reshape(-1, 7)
        assert len(rows) == len(boxes) > 0
        got = np.array([[float(v) for v in row[:8]] for row in rows], np.float32)
        np.testing.assert_array_equal(got[:, :7], boxes)
        np.testing.assert_array_equal(got[:, 7], np.array(frame["scores"]["data"], np.float32))
        np.testing.assert_array_equal([int(row[8]) for row in rows], frame["labels"]["data"])
