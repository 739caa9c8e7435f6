"""The whole-pipeline C API of ``pillars.detect`` (``<prefix>_open / _detect / _close``), the
native backbone included (`c_net`: the network lowered to our kernels).

What is tested: every stage of ``detect`` in C (pillarize, PFN, the fused conv + scatter, the
network's layers with their change masks carried over frames, head_cells, decode, the score
sort and rotated NMS, the finite filter) on four KITTI frames in one handle against
``PointPillars(runtime="native")`` in this process (the same kernels: count and labels exact,
floats rtol 1e-5 / atol 1e-5 as decode), on x86-64 (the .a) and under qemu-aarch64 (the .a and
the .so); random-weight CUDA-PointPillars-layout models the same way; the example's
Makefile (``make``, ``make static``, ``make run SCAN=``); ``compile --library`` on
configs/lidar_pillars.yaml and its example's lines against ``run``'s JSONL on the bundled drive
(float32 for float32 with ``runtime: native``; with the YAML's ONNX Runtime within the native
network's documented tolerance); the error codes of the handle API.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from library_support import CONFIG, HEAD, MODEL, aarch64_toolchain, scan

from cuvil_perception.compile.library import build_library, symbols_for
from cuvil_perception.compile.kernel_prewarm import unique_specs
from cuvil_perception.compile.toolchain import find_toolchain, host_arch
from cuvil_perception.errors import ToolchainError
from cuvil_perception.ops.pillars.c_example_detect import detect_example_files
from cuvil_perception.ops.pillars.c_net import library_kernels, library_part, library_plan
from cuvil_perception.ops.pillars.model import PointPillars

ROOT = Path(__file__).parent.parent
ERRORS_PROGRAM = Path(__file__).parent / "native" / "detect_errors.c"
SCANS = ROOT / "datasets" / "sample_drive" / "velodyne_points" / "data"
FRAMES = 4
# nm -u of a whole-pipeline archive: libc's allocator, sort and memory calls, and sincos for
# the NMS headings (once per candidate, not in a hot loop); the rest is ours.
PIPELINE_UNDEFINED = {"aligned_alloc", "calloc", "free", "memcpy", "memset", "qsort", "sincos",
                      "sin", "cos", "_GLOBAL_OFFSET_TABLE_", "pipe_weights",
                      "pipe_backbone_weights"}


def native_model() -> PointPillars:
    """The model a library holds: the YAML's, the network lowered to native kernels."""
    return PointPillars.from_onnx(MODEL, CONFIG, HEAD, runtime="native").open()


def _library(tools, triple: str, work: Path, pp, build: bool = True, link: str = "static"):
    """The library of ``pp`` with its example folder and (``build``) the example linked
    against the .a (``link`` "static") or the .so ("detect")."""
    plan = library_plan(pp)
    specs = [s.release() for s in library_kernels(pp, plan)]
    symbols = dict(symbols_for(unique_specs(specs), "pipe"))
    part = library_part(pp, plan, symbols, "pipe")
    lib = build_library(specs, triple, work / "lib", "pipe", parts=[part])
    example = lib.out_dir / "example"
    example.mkdir()
    for name, data in detect_example_files("pipe", Path(tools.cc).name).items():
        (example / name).write_bytes(data)
    if build:
        subprocess.run(["make", "-s", "-C", str(example), link, f"CC={tools.cc}"],
                       check=True, capture_output=True)
    return lib, example / "detect"


def _rows(text: str) -> list:
    return [line.split() for line in text.splitlines()]


def _blocks(printed: str) -> list:
    """The example's output for several scans: each scan's lines (after its "# FILE")."""
    return [block.split("\n", 1)[1] for block in printed.split("# ")[1:]]


def _assert_rows(rows: list, boxes, scores, labels, exact: bool, where: str) -> None:
    assert len(rows) == len(boxes) > 0, f"{where}: {len(rows)} boxes, want {len(boxes)}"
    assert all(len(row) == 9 for row in rows)
    got = np.array([[float(v) for v in row[:8]] for row in rows], np.float32)
    np.testing.assert_array_equal([int(row[8]) for row in rows], labels, err_msg=where)
    if exact:
        np.testing.assert_array_equal(got[:, :7], boxes, err_msg=where)
        np.testing.assert_array_equal(got[:, 7], scores, err_msg=where)
    else:
        np.testing.assert_allclose(got[:, :7], boxes, rtol=1e-5, atol=1e-5, err_msg=where)
        np.testing.assert_allclose(got[:, 7], scores, rtol=1e-5, atol=1e-5, err_msg=where)


