"""`c_backbone`: a native backbone handed to the library as a `BackbonePlan` (kernels in order,
workspace buffers, a weights blob) becomes ``<prefix>_backbone`` and runs inside
``<prefix>_detect``. The network here is a toy of two kernel-language kernels (PointPillars'
own, lowered by native_net and adapted by c_net: tests/test_library_pipeline.py), so the test
checks the plumbing - argument sources,
workspace placement, weights offsets, the blob - against the same toy in numpy followed by the
Python pipeline's heads, decode and NMS on two KITTI frames."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from library_support import model, scan

from cuvil_perception.compile.lang import Buf, f32, kernel
from cuvil_perception.compile.library import build_library, symbols_for
from cuvil_perception.compile.kernel_prewarm import unique_specs
from cuvil_perception.compile.toolchain import find_toolchain, host_arch
from cuvil_perception.errors import CompileError, ToolchainError
from cuvil_perception.ops.pillars import c_detect
from cuvil_perception.ops.pillars.c_backbone import BackbonePlan, Step, backbone_part
from cuvil_perception.ops.pillars.c_example_detect import detect_example_files


@kernel(name="test.toy_scale")
def toy_scale(x: Buf[f32, "n"], scale: Buf[f32, 1], out: Buf[f32, "n"], *, n: int):
    """out = x * scale[0]."""
    for i in range(n):
        out[i] = x[i] * scale[0]


@kernel(name="test.toy_heads")
def toy_heads(x: Buf[f32, "cells", "channels"], bias: Buf[f32, "groups"],
              cls: Buf[f32, "cells", "groups"], feat: Buf[f32, "width", "cells"], *,
              cells: int, channels: int, groups: int, width: int):
    """cls[c, g] = x[c, g % channels] + bias[g]; feat[k, c] = x[c, k % channels]."""
    for c in range(cells):
        for g in range(groups):
            cls[c, g] = x[c, g % channels] + bias[g]
        for k in range(width):
            feat[k, c] = x[c, k % channels]


def _plan(pp) -> tuple[BackbonePlan, callable]:
    """The toy backbone for ``pp``'s shapes, and its numpy twin (map -> cls, [feats])."""
    ho, wo, cout = pp.scatter.out.shape
    cells, groups = pp.heads.sizes
    parts = pp.heads.parts
    scale = np.array([1.5], np.float32)
    bias = np.linspace(-4.0, -2.5, groups, dtype=np.float32)
    blob = np.zeros(16 + groups, np.float32)
    blob[0], blob[16:16 + groups] = scale[0], bias  # scale at byte 0, bias at byte 64
    n = ho * wo * cout
    steps = [Step(toy_scale.spec(n=n), ("input", "w:scale", "buf:scaled"))]
    steps += [Step(toy_heads.spec(cells=cells, channels=cout, groups=groups, width=width),
                   ("buf:scaled", "w:bias", "cls" if k == 0 else "buf:spare", f"feat:{k}"))
              for k, width in enumerate(parts)]
    plan = BackbonePlan(steps, {"spare": cells * groups * 4, "scaled": n * 4},
                        blob.astype("<f4").tobytes(), {"scale": 0, "bias": 64})

    def twin(bev):
        x = (bev.reshape(cells, cout) * scale[0]).astype(np.float32)
        cls = x[:, np.arange(groups) % cout] + bias
        feats = [np.ascontiguousarray(x[:, np.arange(w) % cout].T) for w in parts]
        return cls.astype(np.float32), feats

    return plan, twin


def test_a_backbone_plan_runs_inside_detect(tmp_path, kitti_frames):
    triple = f"{host_arch()}-linux-gnu"
    try:
        tools = find_toolchain(triple)
    except ToolchainError as exc:
        pytest.skip(str(exc))
    pp = model()
    plan, twin = _plan(pp)
    specs = [s.release() for s in pp.kernels()] + plan.kernels()
    symbols = dict(symbols_for(unique_specs(specs), "toy"))
    part = c_detect.detect_part(pp, symbols, "toy", backbone_part(plan, symbols, "toy"))
    lib = build_library(specs, triple, tmp_path / "lib", "toy", parts=[part])
    example = lib.out_dir / "example"
    example.mkdir()
    for name, data in detect_example_files("toy", "cc").items():
        (example / name).write_bytes(data)
    subprocess.run(["make", "-s", "-C", str(example)], check=True, capture_output=True)
    frames = kitti_frames[:2]
    done = subprocess.run([str(example / "detect"), *map(str, frames)], capture_output=True,
                          text=True, check=True)
    blocks = done.stdout.split("# ")[1:]
    for frame, block in zip(frames, blocks):
        cls, feats = twin(np.array(pp.bev(scan(frame))))
        cells = pp.heads(cls, feats)
        boxes, scores, labels = pp.postprocess(cls, cells.box, cells.dir)
        rows = [line.split() for line in block.splitlines()[1:]]
        assert len(rows) == len(boxes) > 0
        got = np.array([[float(v) for v in row[:8]] for row in rows], np.float32)
        np.testing.assert_allclose(got[:, :7], boxes, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[:, 7], scores, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal([int(row[8]) for row in rows], labels)


@pytest.mark.parametrize("args, message", [
    (("input", "w:nope", "buf:scaled"), "unknown source 'w:nope'"),
    (("input", "w:scale"), "2 arguments for 3 parameters"),
    (("input", "w:scale", "w:scale"), "writes weights 'scale'"),
])
def test_a_wrong_plan_is_a_compile_error(args, message):
    spec = toy_scale.spec(n=4)
    plan = BackbonePlan([Step(spec, args)], {"scaled": 16}, bytes(64), {"scale": 0})
    symbols = dict(symbols_for([spec.release()], "toy"))
    with pytest.raises(CompileError, match=message):
        backbone_part(plan, symbols, "toy")
