"""Step 1 of 3, render: `KernelSpec` -> LLVM IR text (no LLVM library calls, no machine code).

Every kernel's IR goes through `render` (host, cross objects, libraries), so the checks on what
a generator produced live here: the function it must define, and its fast-math flags
(`fastmath.check`: emitted flags within what the kernel and the helpers it called declare)."""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..errors import CompileError
from . import fastmath, irutil
from .spec import KernelSpec

_IR_TYPES = {"ptr": irutil.PTR, "i32": irutil.I32, "i64": irutil.I64,
             "f32": irutil.F32, "f64": irutil.F64}


@dataclass(frozen=True)
class Rendered:
    """A kernel's IR text and what its fast-math flags are: declared by the kernel, by the
    helpers it called, and found on its instructions."""

    text: str
    fastmath: fastmath.FastMathUse


def render(spec: KernelSpec) -> str:
    """Run the spec's generator into a fresh module and return its IR text.

    The text holds no triple or data layout (those belong to the target, which is keyed
    separately), so it is the same on every machine for the same spec.
    Raises `CompileError` naming the kernel if the generator fails or defines the wrong function,
    `FastMathError` if the IR carries a fast-math flag nothing declares.
    """
    return render_checked(spec).text


def render_checked(spec: KernelSpec) -> Rendered:
    """`render`, with the fast-math flags it checked (for library headers and manifests)."""
    module = ir.Module(name=spec.name)
    try:
        spec.build(module, spec.fn_name, **spec.static)
    except CompileError:
        raise
    except Exception as exc:  # a generator bug: name the kernel and its static params
        raise CompileError(f"kernel {spec.name} ({spec.static_str()}): IR generation failed: "
                           f"{type(exc).__name__}: {exc}") from exc
    _check_signature(spec, module)
    use = fastmath.check(spec.name, spec.fastmath, module)
    _internalize_others(spec, module)
    return Rendered(str(module), use)


def _check_signature(spec: KernelSpec, module: ir.Module) -> None:
    fn = module.globals.get(spec.fn_name)
    if not isinstance(fn, ir.Function) or fn.is_declaration:
        raise CompileError(f"kernel {spec.name}: generator did not define function "
                           f"{spec.fn_name!r}")
    want_args = [_IR_TYPES[a] for a in spec.args]
    want_ret = _IR_TYPES[spec.ret] if spec.ret is not None else ir.VoidType()
    got = fn.function_type
    if list(got.args) != want_args or got.return_type != want_ret:
        raise CompileError(f"kernel {spec.name}: function type {got} does not match the spec "
                           f"(args={spec.args}, ret={spec.ret})")


def _internalize_others(spec: KernelSpec, module: ir.Module) -> None:
    """Give every definition but the kernel's function internal linkage, so an object exports
    one symbol and objects of several kernels can share one engine (`loader.load_many`) without
    one kernel's helper or table standing in for another's. Our generators define nothing
    else, so their IR text (and cache keys) are unchanged."""
    for value in module.global_values:
        defined = (not value.is_declaration if isinstance(value, ir.Function)
                   else getattr(value, "initializer", None) is not None)
        if defined and value.name != spec.fn_name and value.linkage not in ("internal", "private"):
            value.linkage = "internal"
