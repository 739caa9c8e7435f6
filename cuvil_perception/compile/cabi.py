"""The stable C ABI of a library (``compile --library``): version, error codes, entry points.

Every kernel's object code exports an internal symbol ``<prefix>_k_<kernel>`` (hidden in the
shared library); the API is a C file, ``<prefix>_api.c``, compiled with the target's C compiler
and ``-fvisibility=hidden``, whose entry points alone are exported (``nm -D`` shows them and
nothing else of ours):

    int         <prefix>_version(void);            returns <PREFIX>_ABI_VERSION
    int         <prefix>_check_build(uint64_t id); 0 when id is the library's
                                                   <PREFIX>_BUILD_ID, else <PREFIX>_ECONFIG
    const char *<prefix>_strerror(int code);       one line, static storage, never NULL
    int         <prefix>_<kernel>(...);            each kernel: checks its arguments (NULL
                                                   pointers, negative or too-large sizes),
                                                   calls it, returns 0 / its count, or an error

plus what the op adds (the whole-pipeline ``<prefix>_open / _detect / _close`` of
``pillars.detect``: `LibraryPart`). Error codes are negative ``<PREFIX>_E...`` macros.
``ABI_MAJOR`` changes when a program compiled against an older header could misbehave with a
newer library (the SONAME is ``lib<prefix>.so.<ABI_MAJOR>``); ``ABI_MINOR`` when only functions
are added. ``<PREFIX>_BUILD_ID`` is a digest of the header itself (prototypes, static
params, buffer sizes: `build_id`): a program compiled against another build's header, whose
buffers may be sized differently, is told so by ``<prefix>_check_build(<PREFIX>_BUILD_ID)``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..errors import CompileError
from .cheader import arg_decls, eval_dim, macro_name, prototype
from .spec import KernelSpec

ABI_MAJOR = 1
ABI_MINOR = 0
#: (suffix, value, meaning): what ``<prefix>_strerror`` says of each code.
ERRORS = (
    ("OK", 0, "success"),
    ("ENULL", -1, "a required pointer argument is NULL"),
    ("ERANGE", -2, "a size or count argument is negative or above its documented maximum"),
    ("ENOMEM", -3, "out of memory (allocating the handle's buffers)"),
    ("ECONFIG", -4, "header and library differ (another build or config struct size), or "
                    "the config holds a value out of range"),
    ("ECAPACITY", -5, "more boxes than the caller's capacity: the first cap were written"),
)
THREADS = """Thread safety: the library keeps no global or static mutable state. Kernels are
 * reentrant: calls on disjoint buffers may run on any threads at once. A handle is one
 * pipeline's state: one thread at a time per handle (a handle per thread, or a lock); any
 * number of handles may run on different threads concurrently. version() and strerror() are
 * safe from any thread."""


@dataclass
class LibraryPart:
    """An op's addition to a library: ``header`` (C declarations and macros, after the
    kernels'), ``source`` (C code compiled with the API file; may call ``<prefix>_k_*`` and
    the ``#define``s of the header), ``blobs`` (symbol -> bytes, embedded read-only and
    64-byte aligned, declared ``extern const unsigned char SYMBOL[]``), ``example``
    (file name -> bytes for DIR/example)."""

    header: str
    source: str
    blobs: dict[str, bytes] = field(default_factory=dict)
    example: dict[str, bytes] = field(default_factory=dict)


def internal_symbol(prefix: str, symbol: str) -> str:
    """``<prefix>_k_<kernel>`` for the exported ``<prefix>_<kernel>``."""
    return f"{prefix}_k_{symbol.removeprefix(prefix + '_')}"


BUILD_ID = "@BUILD_ID@"  # replaced by `with_build_id` once the whole header is rendered


def with_build_id(header: str) -> str:
    """``header`` with its `BUILD_ID` placeholder replaced by the digest of the rest."""
    digest = hashlib.sha256(header.encode()).hexdigest()[:16]
    return header.replace(BUILD_ID, f"0x{digest}ULL")


def abi_header(prefix: str) -> str:
    """Version, build and error-code macros, the thread-safety statement, version() /
    check_build() / strerror()."""
    m = macro_name(prefix)
    lines = [f"/* {THREADS} */",
             f"#define {m}_ABI_VERSION_MAJOR {ABI_MAJOR}",
             f"#define {m}_ABI_VERSION_MINOR {ABI_MINOR}",
             f"#define {m}_ABI_VERSION ({m}_ABI_VERSION_MAJOR * 1000 + {m}_ABI_VERSION_MINOR)",
             "/* This header's build: the library answers 0 to check_build(BUILD_ID) only when "
             "it was built with the same prototypes, static params and buffer sizes. */",
             f"#define {m}_BUILD_ID {BUILD_ID}",
             "/* Error codes: every function returns 0 (or a count) on success, one of these on "
             "failure. */"]
    lines += [f"#define {m}_{name} ({value}) /* {text} */" for name, value, text in ERRORS]
    lines += [f"/* {m}_ABI_VERSION of the library (compare its / 1000 with the header's "
              f"{m}_ABI_VERSION_MAJOR). */",
              f"int {prefix}_version(void);",
              f"/* 0 when build_id is this library's {m}_BUILD_ID, else {m}_ECONFIG. */",
              f"int {prefix}_check_build(uint64_t build_id);",
              "/* A one-line description of an error code (static storage, never NULL). */",
              f"const char *{prefix}_strerror(int code);"]
    return "\n".join(lines)


def api_source(prefix: str, header: str, kernels: list[tuple[KernelSpec, str]],
               extra: str = "") -> str:
    """The C file of the entry points (module docstring); ``extra``: the ops' `LibraryPart`
    sources, appended."""
    m = macro_name(prefix)
    cases = "\n".join(f"    case {m}_{name}: return \"{text}\";" for name, _, text in ERRORS)
    internal = "\n".join(prototype(spec, internal_symbol(prefix, symbol), internal=True)
                         for spec, symbol in kernels)
    wrappers = "\n\n".join(_wrapper(spec, symbol, prefix) for spec, symbol in kernels)
    return (f"/* Generated by cuvil-perception compile --library; do not edit. */\n"
            "#include <stddef.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n"
            f'#include "{header}"\n\n#define API __attribute__((visibility("default")))\n\n'
            f"/* the kernels' object code (hidden) */\n{internal}\n\n"
            f"API int {prefix}_version(void) {{ return {m}_ABI_VERSION; }}\n\n"
            f"API int {prefix}_check_build(uint64_t build_id) {{\n"
            f"    return build_id == {m}_BUILD_ID ? {m}_OK : {m}_ECONFIG;\n}}\n\n"
            f"API const char *{prefix}_strerror(int code) {{\n    switch (code) {{\n{cases}\n"
            "    default: return \"unknown error code\";\n    }\n}\n\n"
            f"{wrappers}\n{extra}")


def _wrapper(spec: KernelSpec, symbol: str, prefix: str) -> str:
    """``API int symbol(args) { checks; call; return 0 or the count; }``."""
    m = macro_name(prefix)
    decls = arg_decls(spec)
    head = prototype(spec, symbol).removeprefix("int ").rstrip(";")
    checks = [f"    if ({a.name} == NULL) return {m}_ENULL;" for a in decls if a.kind == "ptr"]
    sizes = {d for a in decls if a.kind == "ptr" for d in a.shape if isinstance(d, str)}
    for a in decls:
        if a.kind in ("i32", "i64") and (a.name in sizes or a.most is not None):
            checks.append(f"    if ({a.name} < 0) return {m}_ERANGE;")
        if a.kind in ("i32", "i64") and a.most is not None:
            most = eval_dim(a.most, dict(spec.static))
            if most is None:
                raise CompileError(f"kernel {spec.name}: argument {a.name!r}: most={a.most!r} "
                                   "is not an expression over the static params")
            checks.append(f"    if ({a.name} > {most}) return {m}_ERANGE;")
    call = f"{internal_symbol(prefix, symbol)}({', '.join(a.name for a in decls)})"
    body = f"    return (int){call};" if spec.ret else f"    {call};\n    return {m}_OK;"
    return "API int " + head + " {\n" + "\n".join(checks + [body]) + "\n}"
