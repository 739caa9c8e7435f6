"""The C header of a kernel library: one prototype per kernel, its static params and buffer sizes.

For a kernel exported as ``<prefix>_pillars_pillarize`` the header holds::

    /* pillars.pillarize  (fast-math: none)
     *   static: max_pillars=16000 ...
     *   points      in     f32[n, 4]              m (x, y, z); reflectance 0..1 - the scan
     *   ...
     *   returns 0 or a negative error code */
    int prefix_pillars_pillarize(const float *points, int64_t n, float *voxels, ...);
    #define PREFIX_PILLARS_PILLARIZE_MAX_PILLARS 16000            (every static scalar)
    #define PREFIX_PILLARS_PILLARIZE_RNG {0.0, -39.68, ...}       (static lists: an initialiser)
    #define PREFIX_PILLARS_PILLARIZE_VOXELS_LEN 512004            (elements, when static)
    #define PREFIX_PILLARS_PILLARIZE_VOXELS_BYTES 8192064
    #define PREFIX_PILLARS_PILLARIZE_POINTS_ROW_LEN 4              (a row of an [n, 4] buffer)

The fast-math note lists the kernel's own flags and those its helpers add, e.g. pillars.decode:
``(fast-math: none (helpers: irutil.vexp contract))`` (`compile.fastmath`).
Argument names, element types, shapes and units come from the spec's `Arg` declarations (a
``@kernel``'s: its annotations and role markers, `lang.signature`); a kernel declared without
them gets ``arg0, arg1, ...`` and ``void *`` pointers. Sizes are emitted
only for buffers whose shape depends on static params alone (a dim naming a scalar argument,
like ``count``, means "at least that many rows" and is left to the caller).
"""

from __future__ import annotations

import ast
import dataclasses
import operator
import re

from .spec import Arg, KernelSpec

_C_SCALARS = {"i32": "int32_t", "i64": "int64_t", "f32": "float", "f64": "double"}
_C_ELEMENTS = {"f32": "float", "f64": "double", "i8": "int8_t", "u8": "uint8_t",
               "i16": "int16_t", "u16": "uint16_t", "i32": "int32_t", "u32": "uint32_t",
               "i64": "int64_t", "u64": "uint64_t"}
ELEMENT_BYTES = {"f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4,
                 "i64": 8, "u64": 8}
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.floordiv, ast.FloorDiv: operator.floordiv}


def macro_name(symbol: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", symbol).upper()


def arg_decls(spec: KernelSpec) -> tuple[Arg, ...]:
    """The spec's documented args, or ``argN`` placeholders of the right kinds."""
    if spec.arg_docs:
        inputs = getattr(spec.build, "input_buffers", lambda _: ())(spec)  # a @kernel's
        return tuple(dataclasses.replace(a, role="in") if a.name in inputs else a
                     for a in spec.arg_docs)
    return tuple(Arg(f"arg{i}", kind, "u8" if kind == "ptr" else None,
                     role="inout" if kind == "ptr" else "in", doc="undocumented")
                 for i, kind in enumerate(spec.args))


def c_type(arg: Arg, documented: bool = True) -> str:
    """``const float *`` for an input f32 buffer, ``int64_t`` for an i64 scalar..."""
    if arg.kind != "ptr":
        return _C_SCALARS[arg.kind]
    base = _C_ELEMENTS[arg.dtype] if documented else "void"
    return f"{'const ' if arg.role == 'in' else ''}{base} *"


def prototype(spec: KernelSpec, symbol: str, internal: bool = False) -> str:
    """The C declaration of ``symbol`` with the spec's arguments: returning ``int`` (0, the
    count, or an error code: `cabi`; a float result goes through a last ``result`` pointer),
    or with ``internal`` the kernel's own return type (its object code's symbol)."""
    documented = bool(spec.arg_docs)
    ret = "int" if not internal else _C_SCALARS[spec.ret] if spec.ret else "void"
    params = [_param(a, documented) for a in arg_decls(spec)]
    if not internal and float_result(spec):
        params.append(f"{_C_SCALARS[spec.ret]} *result")
    return f"{ret} {symbol}({', '.join(params) or 'void'});"


def float_result(spec: KernelSpec) -> bool:
    """A kernel returning a float: its API function writes it through a last ``result``
    pointer (the return value is the error code); an integer result is the returned count."""
    return spec.ret in ("f32", "f64")


def _param(arg: Arg, documented: bool) -> str:
    ctype = c_type(arg, documented)
    return f"{ctype}{arg.name}" if ctype.endswith("*") else f"{ctype} {arg.name}"


def eval_dim(dim, env: dict) -> int | None:
    """An int dim, or a ``+ - * /`` expression over ``env`` names (and ``len(name)``,
    ``sum(name)`` of a list param); None if a name is unknown."""
    if isinstance(dim, int):
        return dim
    try:
        return _eval(ast.parse(str(dim), mode="eval").body, env)
    except (KeyError, SyntaxError, ValueError):
        return None


def _eval(node, env: dict) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        value = env[node.id]
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(node.id)
        return value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("len", "sum") and len(node.args) == 1 and \
            isinstance(node.args[0], ast.Name):
        items = env[node.args[0].id]
        if not isinstance(items, (list, tuple)) or \
                not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            raise ValueError(node.args[0].id)
        return len(items) if node.func.id == "len" else sum(items)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    raise ValueError(ast.dump(node))


def buffer_len(spec: KernelSpec, arg: Arg, skip: int = 0) -> int | None:
    """Elements of ``arg``'s buffer when its shape depends only on static params, else None;
    ``skip=1``: the elements of one row (the dims after the first; 1 for a 1-D buffer)."""
    if arg.kind != "ptr" or not arg.shape:
        return None
    total = 1
    for dim in arg.shape[skip:]:
        value = eval_dim(dim, dict(spec.static))
        if value is None:
            return None
        total *= value
    return total


def _shape_text(arg: Arg) -> str:
    if arg.kind != "ptr" or arg.doc == "undocumented":
        return arg.kind
    return f"{arg.dtype}[{', '.join(str(d) for d in arg.shape)}]" if arg.shape else arg.dtype


def _c_value(value) -> str | None:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else None
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)) and value:
        items = [_c_value(v) for v in value]
        return None if None in items or any(isinstance(v, str) for v in value) \
            else "{" + ", ".join(items) + "}"
    return None