def _run_and_compare(tools, triple: str, work: Path, frames: list[Path],
                     link: str = "static") -> None:
    pp = native_model()
    lib, exe = _library(tools, triple, work, pp, link=link)
    undefined = subprocess.run(["nm", "-u", str(lib.static)], capture_output=True, text=True,
                               check=True).stdout.split()
    calls = {s for s in undefined if s not in ("U",) and not s.endswith(".o:")
             and not s.startswith("pipe_k_")}
    assert calls <= PIPELINE_UNDEFINED, calls - PIPELINE_UNDEFINED
    sections = subprocess.run(["objdump", "-h", str(lib.static)], capture_output=True,
                              text=True, check=True).stdout.splitlines()
    assert not [line for line in sections if line.split()[1:2] in ([".data"], [".bss"])
                and int(line.split()[2], 16)], "mutable global state (see the header)"
    want = [pp.detect(scan(frame)) for frame in frames]  # frame by frame, in one model
    done = subprocess.run([*tools.emulator, str(exe), *map(str, frames)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    blocks = _blocks(done.stdout)
    assert len(blocks) == len(frames)
    for i, (block, (boxes, scores, labels)) in enumerate(zip(blocks, want)):
        _assert_rows(_rows(block), boxes, scores, labels, exact=False, where=f"frame {i}")


def test_detect_through_every_native_stage_on_the_host(tmp_path, kitti_frames):
    tools = _host_tools()
    _run_and_compare(tools, f"{host_arch()}-linux-gnu", tmp_path, kitti_frames[:FRAMES])


@pytest.mark.parametrize("link", ["static", "detect"])
def test_detect_through_every_native_stage_under_qemu_aarch64(tmp_path, kitti_frames, link):
    """Linked against the .a and against the .so (found through the example's rpath)."""
    tools = aarch64_toolchain()
    _run_and_compare(tools, "aarch64-linux-gnu", tmp_path, kitti_frames[:FRAMES], link)


@pytest.mark.parametrize("target", ["", "static"])
def test_example_makefile_builds_and_make_run_prints_one_line_per_box(tmp_path, kitti_frames,
                                                                      target):
    """``make`` (the .so) or ``make static`` (the .a), then ``make run SCAN=FILE``: the
    frame's boxes as "x y z l w h yaw score label" lines, those of the Python pipeline."""
    tools = _host_tools()
    pp = native_model()
    lib, _ = _library(tools, f"{host_arch()}-linux-gnu", tmp_path, pp, build=False)
    boxes, scores, labels = pp.detect(scan(kitti_frames[0]))
    make = ["make", "-s", "-C", str(lib.out_dir / "example")]
    subprocess.run(make + ([target] if target else []), check=True, capture_output=True)
    done = subprocess.run(make + ["run", f"SCAN={kitti_frames[0]}"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    _assert_rows(_rows(done.stdout), boxes, scores, labels, exact=True, where="make run")


def test_library_layers_take_the_targets_run_length():
    """8 accumulators per run where the target's features enable AVX-512, 4 elsewhere (the
    default targets, a CPU named without features): c_net, whatever this host has."""
    from cuvil_perception.compile.target import Target
    from cuvil_perception.ops.pillars.c_net import accumulators
    from cuvil_perception.ops.pillars.kernel_bev_conv import run_length

    pp = PointPillars.from_onnx(MODEL, CONFIG, HEAD, runtime="native")
    wide = Target("x86_64-linux-gnu", "znver4", "+avx2,+fma,+avx512f")
    for target, count in ((wide, 8), (Target("x86_64-linux-gnu", "x86-64-v3"), 4),
                          (Target("aarch64-linux-gnu", "generic"), 4), (None, 4)):
        assert accumulators(target) == count
        layers = [step.spec for step in library_plan(pp, target=target).steps
                  if "run" in step.spec.static]
        assert layers and all(spec.static["run"] == run_length(spec.static["cout"], count)
                              for spec in layers)


def _host_tools():
    try:
        return find_toolchain(f"{host_arch()}-linux-gnu")
    except ToolchainError as exc:
        pytest.skip(str(exc))


def test_detect_error_codes_capacity_and_stats(tmp_path, kitti_frames):
    """open / detect / stats / close on bad arguments (NULL, negative, a config of another
    size), a capacity of one box (ECAPACITY, the best box written), stats' pillar count."""
    tools = _host_tools()
    pp = native_model()
    lib, _ = _library(tools, f"{host_arch()}-linux-gnu", tmp_path, pp, build=False)
    exe = tmp_path / "errors"
    tools.run([tools.cc, "-std=c11", "-Wall", "-Werror", f"-I{lib.out_dir}", "-o", str(exe),
               str(ERRORS_PROGRAM), str(lib.static), "-lm"], "linking the error checks")
    done = subprocess.run([str(exe), str(kitti_frames[0])], capture_output=True, text=True)
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


def _run_jsonl(work: Path, frames: int, *sets: str) -> list:
    out = work / f"run{len(sets)}.jsonl"
    done = subprocess.run([sys.executable, "-m", "cuvil_perception", "run",
                           str(ROOT / "configs" / "lidar_pillars.yaml"), "--frames",
                           str(frames), "--out", str(out), "--no-shed",
                           *[a for s in sets for a in ("--set", s)]],
                          capture_output=True, text=True, cwd=work)
    assert done.returncode == 0, done.stderr
    return [json.loads(line)["outputs"] for line in out.read_text().splitlines()]


@pytest.mark.parametrize("arch", ["host", "aarch64"])
def test_compiled_pipeline_prints_runs_jsonl_on_the_sample_drive(tmp_path, arch):
    """``compile configs/lidar_pillars.yaml --target TRIPLE --library DIR`` (the YAML as it
    is: runtime auto), the example built with ``make`` (against the .so) and run on the
    drive's first scans in one handle - on this machine, and for aarch64 under qemu-user: the
    boxes, scores and labels of ``run --set detect.runtime=native`` float32 for float32 (the
    JSONL prints the shortest repr of each float32; aarch64: within decode's tolerance), and
    those of the plain ``run`` (ONNX Runtime) within the native network's tolerance."""
    tools = _host_tools() if arch == "host" else aarch64_toolchain()
    scans = sorted(SCANS.glob("*.bin"))[:3]
    lib = tmp_path / "lib"
    triple = f"{host_arch()}-linux-gnu" if arch == "host" else "aarch64-linux-gnu"
    done = subprocess.run([sys.executable, "-m", "cuvil_perception", "compile",
                           str(ROOT / "configs" / "lidar_pillars.yaml"), "--target", triple,
                           "--library", str(lib)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    subprocess.run(["make", "-s", "-C", str(lib / "example"), f"CC={tools.cc}"], check=True,
                   capture_output=True)
    printed = subprocess.run([*tools.emulator, str(lib / "example" / "detect"),
                              *map(str, scans)], capture_output=True, text=True, check=True)
    blocks = _blocks(printed.stdout)
    for exact, sets in ((arch == "host", ("detect.runtime=native",)), (False, ())):
        frames = _run_jsonl(tmp_path, len(scans), *sets)
        for i, (frame, block) in enumerate(zip(frames, blocks, strict=True)):
            boxes = np.array(frame["boxes"]["data"], np.float32).reshape(-1, 7)
            _assert_rows(_rows(block), boxes, np.array(frame["scores"]["data"], np.float32),
                         frame["labels"]["data"], exact, f"frame {i} {sets}")


@pytest.mark.parametrize("seed,batch_norm,channels", [(1, True, (32, 32)), (3, True, (16, 32, 32))])
def test_random_cuda_pointpillars_models_run_whole_in_c(tmp_path, seed, batch_norm, channels):
    """Random-weight models of the CUDA-PointPillars layout (other depths and widths than the
    demo's, BN folded): three random clouds through one handle, against the native runtime."""
    import onnx

    from cuvil_perception.ops.pillars.config import PillarConfig
    from cuvil_perception.testing.pillars_onnx import build_pointpillars_onnx

    tools = _host_tools()
    small = PillarConfig((0.0, -10.24, -3.0, 20.48, 10.24, 1.0), (0.16, 0.16, 4.0),
                         max_pillars=900)
    path = tmp_path / "random.onnx"
    onnx.save(build_pointpillars_onnx(small, HEAD, seed=seed, batch_norm=batch_norm,
                                      channels=channels, cls_bias=-2.0), str(path))
    pp = PointPillars.from_onnx(path, small, HEAD, runtime="native").open()
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(3):
        points = np.column_stack([rng.uniform(0, 20.4, 3000), rng.uniform(-10.2, 10.2, 3000),
                                  rng.uniform(-2.5, 0.5, 3000), rng.uniform(0, 1, 3000)])
        frames.append(tmp_path / f"cloud{i}.bin")
        points.astype("<f4").tofile(frames[-1])
    want = [pp.detect(scan(frame)) for frame in frames]
    _, exe = _library(tools, f"{host_arch()}-linux-gnu", tmp_path, pp)
    printed = subprocess.run([str(exe), *map(str, frames)], capture_output=True, text=True,
                             check=True).stdout
    for i, (block, (boxes, scores, labels)) in enumerate(zip(_blocks(printed), want,
                                                             strict=True)):
        _assert_rows(_rows(block), boxes, scores, labels, exact=False, where=f"cloud {i}")


def test_whole_pipeline_library_under_kernel_debug(tmp_path, capsys, monkeypatch, repo_root):
    """CUVIL_KERNEL_DEBUG=1 (the pipeline declares debug builds): the library holds release
    builds of every kernel, the backbone's too, and prints the native pipeline's boxes."""
    from cuvil_perception.cli import main

    _host_tools()  # a skip without the host C toolchain
    monkeypatch.setenv("CUVIL_KERNEL_DEBUG", "1")
    out = tmp_path / "lib"
    try:
        main(["compile", str(repo_root / "configs" / "lidar_pillars.yaml"), "--target",
              f"{host_arch()}-linux-gnu", "--library", str(out), "--prefix", "dbg"])
    except SystemExit as exc:
        assert exc.code == 0, capsys.readouterr().err
    assert "_debug" not in (out / "library.json").read_text()
    subprocess.run(["make", "-s", "-C", str(out / "example")], check=True, capture_output=True)
    first = sorted(SCANS.glob("*.bin"))[0]
    printed = subprocess.run([str(out / "example" / "detect"), str(first)], capture_output=True,
                             text=True, check=True).stdout
    monkeypatch.setenv("CUVIL_KERNEL_DEBUG", "0")
    boxes, scores, labels = native_model().detect(scan(first))
    _assert_rows(_rows(printed), boxes, scores, labels, exact=True, where="debug build")
