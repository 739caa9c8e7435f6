"""A pipeline's kernels as one standalone native library per target (``compile --library``).

``build_library(specs, triple, out_dir, prefix)`` writes into ``out_dir``::

    lib<prefix>.so.<M>.<m>  shared library, SONAME lib<prefix>.so.<M> (M.m: `cabi.ABI_MAJOR`
                            / `ABI_MINOR`), with the symlinks lib<prefix>.so.<M> and
                            lib<prefix>.so; exports the API of `cabi` and nothing else
    lib<prefix>.a           static archive of the same objects
    <prefix>.h              version and error-code macros, thread safety, prototypes with
                            per-argument units / dtypes / shapes, static params and buffer
                            sizes as #defines (`cheader`), an op's whole-pipeline API
    <prefix>_api.c          the entry points' C source (`cabi`), kept for reading
    obj/*.o                 the object files (one per kernel, the API, the embedded blobs)
    library.json            manifest: triple, cpu, features, ABI, kernels and their symbols
    (``compile --library`` adds ``example/`` from ops that offer one: cli/library_out.py)

Each kernel is rendered exactly as for the host (same IR, same O3 pipeline), then its function
is renamed to the internal symbol ``<prefix>_k_<kernel>`` (hidden visibility) and every other
definition in its module made internal, so two libraries (two pipelines, two prefixes) link
into one program without clashes. Code is generated for ``cpu`` (default: see `toolchain`;
x86-64-v3 on an x86-64 host that has it, the baseline otherwise; FMAs split where the CPU has
none, `fma_split`) and linked with the triple's system toolchain. A directory that holds files
but no ``library.json`` is never written into.

Same results on every target: integer kernels and kernels without fast-math (pillarize, the
scatters, NMS) give bitwise the host's outputs; PFN's explicit FMAs (``kmath.fma``) round once
on every CPU with FMA (a multiply and an add where there is none, `fma_split`); kernels with
``contract`` (decode: the exp polynomial) may round differently where one target fuses a
multiply-add and another does not: the tests hold PFN and decode to
the kernels' own tolerances (PFN rtol 1e-5 + 1e-6 x the largest feature; decode boxes and scores
rtol/atol 1e-5, counts, labels and anchor indices exact). Measured on the ten KITTI frames,
aarch64 (generic, under qemu-user) against this x86-64 host (znver4): bitwise equal for all
four; an x86-64-v2 build (no FMA: multiply then add, `fma_split`) in this process: PFN and
decode within their tolerances (tests/test_library_fma.py).
The rest of configs/fusion.yaml's kernels (conv_scatter, head_cells, pillars NMS; yolo scan,
decode with its vector exp, NMS), the bitmap-order scatter and examples/ground_removal, measured
the same way on the KITTI frames and the sample drive's images: bitwise equal on aarch64 too
(tests/test_library_aarch64_calls.py, which holds them to the same rules).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import llvmlite.binding as llvm

from ..errors import UsageError
from .cabi import (ABI_MAJOR, ABI_MINOR, LibraryPart, abi_header, api_source, internal_symbol,
                   with_build_id)
from .cheader import macro_name, render_header
from .codegen import compile_ir
from .kernel_prewarm import unique_specs
from .optimize import options_for
from .fastmath import FastMathUse
from .render_ir import render, render_checked
from .spec import KernelSpec
from .target import Target, cross_target, ensure_llvm, host_target
from .toolchain import Toolchain, arch_of, default_cpu, find_toolchain, host_arch

MANIFEST = "library.json"
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_PREFIX = 64  # + a kernel's symbol suffix and ".o" stays far below a file name's 255 bytes


@dataclass
class Library:
    """What `build_library` wrote (paths) and the exported symbol of every kernel."""

    out_dir: Path
    target: Target
    prefix: str
    shared: Path  # the lib<prefix>.so symlink (what -l<prefix> and dlopen find)
    static: Path
    header: Path
    symbols: list[tuple[KernelSpec, str]] = field(default_factory=list)
    #: symbol -> the kernel's fast-math flags: its own, its helpers', found in its IR
    fastmath: dict[str, FastMathUse] = field(default_factory=dict)

    @property
    def soname(self) -> str:
        return f"lib{self.prefix}.so.{ABI_MAJOR}"

    @property
    def shared_file(self) -> Path:
        """The shared library's real file, ``lib<prefix>.so.<major>.<minor>``."""
        return self.out_dir / f"{self.soname}.{ABI_MINOR}"

    def symbol(self, kernel_name: str) -> str:
        """The exported symbol of the first kernel called ``kernel_name``."""
        for spec, symbol in self.symbols:
            if spec.name == kernel_name:
                return symbol
        raise KeyError(kernel_name)