def kernel_block(spec: KernelSpec, symbol: str, fastmath: str | None = None) -> str:
    """Comment, prototype and constants of one kernel. ``fastmath``: what the comment says of
    its flags (`fastmath.FastMathUse.describe`, with the helpers'); default: the spec's own."""
    flags = fastmath if fastmath is not None else ", ".join(spec.fastmath) or "none"
    lines = [f"/* {spec.name}  (fast-math: {flags})", f" *   static: {spec.static_str() or '-'}"]
    for arg in arg_decls(spec):
        text = " - ".join(t for t in (arg.unit, arg.doc) if t)
        lines.append(f" *   {arg.name:<12} {arg.role:<7} {_shape_text(arg):<34} {text}".rstrip())
    for arg in arg_decls(spec):
        if arg.most is not None:
            lines.append(f" *   {arg.name} <= {arg.most}")
    lines.append(" *   returns " + ("the count (>= 0)" if spec.ret else "0") +
                 " or a negative error code")
    lines.append(" */")
    lines.append(prototype(spec, symbol))
    macro = macro_name(symbol)
    for key, value in sorted(spec.static.items()):
        text = _c_value(value)
        if text is not None:
            lines.append(f"#define {macro}_{macro_name(key)} {text}")
    for arg in arg_decls(spec) if spec.arg_docs else ():
        lines += _size_macros(spec, arg, f"{macro}_{macro_name(arg.name)}")
    return "\n".join(lines)


def _size_macros(spec: KernelSpec, arg: Arg, name: str) -> list[str]:
    """``NAME_LEN`` / ``NAME_BYTES`` of a buffer of static size; for one whose first dim is a
    scalar argument (``count`` rows), ``NAME_ROW_LEN`` / ``NAME_ROW_BYTES`` of one row."""
    length = buffer_len(spec, arg)
    suffix = ""
    if length is None:
        length, suffix = buffer_len(spec, arg, skip=1), "_ROW"
    if length is None:
        return []
    return [f"#define {name}{suffix}_LEN {length}",
            f"#define {name}{suffix}_BYTES {length * ELEMENT_BYTES[arg.dtype]}"]


def render_header(guard: str, title: str, kernels: list[tuple[KernelSpec, str]],
                  fastmath: dict[str, str] | None = None, abi: str = "",
                  extra: str = "") -> str:
    """The whole header: ``kernels`` are (spec, exported symbol) pairs; ``fastmath`` maps a
    symbol to the description of its flags (see `kernel_block`); ``abi`` goes before the
    kernels (`cabi.abi_header`), ``extra`` after them (an op's whole-pipeline API)."""
    fastmath = fastmath or {}
    blocks = "\n\n".join(kernel_block(spec, symbol, fastmath.get(symbol))
                         for spec, symbol in kernels)
    body = "\n\n".join(t for t in (abi, blocks, extra) if t)
    return (f"/* {title}\n * Generated by cuvil-perception compile --library; do not edit.\n"
            " * Pointers are C-contiguous arrays, row-major, shapes outermost first; every\n"
            " * pointer argument must be non-NULL. */\n"
            f"#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n\n"
            "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
            f"{body}\n\n#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */\n")
