"""The stable C ABI of ``compile --library`` (issue 29 items 3 and 5): versioned SONAME and its
symlinks, ``<PREFIX>_ABI_VERSION`` / ``<prefix>_version()``, error codes and
``<prefix>_strerror``, argument checks of every entry point, only the API exported (nm -D), a
program linked against the .so and statically against the .a (also under qemu-aarch64),
the archive's undefined symbols (nm -u: no libm, no fmaf), the default CPU, and the refusal of
a whole pipeline whose backbone cannot be compiled."""

from __future__ import annotations

import ctypes
import json
import re
import subprocess

import numpy as np
import pytest
from library_support import CONFIG, aarch64_toolchain, assert_pfn_close, model, pillars_specs, scan

from cuvil_perception.cli import main
from cuvil_perception.compile.cabi import ABI_MAJOR, ABI_MINOR, ERRORS
from cuvil_perception.compile.library import MANIFEST, build_library
from cuvil_perception.compile.toolchain import X86_64_V3, default_cpu, find_toolchain, host_arch
from cuvil_perception.errors import ToolchainError
from cuvil_perception.ops.pillars.native import PfnKernel, PillarizeKernel

TRIPLE = f"{host_arch()}-linux-gnu"
# nm -u of a kernels-only archive: what LLVM may call for a large copy or clear. Nothing else,
# in particular no fmaf / fma (issue 29 item 5) and no other libm function.
KERNEL_UNDEFINED = {"memcpy", "memset", "memmove"}
CODES = {name: value for name, value, _ in ERRORS}

_PROGRAM = r"""#include <stdio.h>
#include "abi.h"
int main(void) {
    printf("%d %d\n", abi_version(), ABI_ABI_VERSION);
    printf("build %d %d\n", abi_check_build(ABI_BUILD_ID), abi_check_build(ABI_BUILD_ID ^ 1));
    for (int code = 0; code >= -6; code--) printf("%d %s\n", code, abi_strerror(code));
    int64_t counts[5] = {0};
    printf("null %d\n", abi_pillars_pillarize(NULL, 0, NULL, NULL, NULL, counts, NULL, NULL,
                                              NULL));
    static float box[7]; static double c[1], s[1]; static int32_t keep[ABI_PILLARS_NMS_POST];
    static uint8_t u[ABI_PILLARS_NMS_PRE], near[ABI_PILLARS_NMS_PRE];
    static double table[ABI_PILLARS_NMS_PRE * 12], ext[4 * ABI_PILLARS_NMS_PRE];
    printf("range %d %d\n", abi_pillars_nms(box, c, s, -1, keep, u, table, ext, near),
           abi_pillars_nms(box, c, s, ABI_PILLARS_NMS_PRE + 1, keep, u, table, ext, near));
    printf("nms %d\n", abi_pillars_nms(box, c, s, 1, keep, u, table, ext, near));
    return 0;
}
"""


def _tools(triple: str):
    try:
        return find_toolchain(triple)
    except ToolchainError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def abi_lib(tmp_path_factory):
    _tools(TRIPLE)
    return build_library(pillars_specs(), TRIPLE, tmp_path_factory.mktemp("abi") / "lib", "abi")


def _undefined(archive) -> set[str]:
    out = subprocess.run(["nm", "-u", str(archive)], capture_output=True, text=True,
                         check=True).stdout.split()
    return {s for s in out if s != "U" and not s.endswith(".o:")}


def test_soname_symlinks_version_and_only_the_api_exported(abi_lib):
    real = abi_lib.out_dir / f"libabi.so.{ABI_MAJOR}.{ABI_MINOR}"
    assert real.is_file() and not real.is_symlink()
    assert (abi_lib.out_dir / f"libabi.so.{ABI_MAJOR}").readlink().name == real.name
    assert abi_lib.shared.readlink().name == f"libabi.so.{ABI_MAJOR}"
    dynamic = subprocess.run(["readelf", "-d", str(real)], capture_output=True, text=True,
                             check=True).stdout
    assert f"Library soname: [libabi.so.{ABI_MAJOR}]" in dynamic
    exported = subprocess.run(["nm", "-D", "--defined-only", str(real)], capture_output=True,
                              text=True, check=True).stdout.split()[2::3]
    kernels = {symbol for _, symbol in abi_lib.symbols}
    assert set(exported) == kernels | {"abi_version", "abi_check_build", "abi_strerror"}
    lib = ctypes.CDLL(str(abi_lib.shared))
    lib.abi_strerror.restype = ctypes.c_char_p
    assert lib.abi_version() == ABI_MAJOR * 1000 + ABI_MINOR
    assert lib.abi_strerror(CODES["ENULL"]) == b"a required pointer argument is NULL"
    assert lib.abi_strerror(-999) == b"unknown error code"
    assert json.loads((abi_lib.out_dir / MANIFEST).read_text())["soname"] == "libabi.so.1"


