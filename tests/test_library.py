"""``compile --library``: the header compiles and matches the kernels, the host library loaded
through ctypes computes what the in-process kernels compute, two libraries link together, and
the failure paths (missing toolchain, foreign directory, bad prefix / CPU) are one-line errors."""

from __future__ import annotations

import ctypes
import json
import re
import subprocess

import numpy as np
import pytest
from library_support import (CONFIG, HEAD, assert_decode_close, assert_pfn_close, head_maps,
                             model, pillars_specs, scan)

from cuvil_perception.cli import main
from cuvil_perception.compile import examples
from cuvil_perception.compile.cheader import arg_decls, c_type, kernel_block
from cuvil_perception.compile.library import MANIFEST, build_library
from cuvil_perception.compile.toolchain import find_toolchain, host_arch
from cuvil_perception.compile import Arg, KernelSpec
from cuvil_perception.compile.spec import CTYPES
from cuvil_perception.errors import CompileError, ToolchainError
from cuvil_perception.ops.pillars.native import (DecodeKernel, NmsKernel, PfnKernel,
                                                 PillarizeKernel, ScatterKernel)

TRIPLE = f"{host_arch()}-linux-gnu"
_SCALARS = {"i32": "int32_t", "i64": "int64_t", "f32": "float", "f64": "double"}


@pytest.fixture(scope="module")
def host_lib(tmp_path_factory):
    try:
        find_toolchain(TRIPLE)
    except ToolchainError as exc:
        pytest.skip(str(exc))
    return build_library(pillars_specs() + [examples.AXPY], TRIPLE,
                         tmp_path_factory.mktemp("hostlib") / "lib", "cuvil_test")


def test_header_compiles_and_matches_the_kernel_signatures(host_lib, tmp_path):
    source = tmp_path / "use.c"
    source.write_text(f'#include "{host_lib.header.name}"\nint main(void) {{ return 0; }}\n')
    tools = find_toolchain(TRIPLE)
    tools.run([tools.cc, "-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror",
               "-fsyntax-only", f"-I{host_lib.out_dir}", str(source)], "compiling the header")
    text = host_lib.header.read_text()
    for spec, symbol in host_lib.symbols:
        found = re.search(rf"^(\w+) {symbol}\((.*)\);$", text, re.M)
        assert found, symbol
        assert found.group(1) == "int"  # 0, the count, or an error code (cabi)
        params = [p.strip() for p in found.group(2).split(",")]
        assert len(params) == len(spec.args), symbol
        for param, kind, doc in zip(params, spec.args, arg_decls(spec)):
            assert param.endswith("*" + doc.name if kind == "ptr" else " " + doc.name), param
            assert ("*" in param) == (kind == "ptr"), param
            if kind != "ptr":
                assert param.startswith(_SCALARS[kind])
            else:
                assert param.startswith(c_type(doc, bool(spec.arg_docs))), param
    sizes = dict(re.findall(r"#define CUVIL_TEST_PILLARS_PILLARIZE_(\w+)_LEN (\d+)", text))
    assert int(sizes["VOXELS"]) == (CONFIG.max_pillars * CONFIG.max_points_per_pillar + 4) * 4
    assert int(sizes["GRID"]) == CONFIG.num_cells


def _bind(lib_handle, kernel, symbol: str):
    """Point a native-kernel object at the library's entry point instead of the JIT's (the
    kernel's arguments; it returns int: 0, the count, or an error code)."""
    args = kernel.spec.release().args  # release ABI: no error record
    kernel.kernel = ctypes.CFUNCTYPE(ctypes.c_int, *(CTYPES[a] for a in args))(
        (symbol, lib_handle))
    return kernel


