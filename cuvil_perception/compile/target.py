"""Code-generation targets: the host CPU (name + feature string, e.g. znver4 with AVX-512) or a
cross triple for ``compile --target``.

A `Target` is plain data (it goes into the cache key); `Target.machine()` makes a *new* LLVM
target machine each call because an MCJIT engine must own its own (sharing one segfaults).
Note: llvmlite 0.50 removed ``llvm.initialize()`` (calling it raises); targets are registered
here instead, once per process.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm

from ..errors import UsageError
from . import host_record

_init_lock = threading.Lock()
_initialised: set[str] = set()


def ensure_llvm(every_target: bool = True) -> None:
    """Register the native target, and with ``every_target`` every target LLVM was built with
    (cross emission needs them; loading cached host code does not: ~0.6 ms saved at start)."""
    with _init_lock:
        if "native" not in _initialised:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialised.add("native")
        if every_target and "all" not in _initialised:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _initialised.add("all")


@dataclass(frozen=True)
class Target:
    """Where code runs: LLVM triple, CPU name and ``+feat,-feat`` string."""

    triple: str
    cpu: str = "generic"
    features: str = ""
    host: bool = False

    def machine(self, jit: bool = False, opt: int = 3) -> llvm.TargetMachine:
        """A fresh LLVM target machine (one per MCJIT engine; never share one)."""
        ensure_llvm(every_target=not self.host)
        try:
            target = llvm.Target.from_triple(self.triple)
        except RuntimeError as exc:
            raise UsageError(f"unknown target triple {self.triple!r}: {exc}; LLVM here knows "
                             f"{', '.join(registered_targets())}") from exc
        # PIC + default code model: object code that is position-independent can be written to
        # the disk cache and mapped anywhere by a later process.
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=opt,
                                            reloc="pic", codemodel="default", jit=jit)

    def loading_machine(self) -> llvm.TargetMachine:
        """A fresh target machine for an MCJIT engine that only maps compiled objects (`loader`):
        the generic CPU of the triple, no code generation (opt 0)."""
        return Target(self.triple, host=self.host).machine(jit=True, opt=0)


@functools.lru_cache(maxsize=1)
def host_target() -> Target:
    """The host: process triple, ``get_host_cpu_name()`` and ``get_host_cpu_features()``
    (LLVM's answers, asked once per boot: `host_record`). Registers no LLVM target: none of
    these needs one, and a warm start maps cached objects without LLVM (`elf_map`)."""
    triple = llvm.get_process_triple()
    versions = f"llvm {'.'.join(map(str, llvm.llvm_version_info))} llvmlite {llvmlite.__version__}"
    known = host_record.recall(triple, versions)
    if known is None:
        try:
            features = llvm.get_host_cpu_features().flatten()
        except RuntimeError:  # some hosts cannot report features; the CPU name still implies them
            features = ""
        known = (llvm.get_host_cpu_name(), features)
        host_record.remember(triple, versions, *known)
    return Target(triple=triple, cpu=known[0], features=known[1], host=True)


def cross_target(triple: str, cpu: str = "generic", features: str = "") -> Target:
    """A target for another machine (objects are written, never loaded). Checks the triple."""
    t = Target(triple=triple, cpu=cpu, features=features, host=False)
    t.machine()  # raises UsageError naming the triple if LLVM was not built with it
    return t


def registered_targets() -> list[str]:
    """Names of the architectures this LLVM can emit code for (probed by common triples)."""
    ensure_llvm()
    probes = {"x86_64": "x86_64-unknown-linux-gnu", "aarch64": "aarch64-linux-gnu",
              "arm": "armv7-linux-gnueabihf", "riscv64": "riscv64-linux-gnu",
              "ppc64le": "powerpc64le-linux-gnu", "wasm32": "wasm32-unknown-unknown"}
    found = []
    for arch, triple in probes.items():
        try:
            llvm.Target.from_triple(triple)
        except RuntimeError:
            continue
        found.append(arch)
    return found


def host_has(feature: str) -> bool:
    """True if the host feature string enables ``feature`` (e.g. ``"avx512f"``)."""
    return f"+{feature}" in host_target().features.split(",")
