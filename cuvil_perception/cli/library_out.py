"""``compile PIPELINE --target TRIPLE --library DIR``: the library, plus the ops' example files.

`compile.build_library` writes the library, header and manifest; then every stage whose op has
``library_files(symbols, prefix, cc)`` (e.g. ``pillars.detect``: a C example on a .bin scan)
gets its files in ``DIR/example`` (``DIR/example-<stage>`` when several stages have some).
"""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from ..compile.library import MANIFEST, build_library
from ..compile.toolchain import find_toolchain
from ..errors import UsageError
from ..output_files import is_previous_output


def default_prefix(pipeline_name: str) -> str:
    """``cuvil_<pipeline name>`` as a C identifier (``lidar-pillars`` ->
    ``cuvil_lidar_pillars``)."""
    return "cuvil_" + re.sub(r"[^A-Za-z0-9_]", "_", pipeline_name)


def write_library(console: Console, pipeline, specs, triple: str, out_dir: str,
                  prefix: str | None, cpu: str | None) -> None:
    _check_manifest(Path(out_dir))
    prefix = prefix or default_prefix(pipeline.name)
    lib = build_library(specs, triple, out_dir, prefix, cpu)
    symbols = dict(lib.symbols)
    # Ops look their kernels up by the specs they declare; under CUVIL_KERNEL_DEBUG=1 those are
    # debug builds, and the library holds their release builds (`build_library`).
    symbols.update({s: symbols[s.release()] for s in specs if s.release() in symbols})
    extras = []
    cc = Path(find_toolchain(triple).cc).name
    for stage in pipeline.ordered():
        files = getattr(stage.make_op(), "library_files", None)
        found = files(symbols, prefix, cc) if files is not None else {}
        if found:
            extras.append((stage.id, found))
    for stage_id, files in extras:
        folder = lib.out_dir / ("example" if len(extras) == 1 else f"example-{stage_id}")
        try:
            folder.mkdir(exist_ok=True)
            for name, data in files.items():
                (folder / name).write_bytes(data)
        except OSError as exc:
            raise UsageError(f"--library {lib.out_dir}: cannot write {folder}: {exc}") from exc
        console.print(f"  example  {folder} (make; make run SCAN=scan.bin)", highlight=False)
    for spec, symbol in lib.symbols:
        console.print(f"  {symbol:<40} {spec.name} ({spec.static_str()})", highlight=False,
                      soft_wrap=True)
    console.print(f"{len(lib.symbols)} kernel(s) for {lib.target.triple} (cpu "
                  f"{lib.target.cpu}): {lib.shared}, {lib.static}, {lib.header}",
                  highlight=False, soft_wrap=True)


def _check_manifest(out: Path) -> None:
    """A non-empty DIR is ours when its manifest is one we wrote (by content: a user's own
    ``library.json`` does not make the folder ours; `build_library` checks only the name)."""
    manifest = out / MANIFEST
    if out.is_dir() and any(out.iterdir()) and manifest.is_file() and \
            not is_previous_output(manifest):
        raise UsageError(f"--library {out}: {manifest} is not a manifest cuvil-perception "
                         "wrote; choose another folder")