def test_host_library_through_ctypes_equals_in_process_kernels(host_lib, kitti_frames):
    handle = ctypes.CDLL(str(host_lib.shared))
    pp = model()
    pairs = {}
    for cls, args in ((PillarizeKernel, (CONFIG,)), (PfnKernel, (CONFIG, pp.split.pfn)),
                      (ScatterKernel, (CONFIG,)), (DecodeKernel, (CONFIG, HEAD, pp.anchors)),
                      (NmsKernel, (HEAD,))):
        lib_kernel = _bind(handle, cls(*args), host_lib.symbol(cls(*args).spec.name))
        pairs[cls.__name__] = (lib_kernel, cls(*args).open())
    for index, frame in enumerate(kitti_frames):
        points = scan(frame)
        got, want = (pair(points) for pair in pairs["PillarizeKernel"])
        for name in ("counts", "coords", "num_points", "voxels"):
            assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), name
        n = want.count
        features = [k(p) for k, p in zip(pairs["PfnKernel"], (got, want))]
        assert_pfn_close(features[0][:n], features[1][:n])
        maps = [k(features[1], want.coords, n) for k in pairs["ScatterKernel"]]
        assert maps[0].tobytes() == maps[1].tobytes()
        if index < 2:  # decode + NMS on the backbone's maps of two frames
            heads = head_maps(pp, points)
            cand = [k(*heads) for k in pairs["DecodeKernel"]]
            c = cand[1]
            assert_decode_close({"count": cand[0].count, "overflow": cand[0].overflow,
                                 **{f: getattr(cand[0], f)[:cand[0].count] for f in
                                    ("boxes", "scores", "labels", "anchor")}}, c)
            kept = [k(c.boxes, c.scores, c.count) for k in pairs["NmsKernel"]]
            np.testing.assert_array_equal(kept[0], kept[1])


def test_two_libraries_link_into_one_program(host_lib, tmp_path):
    other = build_library([examples.AXPY], TRIPLE, tmp_path / "other", "cuvil_other")
    source = tmp_path / "both.c"
    source.write_text(
        '#include <stdio.h>\n#include "cuvil_test.h"\n#include "cuvil_other.h"\n'
        "int main(void) {\n  static float x[1024], y[1024], z[1024];\n"
        "  for (int i = 0; i < 1024; i++) { x[i] = (float)i; y[i] = 1.0f; z[i] = 2.0f; }\n"
        "  cuvil_test_example_axpy(x, y, 2.0f);\n  cuvil_other_example_axpy(x, z, 3.0f);\n"
        '  printf("%g %g\\n", (double)y[10], (double)z[10]);\n  return 0;\n}\n')
    exe = tmp_path / "both"
    tools = find_toolchain(TRIPLE)
    tools.run([tools.cc, "-std=c11", "-Wall", "-Werror", f"-I{host_lib.out_dir}",
               f"-I{other.out_dir}", "-o", str(exe), str(source), str(host_lib.static),
               str(other.static), "-lm"], "linking two libraries")
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["21", "32"]