def _program(tools, lib, work, static: bool):
    source = work / "use.c"
    source.write_text(_PROGRAM)
    exe = work / ("use_static" if static else "use_shared")
    link = [str(lib.static)] if static else [f"-L{lib.out_dir}", "-labi",
                                             f"-Wl,-rpath,{lib.out_dir}"]
    tools.run([tools.cc, "-std=c11", "-Wall", "-Werror", f"-I{lib.out_dir}", "-o", str(exe),
               str(source), *link], "linking the ABI program")
    done = subprocess.run([*tools.emulator, str(exe)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _check_program(lines: list[str]) -> None:
    assert lines[0] == f"{ABI_MAJOR * 1000 + ABI_MINOR} {ABI_MAJOR * 1000 + ABI_MINOR}"
    assert lines[1] == f"build 0 {CODES['ECONFIG']}"
    texts = {value: text for _, value, text in ERRORS}
    for line, code in zip(lines[2:9], range(0, -7, -1)):
        assert line == f"{code} {texts.get(code, 'unknown error code')}"
    assert lines[9] == f"null {CODES['ENULL']}"
    assert lines[10] == f"range {CODES['ERANGE']} {CODES['ERANGE']}"
    assert lines[11] == "nms 1"  # one box is kept: the call went through


@pytest.mark.parametrize("static", [False, True])
def test_a_c_program_links_against_the_so_and_the_a(abi_lib, tmp_path, static):
    _check_program(_program(_tools(TRIPLE), abi_lib, tmp_path, static))


@pytest.mark.parametrize("static", [False, True])
def test_the_same_program_under_qemu_aarch64(tmp_path_factory, tmp_path, static):
    tools = aarch64_toolchain()
    specs = pillars_specs()
    lib = build_library([specs[0], specs[-1]], tools.triple, tmp_path / "lib", "abi")
    assert lib.target.cpu == "generic"
    _check_program(_program(tools, lib, tmp_path, static))
    assert _undefined(lib.static) - {s for s in _undefined(lib.static) if s.startswith("abi_k_")} \
        <= KERNEL_UNDEFINED


@pytest.mark.parametrize("cpu", [None, "x86-64-v2"])
def test_archive_needs_no_libm_and_x86_64_v2_pfn_keeps_its_tolerance(tmp_path, cpu,
                                                                      kitti_frames):
    if host_arch() != "x86_64":
        pytest.skip("x86-64 CPU levels")
    lib = build_library(pillars_specs(), TRIPLE, tmp_path / "lib", "abi", cpu)
    ours = {f"abi_k_{symbol.removeprefix('abi_')}" for _, symbol in lib.symbols}
    assert _undefined(lib.static) - ours <= KERNEL_UNDEFINED
    handle = ctypes.CDLL(str(lib.shared))
    pp = model()
    kernel = PfnKernel(CONFIG, pp.split.pfn)
    kernel.kernel = ctypes.CFUNCTYPE(ctypes.c_int, *(ctypes.c_void_p,) * 3, ctypes.c_int64,
                                     *(ctypes.c_void_p,) * 3)((lib.symbol("pillars.pfn"), handle))
    want = PfnKernel(CONFIG, pp.split.pfn).open()
    pillars = PillarizeKernel(CONFIG).open()(scan(kitti_frames[0]))
    n = pillars.count
    assert_pfn_close(kernel(pillars)[:n].copy(), want(pillars)[:n])


def test_default_cpu_has_fma_when_this_machine_does():
    if host_arch() != "x86_64":
        assert default_cpu("aarch64-linux-gnu") == "generic"
        return
    from cuvil_perception.compile.target import host_has

    expected = "x86-64-v3" if all(host_has(f) for f in X86_64_V3) else "x86-64-v2"
    assert default_cpu("x86_64-linux-gnu") == expected


def test_whole_pipeline_is_refused_when_the_network_does_not_lower(tmp_path, capsys,
                                                                   repo_root):
    """A model with an op the native network does not take (a Sigmoid where a Relu was) has no
    C pipeline: one line naming the node and its op, exit 2, no folder."""
    import onnx

    from cuvil_perception.ops.pillars.config import HeadConfig, PillarConfig
    from cuvil_perception.testing.pillars_onnx import build_pointpillars_onnx

    small = PillarConfig((0.0, -10.24, -3.0, 20.48, 10.24, 1.0), (0.16, 0.16, 4.0),
                         max_pillars=900)
    net = build_pointpillars_onnx(small, HeadConfig(), seed=0)
    next(n for n in net.graph.node if n.name == "Relu_b1").op_type = "Sigmoid"
    onnx.save(net, str(tmp_path / "sigmoid.onnx"))
    out = tmp_path / "lib"
    with pytest.raises(SystemExit) as exc:
        main(["compile", str(repo_root / "configs" / "lidar_pillars.yaml"), "--target", TRIPLE,
              "--library", str(out), "--set", f"detect.model={tmp_path / 'sigmoid.onnx'}",
              "--set", "detect.point_cloud_range=[0.0, -10.24, -3.0, 20.48, 10.24, 1.0]",
              "--set", "detect.max_pillars=900"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "'Relu_b1' (Sigmoid)" in err, err
    assert not out.exists()


def test_pfn_weights_layout_and_head_table_sizes_are_in_the_header(abi_lib, tmp_path):
    text = abi_lib.header.read_text()
    assert "rows 10-13 = W0 + W4 + W7" in text and "fold_weights" not in text
    assert "#define ABI_PILLARS_PFN_WEIGHTS_LEN 896" in text
    assert "#define ABI_PILLARS_PFN_OUT_ROW_LEN 64" in text
    assert "#define ABI_PILLARS_PFN_NUM_POINTS_ROW_LEN 1" in text  # [count]: one per pillar
    assert "#define ABI_PILLARS_NMS_COSINES_ROW_BYTES 8" in text
    from cuvil_perception.compile.cheader import kernel_block

    heads = model().heads.spec.release()
    block = kernel_block(heads, "abi_pillars_head_cells")
    assert "#define ABI_PILLARS_HEAD_CELLS_FEATS_LEN 2" in block
    assert "#define ABI_PILLARS_HEAD_CELLS_WEIGHTS_LEN 8192" in block
    np.testing.assert_equal(heads.static["parts"], [64, 64])


def test_fma_is_split_only_where_the_cpu_has_none():
    """f32 vectors and an f64 scalar: x86-64-v2 gets mul + add (no fmaf / fma call), x86-64-v3
    and aarch64 keep one fused instruction."""
    from cuvil_perception.compile.codegen import compile_ir
    from cuvil_perception.compile.fma_split import has_native_fma
    from cuvil_perception.compile.target import Target

    ir = """
declare <8 x float> @"llvm.fma.v8f32"(<8 x float>, <8 x float>, <8 x float>)
declare double @llvm.fma.f64(double, double, double)
define void @k(<8 x float>* %p, double* %q) {
  %a = load <8 x float>, <8 x float>* %p
  %r = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %a, <8 x float> %a, <8 x float> %a)
  store <8 x float> %r, <8 x float>* %p
  %d = load double, double* %q
  %e = call double @llvm.fma.f64(double %d, double %d, double %d)
  store double %e, double* %q
  ret void
}
"""
    for triple, cpu, native in (("x86_64-linux-gnu", "x86-64-v2", False),
                                ("x86_64-linux-gnu", "x86-64-v3", True),
                                ("aarch64-linux-gnu", "generic", True)):
        target = Target(triple, cpu)
        assert has_native_fma(target) == native
        asm = compile_ir(ir, target, want_text=True).asm
        assert re.search(r"(call\w*|bl|b|jmp)\s+fmaf?\b", asm) is None, cpu  # no libm call
        assert ("vfmadd" in asm or "fmla" in asm or "fmadd" in asm) == native, cpu


def test_no_mutable_global_state_backs_the_thread_safety_statement(abi_lib):
    """The header says the library keeps no global or static mutable state: no .data / .bss
    bytes in any object of the archive (constants live in .rodata)."""
    sections = subprocess.run(["objdump", "-h", str(abi_lib.static)], capture_output=True,
                              text=True, check=True).stdout
    sizes = [int(line.split()[2], 16) for line in sections.splitlines()
             if len(line.split()) > 2 and line.split()[1].startswith((".data", ".bss"))]
    assert sum(sizes) == 0
    assert "Thread safety: the library keeps no global or static mutable state" in \
        abi_lib.header.read_text()


def test_build_id_tells_two_builds_apart(abi_lib, tmp_path):
    """Another pillar budget changes the header's buffer sizes, hence its BUILD_ID; the same
    build twice gives the same one."""
    from cuvil_perception.ops.pillars.config import PillarConfig
    from cuvil_perception.ops.pillars.kernel_pillarize import pillarize_spec

    def build_id(lib) -> str:
        return re.search(r"#define ABI_BUILD_ID (0x[0-9a-f]{16}ULL)", lib.header.read_text())[1]

    again = build_library(pillars_specs(), TRIPLE, tmp_path / "again", "abi")
    other = build_library([pillarize_spec(PillarConfig(max_pillars=8000))], TRIPLE,
                          tmp_path / "other", "abi")
    assert build_id(again) == build_id(abi_lib) != build_id(other)
