"""Object files for another architecture (``compile --target TRIPLE``): rendered and compiled
exactly like host kernels, written to disk, never loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..errors import UsageError
from .codegen import compile_ir
from .keys import cache_key
from .optimize import options_for
from .render_ir import render
from .spec import KernelSpec
from .target import cross_target


def emit_object(spec: KernelSpec, triple: str, cpu: str = "generic", features: str = "") -> bytes:
    """Relocatable ELF object bytes of ``spec`` for ``triple`` (e.g. ``aarch64-linux-gnu``).

    Raises `UsageError` if this LLVM cannot generate code for ``triple``.
    """
    target = cross_target(triple, cpu, features)
    return compile_ir(render(spec), target, spec.name, options_for(spec)).obj


def write_objects(specs: Iterable[KernelSpec], triple: str, out_dir: str | Path,
                  cpu: str = "generic", features: str = "") -> list[Path]:
    """Write ``<name>-<key8>.o`` for every spec into ``out_dir`` (created); returns the paths.
    Objects are release builds: a debug spec is written as its `KernelSpec.release` (its error
    record is decoded by the Python binding, which code linking the object does not have)."""
    target = cross_target(triple, cpu, features)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create directory: {exc}") from exc
    paths = []
    for spec in (s.release() for s in specs):
        ir_text = render(spec)
        key = cache_key(ir_text, spec, target, options_for(spec))
        path = out / f"{spec.name}-{key[:8]}.o"
        try:
            path.write_bytes(compile_ir(ir_text, target, spec.name, options_for(spec)).obj)
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write {path.name}: {exc}") from exc
        paths.append(path)
    return paths
