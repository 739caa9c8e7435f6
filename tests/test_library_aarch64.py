"""The PointPillars kernels built as an aarch64 library, run under qemu-user on the ten KITTI
frames, against this machine's native kernels: bitwise for pillarize and scatter, within the
documented tolerances for PFN and decode (library_support)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from library_support import (CONFIG, HEAD, TRIPLE, aarch64_toolchain, assert_decode_close,
                             assert_pfn_close, head_maps, model, pillars_specs, scan,
                             weights_file)

from cuvil_perception.compile.library import build_library
from cuvil_perception.ops.pillars.native import (DecodeKernel, PfnKernel, PillarizeKernel,
                                                 ScatterKernel)

HARNESS = Path(__file__).parent / "native" / "pillars_harness.c"


@pytest.fixture(scope="module")
def aarch64_run(tmp_path_factory, kitti_frames):
    """Build the library and the harness, run it on every frame; yields the output folder."""
    tools = aarch64_toolchain()
    work = tmp_path_factory.mktemp("aarch64")
    lib = build_library(pillars_specs(), TRIPLE, work / "lib", "harness")
    exe = work / "harness"
    tools.run([tools.cc, "-O2", "-Wall", "-Werror", "-std=c11", "-o", str(exe), str(HARNESS),
               f"-I{lib.out_dir}", str(lib.static), "-lm"], "building the harness")
    pp = model()
    np.ascontiguousarray(pp.anchors, np.float32).tofile(work / "anchors.f32")
    for i, frame in enumerate(kitti_frames):
        np.concatenate([m.ravel() for m in head_maps(pp, scan(frame))]).tofile(
            work / f"head_{i}.f32")
    done = subprocess.run([*tools.emulator, str(exe), str(weights_file(pp, work / "w.f32")),
                           str(work / "anchors.f32"), str(work), *map(str, kitti_frames)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    yield work, pp
    for big in work.glob("*_*.*"):  # ~170 MB of maps and outputs: pytest keeps its tmp dirs
        big.unlink()


def _pillarize_out(path: Path):
    raw = path.read_bytes()
    counts = np.frombuffer(raw[:40], np.int64)
    n, k = int(counts[0]), CONFIG.max_points_per_pillar
    at = 40
    coords = np.frombuffer(raw[at:at + n * 12], np.int32).reshape(n, 3)
    at += n * 12
    num_points = np.frombuffer(raw[at:at + n * 4], np.int32)
    at += n * 4
    voxels = np.frombuffer(raw[at:], np.float32).reshape(n, k, 4)
    return counts, coords, num_points, voxels


def _decode_out(path: Path) -> dict:
    raw = path.read_bytes()
    count, overflow = np.frombuffer(raw[:16], np.int64)
    n = int(count)
    fields, at = {}, 16
    for name, dtype, width in (("boxes", np.float32, 7), ("scores", np.float32, 1),
                               ("labels", np.int32, 1), ("anchor", np.int32, 1)):
        fields[name] = np.frombuffer(raw[at:at + n * width * 4], dtype).reshape(n, width)
        at += n * width * 4
    return {"count": n, "overflow": int(overflow), "boxes": fields["boxes"],
            "scores": fields["scores"][:, 0], "labels": fields["labels"][:, 0],
            "anchor": fields["anchor"][:, 0]}


def test_aarch64_library_matches_host_kernels(aarch64_run, kitti_frames):
    work, pp = aarch64_run
    pillarize, pfn = PillarizeKernel(CONFIG).open(), PfnKernel(CONFIG, pp.split.pfn).open()
    scatter = ScatterKernel(CONFIG).open()
    decode = DecodeKernel(CONFIG, HEAD, pp.anchors).open()
    checked = 0
    for i, frame in enumerate(kitti_frames):
        host = pillarize(scan(frame))
        n = host.count
        counts, coords, num_points, voxels = _pillarize_out(work / f"pz_{i}.bin")
        np.testing.assert_array_equal(counts, host.counts, err_msg=f"frame {i} counts")
        np.testing.assert_array_equal(coords, host.coords[:n], err_msg=f"frame {i}")
        np.testing.assert_array_equal(num_points, host.num_points[:n], err_msg=f"frame {i}")
        assert voxels.tobytes() == host.voxels[:n].tobytes(), f"frame {i}: voxels differ"
        features = np.fromfile(work / f"pfn_{i}.bin", np.float32).reshape(n, -1)
        assert_pfn_close(features, pfn(host)[:n])
        # the scatter on the aarch64 features, host side: bitwise the same map
        rows = np.zeros((CONFIG.max_pillars, features.shape[1]), np.float32)
        rows[:n] = features
        bev = scatter(rows, host.coords, n)
        raw = (work / f"sc_{i}.bin").read_bytes()
        assert np.frombuffer(raw[:8], np.int64)[0] == np.count_nonzero(bev.view(np.uint32))
        cells = bev[:, host.coords[:n, 1], host.coords[:n, 2]]
        assert raw[8:] == np.ascontiguousarray(cells).tobytes(), f"frame {i}: map differs"
        head = np.fromfile(work / f"head_{i}.f32", np.float32)  # the maps aarch64 decoded
        classes, anchors = HEAD.num_classes, len(pp.anchors)
        maps = np.split(head, [anchors * classes, anchors * (classes + 7)])
        assert_decode_close(_decode_out(work / f"dec_{i}.bin"), decode(*maps))
        checked += 1
    assert checked == len(kitti_frames) == 10
