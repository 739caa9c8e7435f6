"""``cuvil-perception compile PIPELINE``: build every native kernel the pipeline needs.

Without ``--target`` the kernels are compiled for this machine into the kernel cache (so the
next ``run`` starts warm) and a table shows how each was served. With ``--target TRIPLE --out
DIR`` they are written as object files for another architecture and not loaded. With ``--target
TRIPLE --library DIR`` they become one standalone library (``lib<prefix>.so`` + ``.a``, a C
header, a C example; see ``compile.library``), linked with the triple's system toolchain: the
whole pipeline behind ``<prefix>_open / _detect / _close``, or with ``--kernels-only`` the
kernels alone (cli/library_out.py).
Objects and libraries are always release builds, also under ``CUVIL_KERNEL_DEBUG=1``: a debug
build's error record is decoded by the Python binding, which a C caller does not have.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..compile import KernelSpec, PrewarmRow, prewarm, summarize, write_objects
from ..compile.target import cross_target
from ..errors import UsageError
from ..graph import Pipeline, apply_cli_sources, load_pipeline
from ..output_files import mark_folder
from ..rt.op_prewarm import declared_kernels
from .set_option import set_option


@click.command("compile")
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--target", "triple", metavar="TRIPLE",
              help="Write object files for this LLVM triple (e.g. aarch64-linux-gnu).")
@click.option("--out", "out_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Directory for --target object files.")
@click.option("--library", "library_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="With --target: write one shared + static library, a C header and a C "
                   "example there.")
@click.option("--prefix", metavar="NAME",
              help="Symbol prefix of a --library [default: cuvil_<pipeline name>].")
@click.option("--kernels-only", is_flag=True,
              help="With --library: the pipeline's kernels alone, each a C function, without "
                   "the one-call-per-frame API.")
@click.option("--cpu", metavar="CPU",
              help="Target CPU of a --library [default: x86-64-v3 when this machine is an "
                   "x86-64 that has it, else x86-64-v2 (FMAs split into mul + add); generic "
                   "aarch64; 'host' = this machine's CPU].")
@click.option("--overwrite", is_flag=True,
              help="Let --out be a non-empty folder cuvil-perception did not fill.")
@set_option
def compile_cmd(pipeline: str, triple: str | None, out_dir: str | None,
                library_dir: str | None, prefix: str | None, kernels_only: bool,
                cpu: str | None, overwrite: bool, sets: tuple[str, ...]) -> None:
    """Compile (or load from the cache) every kernel PIPELINE's static shapes need."""
    p = apply_cli_sources(load_pipeline(pipeline, validate=False), sets=sets).validate()
    specs = pipeline_kernels(p)
    console = Console()
    if triple is not None and any(s.error_record is not None for s in specs):
        console.print("note: --target writes release builds; bounds-checked kernels "
                      "(CUVIL_KERNEL_DEBUG=1, debug=True) are for runs in Python")
    if library_dir is not None or prefix is not None or cpu is not None or kernels_only:
        if triple is None or library_dir is None:
            raise UsageError("--library DIR needs --target TRIPLE (and --prefix / --cpu / "
                             "--kernels-only need --library)")
        if out_dir is not None:
            raise UsageError("--out and --library are exclusive: one writes loose objects, "
                             "the other a library")
        from .library_out import write_library  # refuses a folder that is not a library

        write_library(console, p, specs, triple, library_dir, prefix, cpu, kernels_only)
        return
    if triple is None:
        if out_dir is not None:
            raise UsageError("--out is only used with --target TRIPLE")
        rows = prewarm(specs)
        console.print(prewarm_table(rows, title=f"kernels of {pipeline}"))
        return
    if out_dir is None:
        raise UsageError("--target needs --out DIR (object files) or --library DIR")
    cross_target(triple)  # an unknown triple is refused before the folder is claimed
    _check_out_dir("--out", out_dir, pipeline, overwrite)
    paths = write_objects(specs, triple, out_dir)
    mark_folder(out_dir, "compile --out")  # after the target is known good: no empty folder
    for path in paths:
        console.print(str(path))
    console.print(f"{len(paths)} object file(s) for {triple} in {out_dir}")


def _check_out_dir(option: str, folder: str, pipeline: str, overwrite: bool) -> None:
    """The output-path policy for an output folder (before anything is written)."""
    from ..rt import Claim, check_outputs

    check_outputs([Claim(option, Path(folder), folder=True)],
                  [Claim("the pipeline file", Path(pipeline))], overwrite=overwrite)


def pipeline_kernels(p: Pipeline) -> list[KernelSpec]:
    """Every kernel of every stage in execution order, including degrade variants."""
    specs: list[KernelSpec] = []
    for stage in p.ordered():
        specs.extend(declared_kernels(stage.id, stage.make_op()))
        if stage.degrade_params:
            specs.extend(declared_kernels(stage.id, stage.make_op(degraded=True)))
    return specs


def prewarm_table(rows: list[PrewarmRow], title: str = "kernels") -> Table:
    """kernel | static params | compile (ms or "cache hit") | load ms, plus a totals caption."""
    table = Table(title=title)
    table.add_column("kernel")
    table.add_column("static params")
    table.add_column("compile", justify="right")
    table.add_column("load ms", justify="right")
    for r in rows:
        compiled = {"hit": "cache hit", "memory": "in memory"}.get(r.status,
                                                                    f"{r.compile_ms:.1f} ms")
        table.add_row(r.name, r.static or "-", compiled, f"{r.load_ms:.2f}")
    s = summarize(rows)
    table.caption = (f"{s['kernels']} kernels: {s['hits']} hits, {s['misses']} compiled; "
                     f"compile {s['compile_ms']:.0f} ms, load {s['load_ms']:.1f} ms")
    return table
