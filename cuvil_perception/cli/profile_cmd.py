"""``cuvil-perception profile PIPELINE --replay DRIVE --out DIR``: where the time goes, by
function.

Runs the drive ``--repeat`` times in a worker process under a sampling profiler (py-spy by
default; `profile.samplers`) and writes a flame graph, the folded stacks and a speedscope file
(`profile.output`). ``--vs B.yaml`` / ``--vs-set STAGE.PARAM=VALUE`` records B too, runs
interleaved A, B, A, B, and adds a differential flame graph and the table of the functions whose
time changed most.

Exit codes: 0 written; 1 a run or the sampler failed; 2 a usage error (bad pipeline, missing
drive, no sampler allowed here, an output folder that is not ours).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from .run_cmd import wide_console
from .set_option import set_option

TOP_ROWS = 12


@click.command("profile")
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--replay", metavar="DRIVE", help="Drive to replay [default: the YAML's].")
@set_option
@click.option("--out", "out_dir", required=True, metavar="DIR",
              help="Folder for flamegraph.svg, stacks.folded, profile.speedscope.json "
                   "(--vs: a-*/b-* of each, diff.svg, changes.txt).")
@click.option("--vs", "vs_path", metavar="B.yaml", type=click.Path(dir_okay=False),
              help="Also record B.yaml, runs interleaved A, B, A, B...; differential graph.")
@click.option("--vs-set", "vs_sets", metavar="STAGE.PARAM=VALUE", multiple=True,
              help="B is B.yaml (default: PIPELINE) with this --set applied; repeatable.")
@click.option("--hz", type=click.IntRange(min=1, max=2000), default=None,
              help="Samples a second per thread [default: 10].")
@click.option("--repeat", type=click.IntRange(min=1, max=1000), default=None,
              help="Runs of the drive recorded, per side [default: 60].")
@click.option("--frames", type=click.IntRange(min=1), help="Frames per run.")
@click.option("--workers", type=click.IntRange(min=1), help="Compute threads [default: cores].")
@click.option("--profiler", type=click.Choice(["auto", "py-spy", "perf"]), default="auto",
              show_default=True, help="The sampler; auto: py-spy, else perf where allowed.")
@click.option("--overwrite", is_flag=True,
              help="Let --out be a non-empty folder cuvil-perception did not fill.")
def profile_cmd(pipeline, replay, sets, out_dir, vs_path, vs_sets, hz, repeat, frames, workers,
                profiler, overwrite) -> None:
    """Record PIPELINE's runs with a sampling profiler and write a flame graph.

    JIT kernels appear by name (cuvil:pillars.pillarize), Python stage code by function,
    ONNX Runtime by its library, each thread under its own name. The sinks write into a
    temporary folder, never onto the pipeline's outputs. With --vs / --vs-set: both sides,
    a differential flame graph (red grew, blue shrank) and a table of the top changes.
    """
    from ..profile import DEFAULT_HZ, DEFAULT_REPEAT, changes, choose, record
    from ..profile.output import write_profile, write_vs

    console, errors = wide_console(), Console(stderr=True)
    ab = bool(vs_path or vs_sets)
    specs, labels = _specs(pipeline, replay, sets, vs_path, vs_sets, frames, workers, ab)
    _check_out(out_dir, pipeline, vs_path, overwrite)
    sampler = choose(profiler, _warner(errors))
    rate, repeat = hz or DEFAULT_HZ, repeat or DEFAULT_REPEAT
    with tempfile.TemporaryDirectory(prefix="cuvil-profile-") as scratch:
        recordings = record(specs, repeat, sampler, rate, Path(scratch))
    for rec, label in zip(recordings, labels):
        _check_samples(rec.stacks, label, _warner(errors))
        console.print(f"{label}: {len(rec.runs)} run(s), {rec.stacks.frames} frames, "
                      f"{rec.stacks.total} samples at {rate} Hz ({sampler})", highlight=False,
                      soft_wrap=True)
    folder = Path(out_dir)
    if ab:
        a, b = recordings[0].stacks, recordings[1].stacks
        rows = changes(a, b, TOP_ROWS)
        paths = write_vs(folder, a, b, labels, sampler, rows)
        console.print(_changes_table(rows, labels))
    else:
        paths = write_profile(folder, recordings[0].stacks, labels[0], sampler)
        console.print(_top_table(recordings[0].stacks))
    for path in paths:
        console.print(f"  wrote {path}", highlight=False, soft_wrap=True)


def _specs(pipeline, replay, sets, vs_path, vs_sets, frames, workers, ab):
    """Both sides checked in this process (usage errors exit 2 before anything runs)."""
    from ..errors import PipelineError, UsageError
    from ..graph import apply_cli_sources, load_pipeline, preflight

    preflight(apply_cli_sources(load_pipeline(pipeline, validate=False), replay=replay,
                                sets=sets).validate())
    base = {"replay": replay, "frames": frames, "workers": workers}
    specs = [dict(base, pipeline=str(Path(pipeline).resolve()), sets=list(sets))]
    labels = [Path(pipeline).name]
    if ab:
        b_sets = tuple(sets) + tuple(vs_sets)
        try:  # B's errors name its overrides as --set STAGE.PARAM: say they are B's
            preflight(apply_cli_sources(load_pipeline(vs_path or pipeline, validate=False),
                                        replay=replay, sets=b_sets).validate())
        except (UsageError, PipelineError) as e:
            raise UsageError(f"B (--vs / --vs-set): {e}") from None
        specs.append(dict(base, pipeline=str(Path(vs_path or pipeline).resolve()),
                          sets=list(b_sets)))
        labels.append(Path(vs_path or pipeline).name
                      + (" with " + ", ".join(vs_sets) if vs_sets else ""))
    return specs, tuple(labels)


def _check_out(out_dir, pipeline, vs_path, overwrite) -> None:
    from ..rt import Claim, check_outputs

    inputs = [Claim(name, Path(path)) for name, path in
              (("the pipeline file", pipeline), ("B.yaml", vs_path)) if path]
    check_outputs([Claim("--out", Path(out_dir), folder=True)], inputs, overwrite=overwrite)


def _check_samples(stacks, label, warn) -> None:
    from ..errors import ExecutionError

    if stacks.total == 0:
        raise ExecutionError(f"profile: no samples of {label}: the sampler saw no busy thread")
    if stacks.total < 200:
        warn(f"{label}: only {stacks.total} samples: the graph is coarse; raise --repeat or "
             "--hz")


def _warner(errors: Console):
    def warn(message: str) -> None:
        errors.print(f"[yellow]warning:[/yellow] {message}", highlight=False, soft_wrap=True)
    return warn


def _top_table(stacks):
    from rich.table import Table

    own, total = stacks.function_times()
    threads = set(stacks.threads())
    table = Table(title=f"top functions by self time ({stacks.total} samples, "
                        f"{stacks.frames} frames; ms per frame)")
    for name in ("function", "self", "total"):
        table.add_column(name, justify="left" if name == "function" else "right")
    ranked = sorted((k for k in own if k not in threads), key=lambda k: (-own[k], k))
    for name in ranked[:TOP_ROWS]:
        table.add_row(escape(name), f"{stacks.ms_per_frame(own[name]):.3f}",
                      f"{stacks.ms_per_frame(total[name]):.3f}")
    return table


def _changes_table(rows, labels):
    from rich.table import Table

    table = Table(title=f"top functions by change, A = {labels[0]}, B = {labels[1]} "
                        "(ms per frame)")
    for name in ("function", "A self", "B self", "B-A self", "A total", "B total"):
        table.add_column(name, justify="left" if name == "function" else "right")
    for c in rows:
        table.add_row(escape(c.name), f"{c.a_self:.3f}", f"{c.b_self:.3f}", f"{c.self_delta:+.3f}",
                      f"{c.a_total:.3f}", f"{c.b_total:.3f}")
    return table