def library_target(triple: str, cpu: str | None = None, features: str = "") -> Target:
    """The code-generation target of a library: ``cpu`` None -> the triple's baseline CPU,
    ``"host"`` -> this machine's CPU name and features (same architecture only)."""
    if cpu == "host":
        if arch_of(triple) != host_arch():
            raise UsageError(f"--cpu host: this machine is {host_arch()}, the target is "
                             f"{arch_of(triple)}; name the target CPU instead")
        host = host_target()
        return cross_target(triple, host.cpu, features or host.features)
    if cpu is not None and not cpu.strip():
        raise UsageError("--cpu: empty; name a CPU (e.g. cortex-a78, x86-64-v3) or 'host'")
    chosen = cpu or default_cpu(triple)
    ensure_llvm()
    target = Target(triple, chosen, features)
    if not _cpu_known(target):  # also raises UsageError for a triple LLVM cannot target
        raise UsageError(f"--cpu {chosen}: LLVM does not know this CPU for {triple}")
    return target


_PROBE = """
import sys
import llvmlite.binding as llvm
from cuvil_perception.compile.target import Target
probe = llvm.parse_assembly("define void @probe() {\\n  ret void\\n}\\n")
probe.triple = sys.argv[1]
Target(sys.argv[1], sys.argv[2], sys.argv[3]).machine().emit_assembly(probe)
"""


def _cpu_known(target: Target) -> bool:
    """LLVM only prints "'x' is not a recognized processor" (and may then abort the process:
    x86-64 code on an unknown x86 CPU is a fatal error), so ask a child process."""
    Target(target.triple, default_cpu(target.triple)).machine()  # checks the triple
    if target.cpu == default_cpu(target.triple):
        return True
    done = subprocess.run([sys.executable, "-c", _PROBE, target.triple, target.cpu,
                           target.features], capture_output=True, text=True)
    return done.returncode == 0 and "not a recognized processor" not in done.stderr


def symbols_for(specs: list[KernelSpec], prefix: str) -> list[tuple[KernelSpec, str]]:
    """``(spec, "<prefix>_<kernel>")``; a second spec of the same name (other static params)
    gets ``_2``, ``_3``... in pipeline order."""
    used: dict[str, int] = {}
    out = []
    for spec in specs:
        base = f"{prefix}_{spec.fn_name.removeprefix('cuvil_')}"
        used[base] = used.get(base, 0) + 1
        out.append((spec, base if used[base] == 1 else f"{base}_{used[base]}"))
    return out


def library_object(spec: KernelSpec, symbol: str, target: Target,
                   ir_text: str | None = None) -> bytes:
    """Object code of ``spec`` for ``target`` with the kernel as the hidden global ``symbol``
    and nothing else global (``ir_text``: the spec's rendered IR, if the caller has it)."""
    ensure_llvm()
    module = llvm.parse_assembly(render(spec) if ir_text is None else ir_text)
    for fn in module.functions:
        if fn.is_declaration:
            continue
        if fn.name == spec.fn_name:
            fn.name = symbol
            fn.visibility = "hidden"
        else:
            fn.linkage = "internal"
    for var in module.global_variables:
        if not var.is_declaration:
            var.linkage = "internal"
    return compile_ir(str(module), target, spec.name, options_for(spec)).obj


def build_library(specs: Iterable[KernelSpec], triple: str, out_dir: str | Path, prefix: str,
                  cpu: str | None = None, features: str = "",
                  parts: Iterable[LibraryPart] = ()) -> Library:
    """Compile, link and document ``specs`` as one library (see the module docstring), as
    release builds: a debug spec goes in as its `KernelSpec.release` (no error record).
    ``parts``: what ops add to the API (`cabi.LibraryPart`)."""
    check_prefix(prefix)
    tools = find_toolchain(triple)
    target = library_target(triple, cpu, features)
    out = _prepare(Path(out_dir))
    kernels = symbols_for(unique_specs(s.release() for s in specs), prefix)
    if not kernels:
        raise UsageError("the pipeline has no native kernels: nothing to put in a library")
    parts = list(parts)
    objects, uses = [], {}
    for spec, symbol in kernels:
        rendered = render_checked(spec)
        uses[symbol] = rendered.fastmath
        path = out / "obj" / f"{symbol}.o"
        path.write_bytes(library_object(spec, internal_symbol(prefix, symbol), target,
                                        rendered.text))
        objects.append(path)
    lib = Library(out, target, prefix, out / f"lib{prefix}.so", out / f"lib{prefix}.a",
                  out / f"{prefix}.h", kernels, uses)
    header = render_header(f"{macro_name(prefix)}_H",
                           f"{prefix}: native kernels for {target.triple} (cpu {target.cpu})",
                           kernels, {sym: use.describe() for sym, use in uses.items()},
                           abi_header(prefix), "\n\n".join(p.header for p in parts))
    lib.header.write_text(with_build_id(header), encoding="utf-8")
    objects += _api_objects(tools, lib, parts)
    _link(tools, objects, lib)
    _write_manifest(lib)
    return lib


def _api_objects(tools: Toolchain, lib: Library, parts: list[LibraryPart]) -> list[Path]:
    """The entry points (``<prefix>_api.c``) and the parts' blobs, compiled by the target's C
    compiler: only the API is visible; no FP contraction, so the C code rounds as written
    (aarch64 gcc contracts by default)."""
    source = lib.out_dir / f"{lib.prefix}_api.c"
    source.write_text(api_source(lib.prefix, lib.header.name, lib.symbols,
                                 "\n\n".join(p.source for p in parts)), encoding="utf-8")
    api = lib.out_dir / "obj" / f"{lib.prefix}_api.o"
    tools.run([tools.cc, "-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-ffp-contract=off",
               "-fno-math-errno", "-Wall", f"-I{lib.out_dir}", "-c", "-o", str(api),
               str(source)], "compiling the C API")
    objects = [api]
    blobs = {name: data for part in parts for name, data in part.blobs.items()}
    if blobs:
        objects.append(_blob_object(tools, lib, blobs))
    return objects


