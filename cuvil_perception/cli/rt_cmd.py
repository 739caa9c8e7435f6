"""``cuvil-perception rt check [--seconds N]``: wake-up latency and native-call jitter of this
machine with and without each ``rt:`` knob, and which knobs the OS lets take effect.
``cuvil-perception rt calibrate PIPELINE --replay DRIVE [--write PATH]``: measure the pipeline's
``deadline_ms: auto`` stages on this machine and keep them in its cache (``rt.calibrate``)."""

from __future__ import annotations

import math
from pathlib import Path

import click
from rich.table import Table

from ..errors import UsageError
from .run_cmd import wide_console


@click.group("rt")
def rt_group() -> None:
    """Real-time checks and calibration of this machine."""


@click.command("check")
@click.option("--seconds", type=float, default=5.0, show_default=True,
              help="Total measuring time, split evenly over the trials (0.1 .. 3600).")
def check_cmd(seconds: float) -> None:
    """Measure timer wake-up latency and a native kernel's call jitter per rt knob.

    Trials: no knob, cpu_affinity, SCHED_FIFO, SCHED_DEADLINE, mlockall; each shows whether
    the OS applied it (or why it refused). Times in microseconds.
    """
    from ..rt.cgroup import placement_status
    from ..rt.rtcheck import CALLS_PER_TICK, PERIOD_NS, rt_check

    if not math.isfinite(seconds) or not 0.1 <= seconds <= 3600:
        raise UsageError(f"--seconds must be a number of seconds in 0.1 .. 3600, got {seconds}")
    console = wide_console()
    trials = rt_check(seconds)
    table = Table(title=f"rt check: {PERIOD_NS / 1e6:g} ms periodic loop, {CALLS_PER_TICK} "
                        "calls of example.sum per period (times in us)")
    for name in ("knob", "took effect", "wake p50", "wake p99", "wake max", "call p50",
                 "call p99", "call p99.9", "call max", "jitter (max-p50)"):
        table.add_column(name, justify="left" if name in ("knob", "took effect") else "right")
    for trial in trials:
        r = trial.row()
        table.add_row(r["knob"], r["status"], *(f"{r[k]:.1f}" for k in (
            "wake_p50", "wake_p99", "wake_max", "call_p50", "call_p99", "call_p999",
            "call_max", "jitter")))
    console.print(table)
    console.print(f"cgroup v2 placement (not tried: it would move this process): "
                  f"{placement_status()}", highlight=False, soft_wrap=True)


@click.command("calibrate")
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--replay", metavar="DRIVE", help="Drive to replay [default: the YAML's].")
@click.option("--frames", type=click.IntRange(min=1, max=100_000), default=30,
              show_default=True, help="Frames to time each auto stage on.")
@click.option("--workers", type=click.IntRange(min=1),
              help="Compute threads, as the runs that will use the values [default: cores].")
@click.option("--write", "write_path", metavar="PATH",
              help="Also write a copy of PIPELINE with the measured ms in place of 'auto'.")
@click.option("--overwrite", is_flag=True,
              help="Let --write replace a file cuvil-perception did not write.")
def calibrate_cmd(pipeline, replay, frames, workers, write_path, overwrite) -> None:
    """Measure the 'deadline_ms: auto' stages of PIPELINE on this machine.

    Replays the drive as fast as possible (deadlines not enforced, sinks write into a temporary
    folder), then sets each auto stage's deadline to the p99 of its frame times x 1.5, rounded up
    to 5 ms and bounded by e2e_deadline_ms. Prints them and keeps them in this machine's cache
    (per CPU, ONNX Runtime version, pipeline and intra-op threads), where the next `run` of
    PIPELINE finds them instead of timing warm-up passes; run it again to re-measure.
    """
    from rich.console import Console

    from ..machine_info import cpu
    from ..rt.bench import _load
    from ..rt.calibrate import calibrate, write_pinned

    console, errors = wide_console(), Console(stderr=True)
    if write_path:  # refused before anything runs (output-path policy: rt.output_policy)
        from ..rt import Claim, check_outputs

        check_outputs([Claim("--write", Path(write_path))],
                      [Claim("the pipeline file", Path(pipeline))], overwrite=overwrite)
    loaded = _load(pipeline, replay)

    def warn(message: str) -> None:
        errors.print(f"[yellow]warning:[/yellow] {message}", highlight=False, soft_wrap=True)

    found = calibrate(loaded, frames, workers, warn)
    host = cpu().describe()
    table = Table(title=f"deadline_ms: auto on {host} ({loaded.name})")
    for name in ("stage", "frames", "p50 ms", "p99 ms", "warm-up max ms", "deadline ms"):
        table.add_column(name, justify="left" if name == "stage" else "right")
    for item in found:
        times = sorted(item.frames_ms)
        warm = f"{max(item.warmup_ms):.1f}" if item.warmup_ms else "-"
        table.add_row(item.stage, str(len(times)), f"{times[len(times) // 2]:.1f}",
                      f"{_p99(times):.1f}", warm, f"{item.ms:g}")
    console.print(table)
    for item in found:
        console.print(f"  {item.stage}: {item.bound_rule}", highlight=False, soft_wrap=True)
    console.print("kept in this machine's cache: the next run of this pipeline here uses them",
                  highlight=False)
    if write_path:
        import time

        note = f"{host}, {time.strftime('%Y-%m-%d', time.gmtime())}"
        written = write_pinned(loaded, found, Path(write_path), note)
        console.print(f"wrote {written}", highlight=False)


def _p99(sorted_ms: list[float]) -> float:
    import numpy as np

    return float(np.percentile(sorted_ms, 99))


rt_group.add_command(check_cmd)
rt_group.add_command(calibrate_cmd)
