"""The native backbone as C: the `LibraryPart` that defines ``<prefix>_backbone``.

A `BackbonePlan` is what a native backbone (issue 29 item 1) hands to the library: its kernels
in call order (`Step`: a KernelSpec and where each argument comes from), the buffers between
them (the workspace: name -> bytes, each 64-byte aligned), and one weights blob with each
tensor's byte offset (64-byte aligned). `backbone_part` renders::

    size_t <prefix>_backbone_workspace(void);               the workspace's bytes
    void <prefix>_backbone_init(void *workspace);           once, on the zeroed workspace
    int <prefix>_backbone(void *workspace, const float *input, const int32_t *changed,
                          int64_t changed_count, float *cls, float *const *feats);

``init`` sets the bytes of the buffers named in ``ones`` to 1 (the native layers' change
masks); ``backbone`` calls each step's internal kernel symbol with its arguments, in order (the
contract of the inputs and outputs: `c_detect_source`). An argument's source is one of:

    "input"      conv_scatter's map f32 [Ho, Wo, C_out] (NHWC), read only
    "changed"    the cells of "input" this frame's pillars reached, i32 [changed_count]
    "changed_count"  their number (an i64 argument)
    "cls"        the class logits the heads and decode read, f32 [cells, A * K] (NHWC)
    "feat:K"     part K of the heads' input map F, f32 [parts[K], cells] (NCHW), or
                 [cells, parts[K]] (NHWC) when the heads read NHWC parts (the native network)
    "buf:NAME"   a workspace buffer
    "w:NAME"     a weights tensor
    int / float  a scalar argument's value

Pointers are cast to the kernel's declared argument type (float, int8_t...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...compile import KernelSpec
from ...compile.cabi import LibraryPart, internal_symbol
from ...compile.cheader import arg_decls, c_type
from ...errors import CompileError

ALIGN = 64


@dataclass(frozen=True)
class Step:
    """One kernel call: ``spec`` and, per argument in order, its source (module docstring)."""

    spec: KernelSpec
    args: tuple


@dataclass
class BackbonePlan:
    """The kernels, workspace buffers (name -> bytes), weights (blob, name -> byte offset) of a
    native backbone, and the buffers whose bytes start at 1 (``ones``; the others at 0)."""

    steps: list[Step]
    buffers: dict[str, int] = field(default_factory=dict)
    weights: bytes = b""
    offsets: dict[str, int] = field(default_factory=dict)
    ones: tuple = ()

    def kernels(self) -> list[KernelSpec]:
        return [step.spec for step in self.steps]


def backbone_part(plan: BackbonePlan, symbols: dict, prefix: str) -> LibraryPart:
    """The C definition of ``<prefix>_backbone`` for ``plan`` (module docstring). ``symbols``:
    KernelSpec -> exported symbol. Raises `CompileError` for a plan that names an unknown
    buffer or tensor, or gives a step the wrong number of arguments."""
    places, at = _places(plan)
    calls = [_call(step, symbols, prefix, places, plan.offsets) for step in plan.steps]
    for name in plan.ones:
        if name not in places:
            raise CompileError(f"backbone: buffer {name!r} to set to 1 is not a buffer")
    fills = "".join(f"    memset(ws + {places[name]}, 1, {int(plan.buffers[name])});\n"
                    for name in plan.ones)
    blob = f"{prefix}_backbone_weights"
    source = (f"/* ---- the native backbone (ops/pillars/c_backbone.py) ---- */\n"
              f"extern const unsigned char {blob}[];\n\n"
              f"size_t {prefix}_backbone_workspace(void) {{ return {workspace_bytes(plan)}; }}\n\n"
              f"void {prefix}_backbone_init(void *workspace) {{\n"
              "    unsigned char *ws = workspace;\n    (void)ws;\n" + fills + "}\n\n"
              f"int {prefix}_backbone(void *workspace, const float *input, "
              "const int32_t *changed, int64_t changed_count, float *cls, "
              "float *const *feats) {\n"
              "    unsigned char *ws = workspace;\n"
              f"    const unsigned char *w = {blob};\n"
              "    (void)ws; (void)w; (void)input; (void)changed; (void)changed_count; "
              "(void)cls; (void)feats;\n" +
              "".join(f"    {call};\n" for call in calls) + "    return 0;\n}")
    return LibraryPart("", source, {blob: plan.weights or bytes(ALIGN)})


def workspace_bytes(plan: BackbonePlan) -> int:
    """What ``<prefix>_backbone_workspace()`` returns for ``plan``."""
    return max(_places(plan)[1], ALIGN)


def _places(plan: BackbonePlan) -> tuple[dict, int]:
    """(buffer name -> byte offset in the workspace, the bytes they take)."""
    places, at = {}, 0
    for name, size in plan.buffers.items():
        places[name] = at
        at += -(-int(size) // ALIGN) * ALIGN
    return places, at


def _call(step: Step, symbols: dict, prefix: str, places: dict, offsets: dict) -> str:
    spec = step.spec.release()  # a library holds release builds (no error record argument)
    decls = arg_decls(spec)
    if len(step.args) != len(decls):
        raise CompileError(f"backbone step {spec.name}: {len(step.args)} arguments for "
                           f"{len(decls)} parameters")
    values = [_value(spec.name, arg, source, places, offsets)
              for arg, source in zip(decls, step.args)]
    symbol = internal_symbol(prefix, symbols[spec])
    return f"{symbol}({', '.join(values)})"


def _value(kernel: str, arg, source, places: dict, offsets: dict) -> str:
    """The C expression of one argument."""
    if arg.kind != "ptr":
        if source == "changed_count" and arg.kind == "i64":
            return "changed_count"
        if isinstance(source, (int, float)) and not isinstance(source, bool):
            return repr(source) if arg.kind in ("f32", "f64") else str(int(source))
        raise CompileError(f"backbone step {kernel}: {arg.name} needs a number, got {source!r}")
    cast = f"({c_type(arg)})"
    kind, _, name = str(source).partition(":")
    if source in ("input", "changed", "cls"):
        return f"{cast}(const void *){source}" if "const" in cast else f"{cast}(void *){source}"
    if kind == "feat" and name.isdigit():
        return f"{cast}(void *)feats[{int(name)}]"
    if kind == "buf" and name in places:
        return f"{cast}(void *)(ws + {places[name]})"
    if kind == "w" and name in offsets:
        if "const" not in cast:
            raise CompileError(f"backbone step {kernel}: {arg.name} writes weights {name!r}")
        return f"{cast}(const void *)(w + {offsets[name]})"
    raise CompileError(f"backbone step {kernel}: {arg.name}: unknown source {source!r}")
