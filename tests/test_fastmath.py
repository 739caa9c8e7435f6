"""Fast-math flags are checked: what a kernel's IR carries must be within what the kernel and
the helpers it calls declare (compile/fastmath.py, run by render)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llvmlite import ir

from cuvil_perception.compile import KernelSpec, fastmath, get_kernel, irutil as u
from cuvil_perception.compile import examples as ex
from cuvil_perception.compile.lang import Buf, f32, kernel, kmath
from cuvil_perception.compile.render_ir import render
from cuvil_perception.errors import CompileError, FastMathError

ROOT = Path(__file__).resolve().parents[1]


def _build_fma(module: ir.Module, fn_name: str, flags: tuple, exp: bool = False) -> None:
    """``y[0] = x[0] * x[1] + x[2]`` with ``flags`` on the multiply and add (then exp'ed)."""
    fn = ir.Function(module, ir.FunctionType(u.VOID, [u.PTR, u.PTR]), name=fn_name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x, y = fn.args
    a, c, d = (b.load(u.gep(b, x, i, u.F32), typ=u.F32) for i in range(3))
    out = b.fadd(b.fmul(a, c, flags=flags), d, flags=flags)
    if exp:
        out = u.vexp(b, out)
    u.store_at(b, out, y, 0)
    b.ret_void()


def build_contract(module, fn_name):
    _build_fma(module, fn_name, ("contract",))


def build_reassoc_exp(module, fn_name):
    _build_fma(module, fn_name, ("reassoc",), exp=True)


def build_plain_exp(module, fn_name):
    _build_fma(module, fn_name, (), exp=True)


def build_fast(module, fn_name):
    _build_fma(module, fn_name, ("fast",))


def _spec(build, flags=()) -> KernelSpec:
    return KernelSpec(f"t.{build.__name__}", build, {}, ("ptr", "ptr"), fastmath=flags)


def test_an_undeclared_flag_fails_naming_the_kernel_and_the_flag(cache_dir):
    with pytest.raises(FastMathError, match=r"kernel t\.build_contract: .*'contract' .*`fmul`"):
        render(_spec(build_contract))
    with pytest.raises(CompileError, match="'contract'"):  # the same through get_kernel
        get_kernel(_spec(build_contract))


def test_a_declared_flag_passes_and_the_kernel_runs(cache_dir):
    k = get_kernel(_spec(build_contract, ("contract",)))
    x = np.array([2.0, 3.0, 1.0], np.float32)
    y = np.zeros(1, np.float32)
    k(x.ctypes.data, y.ctypes.data)
    assert y[0] == 7.0
    assert "fmul contract" in render(_spec(build_contract, ("contract",)))


def test_fast_covers_every_flag_and_needs_every_flag():
    render(_spec(build_contract, ("fast",)))
    render(_spec(build_fast, ("fast",)))
    render(_spec(build_fast, tuple(sorted(fastmath.ALL_FLAGS))))
    with pytest.raises(FastMathError, match="'fast'"):
        render(_spec(build_fast, ("contract",)))


def test_helper_flags_count_for_the_helper_only():
    # vexp declares contract for its polynomial: a kernel that declares nothing passes ...
    render(_spec(build_plain_exp))
    module = ir.Module()
    build_plain_exp(module, "f")
    use = fastmath.check("t", (), module)
    assert use.helpers == (("irutil.vexp", ("contract",)),) and use.emitted == ("contract",)
    assert use.describe() == "none (helpers: irutil.vexp contract)"
    # ... but the helper does not make the kernel's own reassoc legal.
    with pytest.raises(FastMathError, match=r"'reassoc'.*irutil\.vexp declares contract"):
        render(_spec(build_reassoc_exp))
    render(_spec(build_reassoc_exp, ("reassoc",)))


@kernel(name="t.lang_exp")
def lang_exp(x: Buf[f32, "n"], y: Buf[f32, "n"], *, n: int):
    for i in range(n):
        y[i] = kmath.exp(x[i]) * 2.0 + x[i]


@kernel(name="t.lang_contract", fastmath=("contract",))
def lang_contract(x: Buf[f32, "n"], y: Buf[f32, "n"], *, n: int):
    for i in range(n):
        y[i] = x[i] * 2.0 + y[i]


def test_language_kernels_are_checked_with_their_helpers():
    text = render(lang_exp.spec(n=8))
    assert "contract" in text  # from the exp polynomial only: the kernel declares none
    assert "fmul float" in text.replace("fmul contract", "")  # its own multiply has no flag
    render(lang_contract.spec(n=8))


def test_every_shipped_kernel_passes():
    from cuvil_perception.cli.compile_cmd import pipeline_kernels
    from cuvil_perception.compile import unique_specs
    from cuvil_perception.graph import load_pipeline

    configs = sorted(p for p in (ROOT / "configs").glob("*.yaml") if "budgets" not in p.name)
    specs = [s for c in configs for s in pipeline_kernels(load_pipeline(c))] + list(ex.ALL)
    specs = unique_specs(specs)
    names = {s.name for s in specs}
    assert {"pillars.decode", "yolo.decode", "pillars.pfn", "yolo.scan"} <= names
    for spec in specs:
        render(spec)  # raises FastMathError on a mismatch