def _blob_object(tools: Toolchain, lib: Library, blobs: dict[str, bytes]) -> Path:
    """One object embedding each blob as a hidden, 64-byte aligned read-only symbol."""
    asm = [".section .rodata"]
    for name, data in blobs.items():
        path = lib.out_dir / "obj" / f"{name}.bin"
        path.write_bytes(data)
        asm += [".balign 64", f".globl {name}", f".hidden {name}", f"{name}:",
                f'.incbin "{path.name}"']
    source = lib.out_dir / "obj" / f"{lib.prefix}_blobs.s"
    source.write_text("\n".join(asm) + '\n.section .note.GNU-stack,"",%progbits\n',
                      encoding="utf-8")
    obj = source.with_suffix(".o")
    tools.run([tools.cc, "-c", f"-Wa,-I{source.parent}", "-o", str(obj), str(source)],
              "assembling the weights")
    return obj


def check_prefix(prefix: str) -> None:
    """A `UsageError` unless ``prefix`` is a C identifier of at most `MAX_PREFIX` characters."""
    if len(prefix) > MAX_PREFIX:  # before any file: a too-long name left half a library
        raise UsageError(f"--prefix {prefix[:24]!r}...: {len(prefix)} characters, at most "
                         f"{MAX_PREFIX} (it begins the library's file names and every symbol; "
                         "the default comes from the pipeline's name)")
    if not _PREFIX.fullmatch(prefix):
        raise UsageError(f"--prefix {prefix!r}: must be a C identifier (letters, digits, _)")


def check_out_dir(out: Path) -> None:
    """Refuse a file, or a non-empty directory we did not make."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--library {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise UsageError(f"--library {out}: directory is not empty and holds no {MANIFEST}; "
                         "choose a new or empty directory")


def _prepare(out: Path) -> Path:
    """Create ``out`` (and ``out/obj``) after `check_out_dir`; clear our stale files."""
    check_out_dir(out)
    try:
        (out / "obj").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--library {out}: cannot create directory: {exc}") from exc
    for pattern in ("obj/*.o", "obj/*.bin", "obj/*.s", "lib*.so*"):
        for stale in out.glob(pattern):
            stale.unlink()
    return out


def _link(tools: Toolchain, objects: list[Path], lib: Library) -> None:
    """Shared library with the system compiler driver (-lm, as needed, for a kernel's kmath
    sin / cos / log), its SONAME and symlinks; static archive with ``ar`` (replacing, not
    appending to, an older archive)."""
    names = [str(p) for p in objects]
    tools.run([tools.cc, "-shared", f"-Wl,-soname,{lib.soname}", "-o", str(lib.shared_file),
               *names, "-Wl,--as-needed", "-lm"], "linking the .so")
    (lib.out_dir / lib.soname).symlink_to(lib.shared_file.name)
    lib.shared.symlink_to(lib.soname)
    lib.static.unlink(missing_ok=True)
    tools.run([tools.ar, "rcs", str(lib.static), *names], "archiving the .a")


def _fastmath_fields(spec: KernelSpec, use: FastMathUse | None) -> dict:
    """``fastmath`` (the kernel's own flags), ``fastmath_helpers`` (helper -> the flags it
    adds) and ``fastmath_emitted`` (the flags found in its IR) for the manifest."""
    if use is None:
        return {"fastmath": list(spec.fastmath)}
    return {"fastmath": list(spec.fastmath),
            "fastmath_helpers": {name: list(flags) for name, flags in use.helpers},
            "fastmath_emitted": list(use.emitted)}


def _build_id(header: Path) -> str:
    """The ``<PREFIX>_BUILD_ID`` value the header defines (`cabi.with_build_id`)."""
    found = re.search(r"_BUILD_ID (0x[0-9a-f]+)ULL", header.read_text(encoding="utf-8"))
    return found[1] if found else ""


def _write_manifest(lib: Library) -> None:
    from .. import __version__

    manifest = {"format": "cuvil-library/1", "cuvil_perception": __version__,
                "prefix": lib.prefix, "abi": [ABI_MAJOR, ABI_MINOR], "soname": lib.soname,
                "build_id": _build_id(lib.header),
                "triple": lib.target.triple, "cpu": lib.target.cpu,
                "features": lib.target.features,
                "llvm": ".".join(str(v) for v in llvm.llvm_version_info),
                "kernels": [{"name": spec.name, "symbol": symbol, "static": dict(spec.static),
                             "args": list(spec.args), "ret": spec.ret,
                             **_fastmath_fields(spec, lib.fastmath.get(symbol))}
                            for spec, symbol in lib.symbols]}
    (lib.out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