@pytest.mark.parametrize("debug", [False, True])
def test_cli_writes_library_and_a_running_example(tmp_path, capsys, repo_root, kitti_frames,
                                                  monkeypatch, debug):
    """Also under CUVIL_KERNEL_DEBUG=1: the library holds release builds, and says so."""
    monkeypatch.setenv("CUVIL_KERNEL_DEBUG", "1" if debug else "0")
    out = tmp_path / "lib"
    main_args = ["compile", str(repo_root / "configs" / "lidar_pillars.yaml"), "--target",
                 TRIPLE, "--library", str(out), "--prefix", "lidar", "--kernels-only"]
    try:
        main(main_args)
    except SystemExit as exc:
        assert exc.code == 0, capsys.readouterr().err
    assert ("writes release builds" in capsys.readouterr().out) == debug
    assert {"liblidar.so", "liblidar.so.1", "liblidar.a", "lidar.h", MANIFEST} <= \
        {p.name for p in out.iterdir()}
    assert "_debug" not in (out / MANIFEST).read_text()
    assert "error_record" not in (out / "lidar.h").read_text()
    example = out / "example"
    subprocess.run(["make", "-s", "-C", str(example)], check=True, capture_output=True)
    run = subprocess.run([str(example / "example"), str(kitti_frames[0]),
                          str(example / "pfn_weights.f32")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    counts = PillarizeKernel(CONFIG).open()(scan(kitti_frames[0])).counts
    assert f"-> {counts[0]} pillars" in run.stdout


def _cli_error(args, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_missing_cross_toolchain_names_the_apt_package(tmp_path, capsys, repo_root,
                                                       monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler on the PATH at all
    foreign = "aarch64-linux-gnu" if host_arch() != "aarch64" else "x86_64-linux-gnu"
    err = _cli_error(["compile", str(repo_root / "configs" / "lidar_pillars.yaml"), "--target",
                      foreign, "--library", str(tmp_path / "lib")], capsys)
    assert "apt package gcc-" in err
    assert not (tmp_path / "lib").exists()


@pytest.mark.parametrize("extra, message", [
    (["--prefix", "9bad-name"], "must be a C identifier"),
    (["--cpu", "no-such-cpu"], "LLVM does not know this CPU"),
    (["--cpu", ""], "--cpu: empty"),
])
def test_bad_prefix_and_cpu(tmp_path, capsys, repo_root, extra, message):
    args = ["compile", str(repo_root / "configs" / "lidar_pillars.yaml"), "--target", TRIPLE,
            "--library", str(tmp_path / "lib"), *extra]
    assert message in _cli_error(args, capsys)


def test_never_writes_into_a_foreign_directory(tmp_path, capsys, repo_root):
    (tmp_path / "notes.txt").write_text("mine")
    err = _cli_error(["compile", str(repo_root / "configs" / "lidar_pillars.yaml"), "--target",
                      TRIPLE, "--library", str(tmp_path)], capsys)
    assert "holds no library.json" in err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    err = _cli_error(["compile", str(repo_root / "configs" / "lidar_pillars.yaml"),
                      "--library", str(tmp_path / "x")], capsys)
    assert "--library DIR needs --target TRIPLE" in err


@pytest.mark.parametrize("args, message", [
    ((Arg("x", "ptr", "f32"), "i64"), "every argument as an Arg"),
    ((Arg("x", "ptr"),), "dtype is given for pointers"),
    ((Arg("n", "i64", "f32"),), "dtype is given for pointers"),
    ((Arg("x", "ptr", "f16"),), "unknown dtype"),
    ((Arg("x y", "ptr", "f32"),), "C identifier"),
    ((Arg("x", "ptr", "f32", role="output"),), "unknown role"),
    ((Arg("x", "ptr", "f32"), Arg("x", "i64")), "duplicate"),
])
def test_argument_declarations_are_checked(args, message):
    with pytest.raises(CompileError, match=message):
        KernelSpec("t.bad", examples.AXPY.build, {"n": 4}, args)


def test_kernel_language_kernels_are_documented_in_the_header():
    from cuvil_perception.ops.yolo.kernel_scan import scan_spec

    spec = scan_spec([(80, 80), (40, 40), (20, 20)], 80).release()  # what a library holds
    assert [a.name for a in spec.arg_docs] == ["cls_table", "best", "cand", "threshold"]
    assert [a.dtype for a in spec.arg_docs] == ["u64", "f32", "i64", None]
    block = kernel_block(spec, "lib_yolo_scan")
    assert "int lib_yolo_scan(const uint64_t *cls_table, float *best, int64_t *cand, " \
           "float threshold);" in block   # the table is only read: const, role `in`


def test_header_and_manifest_state_the_fast_math_flags_with_the_helpers(host_lib):
    text = host_lib.header.read_text()
    assert "/* pillars.decode  (fast-math: none (helpers: irutil.vexp contract))" in text
    assert "/* pillars.pillarize  (fast-math: none)" in text
    kernels = {k["name"]: k for k in json.loads((host_lib.out_dir / MANIFEST).read_text())
               ["kernels"]}
    decode = kernels["pillars.decode"]
    assert (decode["fastmath"], decode["fastmath_helpers"], decode["fastmath_emitted"]) == \
        ([], {"irutil.vexp": ["contract"]}, ["contract"])
    assert kernels["pillars.pillarize"]["fastmath_emitted"] == []
