"""The kernel compiler's passes, in the order they run, and the lowering of one kernel.

From a ``@kernel`` function to a callable (`registry.get_kernel` chains steps 3-10):

 1. signature  `kernel.Kernel.params`, `arguments`: the annotations -> run-time parameters
               (buffers, scalars) and static (keyword-only) ones; `Kernel.spec` checks the
               static values and makes the `KernelSpec` (its identity: the sources' digests).
 2. warm start `registry.acquire`: the spec's alias in the disk cache (`keys.fast_key`, no
               lowering) -> the object, straight to step 10.
 3. parse      `source.Source.of`: the def's AST, positions those of the file as it was when
               the decorator ran (`source.remember`).
 4. names      `names.assigned_once` (a name bound once with a compile-time value is a
               constant), `parallel.uses_prange` (the thread-pool parameter).
 5. frame      `lower_kernel` below: the llvmlite function, static values as constants, scalar
               parameters in stack slots, buffers with their extents and strides.
 6. lower      `lower.Lowerer.body`: every node through the `lower.STATEMENTS` /
               `lower.EXPRESSIONS` table; constants fold as they are met (`fold_lower`,
               `folding`), static loops unroll, ``@inline`` helpers are lowered in place
               (`calls`), prange bodies are outlined (`prange_lower`).
 7. check      `render_ir.render_checked`: the function's type against the spec, fast-math
               flags within what is declared (`fastmath.check`), other definitions internal.
 8. cache      `keys.cache_key` (IR text, LLVM, target, options) -> the disk cache (`cache`).
 9. codegen    `codegen.compile_ir`: parse and verify the IR, optimise (`optimize`: O3 with
               the loop and SLP vectorisers), emit the object file.
10. load       `loader.load`: link the object, bind it with ctypes (GIL released).

Steps 3-6 are `lower_kernel`; a compile error in any of them is a `KernelSourceError` at the
kernel's file:line:col with the line and a caret (`source.fail`).
"""

from __future__ import annotations

from llvmlite import ir

from .. import irutil as u
from .lower import Lowerer
from .names import assigned_once
from .parallel import uses_prange
from .scope import Frame, Var
from .source import Source
from .types import BufType, Scalar, resolve_dtype
from .values import BufRef, Const


def lower_kernel(k, fn_name: str, static: dict, module: ir.Module | None = None):
    """Lower the `kernel.Kernel` ``k`` for ``static`` into ``module`` (a fresh one if None):
    steps 3-6 above. Returns (module, lowerer); the lowerer tells what the kernel writes."""
    module = module if module is not None else ir.Module(name=k.name)
    static = dict(static)
    debug = bool(static.pop("_debug", False))
    runtime, _, ret = k.params()
    src = Source.of(k.py_func)                                                  # 3. parse
    parallel = uses_prange(k.py_func)                                           # 4. names
    once = assigned_once(src.tree)
    low = _function(module, fn_name, k.fastmath, runtime, ret, parallel, debug)  # 5. frame
    env = {name: Const(value) for name, value in static.items()}
    low.frames.append(Frame(src, env, once, ret_ty=ret))
    _parameters(low, src, runtime, env, k.noalias)
    if debug:
        low.err = low.fn.args[-1]
    low.body(src.tree.body)                                                     # 6. lower
    if not low.dead:
        if ret is not None:
            low.fail(src.tree.body[-1], f"the kernel can reach its end without returning a "
                     f"{ret}", "a final `return`")
        low.b.ret_void()
    return module, low


def _function(module: ir.Module, fn_name: str, flags: tuple, runtime: list, ret, parallel: bool,
              debug: bool) -> Lowerer:
    """The kernel's llvmlite function (run-time parameters, then the thread-pool record if
    it has prange loops, then a debug build's error record) and its `Lowerer`."""
    arg_types = [u.PTR if isinstance(t, BufType) else t.ir for _, t in runtime]
    fn = ir.Function(module, ir.FunctionType(ret.ir if ret else u.VOID,
                                             arg_types + [u.PTR] * (parallel + debug)), fn_name)
    low = Lowerer(fn, flags, debug)
    low.par = fn.args[len(runtime)] if parallel else None
    return low


def _parameters(low: Lowerer, src: Source, runtime: list, env: dict, noalias: bool) -> None:
    """Bind the run-time parameters in ``env``: scalars first (a buffer's extent may name one),
    then buffers."""
    fn = low.fn
    for (pname, ty), arg in zip(runtime, fn.args):
        arg.name = pname
        if isinstance(ty, Scalar):
            slot = u.entry_alloca(low.b, ty.ir, pname, init=arg)
            env[pname] = Var(slot, ty, src.tree.lineno)
    for (pname, ty), arg in zip(runtime, fn.args):
        if isinstance(ty, BufType):
            if noalias:
                arg.add_attribute("noalias")
            env[pname] = _buffer(low, src, pname, ty, arg, env)


def _buffer(low: Lowerer, src: Source, pname: str, ty: BufType, arg, env: dict) -> BufRef:
    try:
        ty = resolve_dtype(ty, {k: v.value for k, v in env.items() if isinstance(v, Const)})
    except TypeError as exc:
        low.fail(src.tree, f"buffer '{pname}': {exc}")
    extents = []
    for d in ty.dims:
        if d is None or isinstance(d, int):
            extents.append(None if d is None else u.const_i64(d))
            continue
        found = env.get(d)
        if isinstance(found, Const) and isinstance(found.value, int):
            extents.append(u.const_i64(found.value))
        elif isinstance(found, Var) and found.ty.is_int:
            val = low.b.load(found.slot, typ=found.ty.ir)
            extents.append(low.b.sext(val, u.I64) if found.ty.bits < 64 else val)
        else:
            low.fail(src.tree, f"extent '{d}' of buffer '{pname}' is not a static int or an int "
                     f"parameter")
    strides, acc = [], u.const_i64(1)
    for k in range(len(extents) - 1, -1, -1):
        strides.append(acc)
        if k > 0:
            acc = (u.const_i64(acc.constant * extents[k].constant)
                   if isinstance(extents[k], ir.Constant) and isinstance(acc, ir.Constant)
                   else low.b.mul(acc, extents[k]))
    return BufRef(arg, ty, tuple(extents), tuple(reversed(strides)), pname)
