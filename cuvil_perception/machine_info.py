"""What CPU this is, in the words every figure and per-machine choice uses.

``cpu()`` reads ``/proc/cpuinfo`` once: the model name, the architecture and the SIMD features
that change what our kernels and ONNX Runtime compute or how fast (vector width, FMA, the int8
dot-product instructions). ``Cpu.isa`` is the short label figures carry ("AVX2+FMA",
"AVX-512 VNNI", "aarch64 NEON dotprod", ...); ``Cpu.fingerprint`` keys what is measured per
machine (stage deadlines) so that another CPU never reuses it.

Why the int8 dot product matters: on x86 CPUs without VNNI, ONNX Runtime's u8 x s8 convolutions
multiply with ``vpmaddubsw``, which adds two u8 x s8 products into a *saturating* int16. With
8-bit weights two products reach 2 x 255 x 127 = 64 770 > 32 767, so large activations are
clipped and the network's output changes (``int8_saturates``). With VNNI (``vpdpbusd``) or AMX
the sum is 32-bit and nothing saturates; 7-bit weights (|w| <= 64: 2 x 255 x 64 = 32 640) are
exact on both.
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# The flags worth naming: what decides vector width, FMA and the int8 dot product.
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
              "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16", "neon", "asimd", "asimddp",
              "sve", "i8mm")


@dataclass(frozen=True)
class Cpu:
    """The host CPU: ``model`` (cpuinfo's model name), ``arch`` (``x86_64``, ``aarch64``, ...),
    ``features`` (the ``SIMD_FLAGS`` it has, in that order), ``cores`` (logical CPUs)."""

    model: str
    arch: str
    features: tuple[str, ...]
    cores: int

    def has(self, flag: str) -> bool:
        return flag in self.features

    @property
    def isa(self) -> str:
        """The label a figure names: the widest vector ISA and the int8 dot product."""
        if self.arch in ("aarch64", "arm64"):
            dot = " dotprod" if self.has("asimddp") else ""
            return f"aarch64 NEON{dot}"
        if self.has("avx512f"):
            label = "AVX-512"
            if self.has("avx512_vnni"):
                label += " VNNI"
            return label + (" AMX" if self.has("amx_int8") else "")
        if self.has("avx2"):
            label = "AVX2+FMA" if self.has("fma") else "AVX2"
            return label + (" AVX-VNNI" if self.has("avx_vnni") else "")
        return self.arch

    @property
    def int8_saturates(self) -> bool:
        """True where ONNX Runtime's u8 x s8 products add into a saturating int16 (x86 without
        VNNI or AMX): 8-bit weights are not exact there, 7-bit ones are."""
        if self.arch not in ("x86_64", "amd64", "i686", "i386"):
            return False
        return not any(self.has(f) for f in ("avx512_vnni", "avx_vnni", "amx_int8"))

    @property
    def fingerprint(self) -> str:
        """16 hex digits of (model, arch, features, cores): what a per-machine measurement is
        kept under."""
        text = "|".join((self.model, self.arch, ",".join(self.features), str(self.cores)))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """One line for a table or a log: ``AMD EPYC 7B13 (x86_64, AVX2+FMA, 2 cores)``."""
        return f"{self.model} ({self.arch}, {self.isa}, {self.cores} cores)"


@lru_cache(maxsize=1)
def cpu() -> Cpu:
    """The host CPU, read once per process from ``/proc/cpuinfo`` (platform's words elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    return parse_cpuinfo(text, platform.machine(), os.cpu_count() or 1)


def parse_cpuinfo(text: str, arch: str, cores: int) -> Cpu:
    """A ``Cpu`` from the text of ``/proc/cpuinfo`` (x86 ``model name``/``flags``, aarch64
    ``CPU part``/``Features``)."""
    model, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "Hardware") and not model:
            model = value.strip()
        if key in ("flags", "Features") and not flags:
            flags = set(value.split())
    if arch in ("aarch64", "arm64") and "asimd" in flags:
        flags.add("neon")
    features = tuple(f for f in SIMD_FLAGS if f in flags)
    return Cpu(model or platform.processor() or arch, arch, features, cores)
