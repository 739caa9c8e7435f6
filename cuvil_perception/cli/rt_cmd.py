"""``cuvil-perception rt check [--seconds N]``: wake-up latency and native-call jitter of this
machine with and without each ``rt:`` knob, and which knobs the OS lets take effect."""

from __future__ import annotations

import math

import click
from rich.table import Table

from ..errors import UsageError
from .run_cmd import wide_console


@click.group("rt")
def rt_group() -> None:
    """Real-time checks of this machine."""


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


rt_group.add_command(check_cmd)
