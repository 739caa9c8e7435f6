"""``cuvil-perception run PIPELINE (--replay DRIVE | --camera DEV)``: run it and report.

Prints where the outputs went (sink files and folders, the run record, the trace), the prewarm
summary, the deadline decisions and a per-stage timing table. A progress bar goes to stderr when
stderr is a terminal. Ctrl-C and SIGTERM stop a run cleanly (sinks closed, record written with its status, table
printed). Where it may write is checked before anything starts (``rt.output_policy``).
"""

from __future__ import annotations

import functools
import sys
from contextlib import contextmanager
from dataclasses import replace

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import DeadlineFailure, UsageError
from ..graph import apply_cli_sources, load_pipeline
from .live_view import apply_foxglove, foxglove_option
from .set_option import set_option


@click.command("run")
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--replay", metavar="DRIVE",
              help="Replay a recorded drive: KITTI raw folder, ROS bag or MCAP (by content).")
@click.option("--camera", metavar="DEV", help="Live camera: /dev/videoN, an index or a video file.")
@click.option("--out", metavar="FILE", help="Path of the jsonl output(s).")
@set_option
@click.option("--frames", type=click.IntRange(min=1), help="Stop after N frames.")
@click.option("--workers", type=click.IntRange(min=1), help="Compute threads [default: cores].")
@click.option("--rate", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Replay pacing: 0 = as fast as possible, 1.0 = recorded real time.")
@click.option("--trace", metavar="FILE.json", help="Write a Chrome/Perfetto trace.")
@click.option("--record", metavar="FILE", help="Run-record path [default: next to the outputs].")
@click.option("--decisions", metavar="RECORD",
              help="Re-apply the deadline decisions of this run record (reproduces its outputs).")
@click.option("--enforce-deadlines", is_flag=True,
              help="Act on deadline misses (on_miss, e2e_deadline_ms) even at --rate 0 [default: "
                   "act when paced (--rate > 0) or live; at --rate 0 only measure, so a replay "
                   "is a pure function of the drive].")
@click.option("--no-deadlines", is_flag=True,
              help="Measure deadlines but never act on misses, even when paced or live.")
@click.option("--no-shed", is_flag=True,
              help="Admit every frame even when the measured stage costs say it will be late "
                   "(by default a real-time run skips such frames at admission, newest wins).")
@click.option("--overwrite", is_flag=True,
              help="Let outputs replace existing files/folders that cuvil-perception did not "
                   "write (inputs and this run's other outputs stay protected).")
@click.option("--summary", is_flag=True,
              help="Print a per-frame table of what each jsonl output holds (detections "
                   "per frame).")
@click.option("--viz", metavar="DIR",
              help="After the run, draw its detections: camera and bird's-eye PNGs and an MP4.")
@click.option("--rt-fifo", "rt_fifo", type=click.IntRange(1, 99), metavar="PRIORITY",
              help="Run the executor's threads (compute pool, io threads, the scheduler) under "
                   "SCHED_FIFO at PRIORITY (1..99), in place of the pipeline's rt.sched; the OS "
                   "may refuse it (needs CAP_SYS_NICE or an rtprio limit): a warning, and the "
                   "run goes on.")
@foxglove_option
@click.option("--metrics", metavar="[HOST:]PORT",
              help="Serve Prometheus metrics at http://HOST:PORT/metrics from start-up (state "
                   "starting during prewarm) to the end of the run (HOST defaults to "
                   "127.0.0.1).")
@click.option("--metrics-linger", type=click.FloatRange(0.0, 600.0), default=5.0,
              show_default=True, metavar="SECONDS",
              help="With --metrics: keep serving the final counts this long after the last "
                   "frame, so Prometheus scrapes them (0 to 600; Ctrl-C ends it at once).")
@click.option("--otlp", metavar="URL",
              help="Export the stage spans (one trace per frame) and metrics over OTLP/HTTP "
                   "to an OpenTelemetry collector at URL, e.g. http://127.0.0.1:4318 (needs "
                   "the otlp extra).")
def run_cmd(pipeline, replay, camera, out, sets, frames, workers, rate, trace, record, decisions,
            enforce_deadlines, no_deadlines, no_shed, overwrite, summary, viz, rt_fifo, metrics,
            metrics_linger, otlp, foxglove) -> None:
    """Run PIPELINE over a recorded drive or a live camera.

    Deadlines: a paced replay (--rate > 0) and a live camera act on misses (on_miss,
    e2e_deadline_ms); an as-fast-as-possible replay (--rate 0, the default) only measures them
    unless --enforce-deadlines. A dropped frame still gets its jsonl line, saying which
    decision dropped it.

    Outputs never overwrite an input of the run, another output of the run, or a file
    cuvil-perception did not write (unless --overwrite); that is checked before the run starts.

    Exit codes: 0 done; 1 the run stopped (a stage raised, or on_miss: fail fired); 2 a usage
    error, a refused output path or a failed write (disk full); 130 interrupted by Ctrl-C, 143
    terminated by SIGTERM (outputs, record and table are still written).
    """
    from ..rt import Claim, RunOptions
    from ..rt.metrics_server import serve_for_run

    if enforce_deadlines and no_deadlines:
        raise UsageError("give --enforce-deadlines or --no-deadlines, not both")

    p = load_pipeline(pipeline, validate=False)
    apply_cli_sources(p, replay=replay, camera=camera, out=out, sets=sets)
    if rt_fifo is not None:  # checked with the rest of the rt: block when the run starts
        p.rt = {**(p.rt or {}), "sched": {"policy": "fifo", "priority": rt_fifo}}
    apply_foxglove(p.validate(), foxglove)
    console, errors = wide_console(), Console(stderr=True)

    def warn(message: str) -> None:  # a problem; information goes to note_line, unlabelled
        errors.print(f"[yellow]warning:[/yellow] {message}", highlight=False, soft_wrap=True)

    def note_line(message: str) -> None:
        errors.print(f"note: {message}", highlight=False, soft_wrap=True)

    enforce = True if enforce_deadlines else False if no_deadlines else None
    viz_claims = (Claim("--viz", viz, folder=True),) if viz is not None else ()
    monitors = ()
    if otlp is not None:
        from ..rt.otlp import OtlpExport

        monitors = (OtlpExport(otlp, p.name, warn),)
        note_line(f"OTLP export to {monitors[0].endpoint} (traces and metrics)")
    note = functools.partial(errors.print, highlight=False, soft_wrap=True)
    # the endpoint outlives the run by --metrics-linger: the table prints before the linger
    with serve_for_run(metrics, note, p.name, metrics_linger) as server:
        if server is not None:
            monitors = (*monitors, server.metrics)
        options = RunOptions(frames=frames, workers=workers, rate=rate, live=camera is not None,
                             enforce_deadlines=enforce, trace=trace, record=record,
                             decisions=decisions, warn=warn, note=note_line,
                             overwrite=overwrite, extra_outputs=viz_claims, shed=not no_shed,
                             monitors=monitors)
        _run_and_report(p, options, console, summary, viz, warn, errors)


def _run_and_report(p, options, console, summary, viz, warn, errors) -> None:
    """Run, print the result table (and --summary / --viz); exit 130/143 if interrupted."""
    from ..rt import run_pipeline
    from ..rt.signals import SIGINT_EXIT_CODE, SIGTERM_EXIT_CODE

    with _progress(options) as progress:
        try:
            result = run_pipeline(p, replace(options, progress=progress))
        except DeadlineFailure as failure:
            if getattr(failure, "result", None) is not None:
                print_result(console, failure.result, p)
            raise
    print_result(console, result, p)
    if summary:
        from .frame_summary import run_summaries

        for table in run_summaries(p, result.outputs):
            console.print(table)
    if viz is not None and result.frames:
        from ..viz import render_result
        from .render_cmd import print_summary

        print_summary(console, render_result(p, result, viz, warn=warn))
    if result.interrupted:
        terminated = result.stop_signal == "SIGTERM"
        what = "terminated (SIGTERM)" if terminated else "interrupted (Ctrl-C)"
        errors.print(f"{what}: outputs and record hold the frames finished before it",
                     highlight=False, soft_wrap=True)
        sys.exit(SIGTERM_EXIT_CODE if terminated else SIGINT_EXIT_CODE)


def print_result(console: Console, result, pipeline) -> None:
    """Outputs, record, trace, prewarm summary, placement, decisions and the timing table."""
    from ..rt.report import timing_table

    console.print(f"[bold]{pipeline.name}[/bold]: {result.frames} frames in "
                  f"{result.wall_s:.2f} s", highlight=False, soft_wrap=True)
    for output in result.outputs:
        console.print(f"  output  {output['stage']} ({output['op']}.{output['param']}): "
                      f"{output['path']}", highlight=False, soft_wrap=True)
    if result.record_path:
        console.print(f"  record  {result.record_path}", highlight=False, soft_wrap=True)
    if result.trace_path:
        console.print(f"  trace   {result.trace_path}", highlight=False, soft_wrap=True)
    summary = result.prewarm_summary()
    console.print(f"  prewarm {summary['kernels']} kernel(s): {summary['hits']} cache hit(s), "
                  f"{summary['misses']} compiled; {result.compiles_after_frame0} compile(s) "
                  "after frame 0", highlight=False, soft_wrap=True)
    for number, line in enumerate(result.placement):
        console.print(f"  {'placement' if number == 0 else '   '} {line}", highlight=False,
                      soft_wrap=True)
    if result.actions:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(result.actions.items()))
        console.print(f"  deadline decisions: {counts}", highlight=False, soft_wrap=True)
    console.print(timing_table(result.report))


def wide_console() -> Console:
    """stdout console; when it is not a terminal (a pipe, a log), 140 columns instead of rich's
    default 80 so the timing table is not truncated."""
    return Console() if sys.stdout.isatty() else Console(width=140)


@contextmanager
def _progress(options):
    """A progress callback drawing a bar on stderr when it is a terminal, else None."""
    if not sys.stderr.isatty():
        yield None
        return
    bar = Progress(TextColumn("frames"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task("run", total=options.frames)
    with bar:
        yield lambda done, total: bar.update(task, completed=done)
