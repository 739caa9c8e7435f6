"""The system C toolchain of a target triple: compiler, archiver, and (for tests) an emulator.

``compile --library`` links the kernels' object files with the toolchain the target's own
software would use: the host's ``cc`` / ``ar`` when the triple's architecture is the host's,
else the Debian cross toolchain ``<gnu-triple>-gcc`` / ``<gnu-triple>-ar`` (apt package
``gcc-<gnu-triple>``; ``make setup`` installs the aarch64 one). A missing tool is a
`ToolchainError` (exit 2) naming the apt package to install.

Default CPUs (``--cpu``): a library is built for the machines it is deployed on, not for this
workstation, so the default is a baseline level of the architecture rather than the host CPU:
for x86-64, ``x86-64-v3`` (AVX2 + FMA: Haswell / Zen 1 and later) when this machine is an
x86-64 that has that level, else ``x86-64-v2`` (SSE4.2/POPCNT, every x86-64 of the last ~12
years; no FMA: ``llvm.fma`` is then split into a multiply and an add, `fma_split`, never a libm
call); ``generic`` for aarch64 (ARMv8.0-A with NEON and FMA: runs on every 64-bit Arm board;
pass e.g. ``--cpu cortex-a78`` for an Orin, ``--cpu neoverse-n1`` for a Graviton 2).
``--cpu host`` takes the host's CPU name and features (only for a triple of the host's
architecture); ``--cpu x86-64-v2`` builds for the older machines.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import CompileError, ToolchainError

_ARCH_ALIASES = {"amd64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64"}
#: GNU triple of the Debian cross toolchain per architecture.
_GNU_TRIPLES = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
                "arm": "arm-linux-gnueabihf", "riscv64": "riscv64-linux-gnu",
                "ppc64le": "powerpc64le-linux-gnu"}
DEFAULT_CPUS = {"x86_64": "x86-64-v2", "aarch64": "generic"}


def arch_of(triple: str) -> str:
    """``aarch64`` for ``aarch64-linux-gnu``, ``x86_64`` for ``x86_64-unknown-linux-gnu``."""
    arch = triple.split("-", 1)[0].lower()
    if arch.startswith("armv7") or arch == "armhf":
        return "arm"
    return _ARCH_ALIASES.get(arch, arch)


def host_arch() -> str:
    return arch_of(platform.machine())


#: The features of x86-64-v3 above v2 (LLVM's names), all needed for it to be the default.
X86_64_V3 = ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")


def default_cpu(triple: str) -> str:
    """The default CPU of the triple's architecture (see the module docstring)."""
    arch = arch_of(triple)
    if arch == "x86_64" and host_arch() == "x86_64" and _host_has_all(X86_64_V3):
        return "x86-64-v3"
    return DEFAULT_CPUS.get(arch, "generic")


def _host_has_all(features: tuple[str, ...]) -> bool:
    from .target import host_target  # llvm is loaded by then: a library is being built

    enabled = set(host_target().features.split(","))
    return all(f"+{name}" in enabled for name in features)


@dataclass(frozen=True)
class Toolchain:
    """Paths of the C compiler and archiver for one triple; ``emulator`` runs its binaries
    here (empty for the host's architecture; ``qemu-aarch64 -L <sysroot>`` for aarch64)."""

    triple: str
    cc: str
    ar: str
    emulator: tuple[str, ...] = ()

    def run(self, args: list[str], what: str) -> None:
        """Run a tool; a failure is a `CompileError` with the tool's last lines of output."""
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
            raise CompileError(f"{what} failed ({' '.join(args[:2])} ...): {tail}")


def apt_package(triple: str) -> str:
    """The Debian package providing the cross C compiler for ``triple``."""
    gnu = _GNU_TRIPLES.get(arch_of(triple), triple)
    return f"gcc-{gnu.replace('_', '-')}"


def find_toolchain(triple: str) -> Toolchain:
    """The toolchain for ``triple``; raises `ToolchainError` naming the apt package if absent."""
    arch = arch_of(triple)
    if arch == host_arch():
        cc, ar = shutil.which("cc") or shutil.which("gcc"), shutil.which("ar")
        if cc is None or ar is None:
            raise ToolchainError(f"no C compiler for {triple}: 'cc' and 'ar' not found; "
                                 "install the apt packages gcc and binutils")
        return Toolchain(triple, cc, ar)
    gnu = _GNU_TRIPLES.get(arch)
    if gnu is None:
        raise ToolchainError(f"no known cross toolchain for {triple} (known: "
                             f"{', '.join(sorted(_GNU_TRIPLES))})")
    cc, ar = shutil.which(f"{gnu}-gcc"), shutil.which(f"{gnu}-ar")
    if cc is None or ar is None:
        raise ToolchainError(f"no C cross compiler for {triple}: {gnu}-gcc not found; install "
                             f"the apt package {apt_package(triple)} (make setup does for "
                             "aarch64)")
    return Toolchain(triple, cc, ar, _emulator(arch, gnu))


def _emulator(arch: str, gnu: str) -> tuple[str, ...]:
    """``qemu-<arch> -L /usr/<gnu>`` when qemu-user and the target's libc are installed."""
    qemu = shutil.which(f"qemu-{arch}") or shutil.which(f"qemu-{arch}-static")
    sysroot = Path("/usr") / gnu
    if qemu is None or not (sysroot / "lib").is_dir():
        return ()
    return (qemu, "-L", str(sysroot))
