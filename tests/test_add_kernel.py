"""Adding a kernel touches three files (docs/custom-kernel-op.md, "Adding a kernel: the files it
touches"): the kernel module, the binding that calls it, and its test. This test is the third:
it writes the other two - a throwaway kernel whose annotations carry its whole documented
signature, and a binding that preallocates its output and calls it by address - into a
temporary folder outside the package, and shows that the kernel compiles, gives its numpy
reference's bytes through the binding and through ``kernel(...)``, and appears in a generated
C library (``compile --library``'s `build_library`) with the header and the entry-point checks
its annotations declare."""

from __future__ import annotations

import ctypes
import importlib
import sys
import textwrap

import numpy as np
import pytest

from cuvil_perception.compile.library import build_library
from cuvil_perception.compile.toolchain import find_toolchain, host_arch
from cuvil_perception.errors import ToolchainError

KERNEL = '''
"""A throwaway kernel: the height of each point, clamped to [lo, hi]."""
from cuvil_perception.compile.lang import Buf, In, Out, f32, i64, kernel


@kernel(name="throwaway.clamp_z")
def clamp_z(points: Buf[f32, None, 4, In("m (x, y, z); reflectance", "the scan", rows="n")],
            n: i64[In("points", "rows of points", most="capacity")],
            out: Buf[f32, "capacity", Out("m", "z of each point, clamped to [lo, hi]")], *,
            lo: float, hi: float, capacity: int):
    for i in range(n):
        out[i] = min(max(points[i, 2], lo), hi)


def clamp_z_spec(lo: float, hi: float, capacity: int):
    return clamp_z.spec(lo=lo, hi=hi, capacity=capacity)
'''

BINDING = '''
"""The binding: the kernel bound to a preallocated output and called with addresses."""
import numpy as np

from cuvil_perception.compile import get_kernel
from throwaway_kernel_clamp import clamp_z_spec


class ClampZ:
    def __init__(self, lo: float, hi: float, capacity: int):
        self.spec = clamp_z_spec(lo, hi, capacity)
        self.out = np.zeros(capacity, np.float32)
        self.fn = None

    def __call__(self, points: np.ndarray) -> np.ndarray:
        if self.fn is None:
            self.fn = get_kernel(self.spec)
        n = min(len(points), len(self.out))
        self.fn(points.ctypes.data, n, self.out.ctypes.data)
        return self.out[:n]
'''

LO, HI, CAPACITY = -1.5, 0.75, 512


def reference(points: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The numpy twin: the same float32 comparisons."""
    return np.minimum(np.maximum(points[:, 2], np.float32(lo)), np.float32(hi))


@pytest.fixture(scope="module")
def added(tmp_path_factory):
    """(kernel module, binding module), written to a temporary folder and imported from it."""
    folder = tmp_path_factory.mktemp("throwaway")
    (folder / "throwaway_kernel_clamp.py").write_text(textwrap.dedent(KERNEL))
    (folder / "throwaway_binding_clamp.py").write_text(textwrap.dedent(BINDING))
    sys.path.insert(0, str(folder))
    try:
        yield (importlib.import_module("throwaway_kernel_clamp"),
               importlib.import_module("throwaway_binding_clamp"))
    finally:
        sys.path.remove(str(folder))
        for name in ("throwaway_kernel_clamp", "throwaway_binding_clamp"):
            sys.modules.pop(name, None)


def _points(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-3, 3, (n, 4)).astype(np.float32)


def test_the_added_kernel_compiles_and_gives_its_references_bytes(added):
    kernel_module, binding_module = added
    points = _points(300)
    bound = binding_module.ClampZ(LO, HI, CAPACITY)
    np.testing.assert_array_equal(bound(points), reference(points, LO, HI))
    out = np.zeros(CAPACITY, np.float32)
    kernel_module.clamp_z(points, len(points), out, lo=LO, hi=HI, capacity=CAPACITY)
    np.testing.assert_array_equal(out[:300], reference(points, LO, HI))
    assert not out[300:].any()  # rows past n are not written


def test_the_added_kernels_signature_comes_from_its_annotations(added):
    spec = added[1].ClampZ(LO, HI, CAPACITY).spec
    assert [(a.name, a.kind, a.dtype, a.shape, a.unit, a.role, a.most) for a in spec.arg_docs] == [
        ("points", "ptr", "f32", ("n", 4), "m (x, y, z); reflectance", "in", None),
        ("n", "i64", None, (), "points", "in", "capacity"),
        ("out", "ptr", "f32", ("capacity",), "m", "out", None)]


def test_the_added_kernel_appears_in_a_generated_library(added, tmp_path):
    triple = f"{host_arch()}-linux-gnu"
    try:
        find_toolchain(triple)
    except ToolchainError as exc:
        pytest.skip(str(exc))
    spec = added[1].ClampZ(LO, HI, CAPACITY).spec
    lib = build_library([spec], triple, tmp_path / "lib", "throwaway")
    symbol = lib.symbol("throwaway.clamp_z")
    header = lib.header.read_text()
    assert f"int {symbol}(const float *points, int64_t n, float *out);" in header
    assert "points       in      f32[n, 4]" in header and "m (x, y, z); reflectance - the scan" \
        in header
    assert " *   n <= capacity" in header and "_OUT_LEN 512" in header
    fn = getattr(ctypes.CDLL(str(lib.shared)), symbol)
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    points, out = _points(200, seed=1), np.zeros(CAPACITY, np.float32)
    assert fn(points.ctypes.data, len(points), out.ctypes.data) == 0
    np.testing.assert_array_equal(out[:200], reference(points, LO, HI))
    assert fn(points.ctypes.data, CAPACITY + 1, out.ctypes.data) == -2  # most=: ERANGE
    assert fn(None, 1, out.ctypes.data) == -1  # ENULL
