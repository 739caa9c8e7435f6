"""``compile PIPELINE --target TRIPLE --library DIR [--kernels-only]``: the library, plus the
ops' example files.

Whole pipeline (the default): the stage whose op has ``library_api(symbols, prefix, cc)``
(``pillars.detect``: ``<prefix>_open / _detect / _close``, `ops.pillars.c_detect`) adds its
`LibraryPart`, and the library holds that op's ``library_kernels(target)`` when it has them
(the detector's: its network lowered to native kernels for the target, `ops.pillars.c_net`,
whatever its ``runtime``); a pipeline with kernels in a stage that has no such API, or whose op cannot give
one (a model whose network does not lower), is refused with one line.
``--kernels-only``: the kernels alone, and every stage whose op has
``library_files(symbols, prefix, cc)`` (e.g. ``pillars.detect``: a C example on a .bin scan)
gets its files in ``DIR/example`` (``DIR/example-<stage>`` when several stages have some).
"""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from ..compile.library import (MANIFEST, build_library, check_out_dir, check_prefix,
                               library_target, symbols_for)
from ..compile.kernel_prewarm import unique_specs
from ..compile.toolchain import find_toolchain
from ..errors import UsageError
from ..output_files import is_previous_output


def default_prefix(pipeline_name: str) -> str:
    """``cuvil_<pipeline name>`` as a C identifier (``lidar-pillars`` ->
    ``cuvil_lidar_pillars``)."""
    return "cuvil_" + re.sub(r"[^A-Za-z0-9_]", "_", pipeline_name)


def write_library(console: Console, pipeline, specs, triple: str, out_dir: str,
                  prefix: str | None, cpu: str | None, kernels_only: bool = False) -> None:
    _check_manifest(Path(out_dir))
    check_out_dir(Path(out_dir))
    prefix = prefix or default_prefix(pipeline.name)
    check_prefix(prefix)  # the user's mistakes first, before the pipeline's
    cc = Path(find_toolchain(triple).cc).name
    target = library_target(triple, cpu)
    parts = []
    if not kernels_only:
        stage_id, op = _api_stage(pipeline)
        try:
            specs = op.library_kernels(target) if hasattr(op, "library_kernels") else specs
            symbols = _symbols(specs, prefix)
            parts.append(op.library_api(symbols, prefix, cc, target))
        except UsageError as exc:
            raise UsageError(f"stage {stage_id!r}: {exc}") from None
    else:
        symbols = _symbols(specs, prefix)
    lib = build_library(specs, triple, out_dir, prefix, cpu, parts=parts)
    extras = [("api", parts[0].example)] if parts else _example_files(pipeline, symbols,
                                                                       prefix, cc)
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
    what = "kernels only" if kernels_only else f"{prefix}_open / _detect / _close"
    console.print(f"{len(lib.symbols)} kernel(s), {what}, for {lib.target.triple} (cpu "
                  f"{lib.target.cpu}): {lib.shared_file}, {lib.static}, {lib.header}",
                  highlight=False, soft_wrap=True)


def _symbols(specs, prefix: str) -> dict:
    """KernelSpec -> exported symbol. Ops look their kernels up by the specs they declare;
    under CUVIL_KERNEL_DEBUG=1 those are debug builds, and the library holds their release
    builds (`build_library`)."""
    symbols = dict(symbols_for(unique_specs(s.release() for s in specs), prefix))
    symbols.update({s: symbols[s.release()] for s in specs if s.release() in symbols})
    return symbols


def _api_stage(pipeline) -> tuple:
    """(stage id, op) of the one stage with a whole-pipeline API; refuses a stage with kernels
    and no API, and a pipeline with no such stage or several."""
    found = []
    for stage in pipeline.ordered():
        op = stage.make_op()
        if getattr(op, "library_api", None) is None:
            if op.kernels():
                raise UsageError(f"stage {stage.id!r} ({op.name}) has no one-call C API; use "
                                 "--kernels-only for its kernels")
            continue
        found.append((stage.id, op))
    if len(found) != 1:
        raise UsageError(f"a whole-pipeline library has one detecting stage, this pipeline has "
                         f"{len(found)}; use --kernels-only")
    return found[0]


def _example_files(pipeline, symbols: dict, prefix: str, cc: str) -> list:
    """(stage id, files) of every stage whose op offers kernels-only example files."""
    extras = []
    for stage in pipeline.ordered():
        files = getattr(stage.make_op(), "library_files", None)
        found = files(symbols, prefix, cc) if files is not None else {}
        if found:
            extras.append((stage.id, found))
    return extras


def _check_manifest(out: Path) -> None:
    """A non-empty DIR is ours when its manifest is one we wrote (by content: a user's own
    ``library.json`` does not make the folder ours; `build_library` checks only the name)."""
    manifest = out / MANIFEST
    if out.is_dir() and any(out.iterdir()) and manifest.is_file() and \
            not is_previous_output(manifest):
        raise UsageError(f"--library {out}: {manifest} is not a manifest cuvil-perception "
                         "wrote; choose another folder")

