"""``cuvil-perception fleet eval|bench|run PIPELINE DRIVES...``: many drives, one report.

Each drive runs exactly as ``eval`` / ``bench`` / ``run`` would run it alone, on a local pool
of processes (default) or as one task per drive on Ray (``--ray``). As drives finish, a row per
drive is appended to ``OUT/results.jsonl`` (``--resume`` continues an interrupted fleet); at the
end the fleet report is printed and written as ``OUT/report.json`` and ``OUT/report.html``.

Exit codes: 0 every drive ran and every budget holds; 1 a budget is breached (pooled, or on a
drive); 2 a usage error (nothing ran); 3 a drive failed (wins over 1); 130 Ctrl-C (the results
file holds the drives finished before it, and the report covers them).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click

from ..errors import UsageError
from .fleet_view import Display, print_report
from .set_option import set_option

_EXIT_CODES = ("Exit codes: 0 all drives ran, all budgets hold; 1 a budget is breached; 2 a usage "
               "error; 3 a drive failed (wins over 1); 130 Ctrl-C.")


class _FleetCommand(click.Command):
    """A fleet verb whose ``--local`` value is read by ``local_value_given`` first."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, local_value_given(args))


def local_value_given(args: list[str]) -> list[str]:
    """``args`` with a value after every bare ``--local``: ``auto`` when N is left out (last
    word, or another option follows), else the word that follows, a negative number included.

    ``--local`` takes a value in click's eyes, so ``--local -1`` and ``--local=-1`` reach
    ``parse_processes`` and its one-line error; click's own optional values would read ``-1``
    as an unknown option and print its usage text instead.
    """
    given = []
    for index, word in enumerate(args):
        if word == "--":
            return given + args[index:]
        given.append(word)
        if word == "--local":
            following = args[index + 1] if index + 1 < len(args) else None
            if following is None or _is_option(following):
                given.append("auto")
    return given


def _is_option(word: str) -> bool:
    """``--frames``, ``-h``: an option; ``-1``, ``-inf``: a (bad) value of ``--local``."""
    if not word.startswith("-") or len(word) == 1:
        return False
    try:
        float(word)
    except ValueError:
        return True
    return False


def _common(function):
    """The options every fleet verb has (applied bottom-up, so listed in reverse)."""
    options = [
        click.argument("pipeline", type=click.Path(dir_okay=False)),
        click.argument("drives", nargs=-1, required=True),
        click.option("--out", metavar="DIR", help="Results, report.json, report.html and "
                     "outputs go here [default: runs/fleet-<pipeline>-<verb>]."),
        click.option("--local", "local", default=None, metavar="[N]", help="A pool of N processes on this machine (the default; "
                     "N defaults to cores / --workers)."),
        click.option("--ray", "ray", metavar="ADDRESS", help="One task per drive on Ray: "
                     "auto, HOST:PORT, ray://HOST:PORT, or local (start one here). Needs the "
                     "'fleet' extra."),
        click.option("--ship-package", is_flag=True, help="With --ray: send this "
                     "cuvil_perception to every node through Ray's runtime_env (py_modules), "
                     "for nodes that have another version or none."),
        click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Compute threads of each drive's run (= Ray CPUs per task)."),
        click.option("--frames", type=click.IntRange(min=1), help="Only the first N frames "
                     "of each drive."),
        click.option("--resume", is_flag=True, help="Continue the fleet in --out: skip "
                     "drives already finished (same drive contents and pipeline)."),
        set_option,
    ]
    for option in reversed(options):
        function = option(function)
    return function


@click.group("fleet")
def fleet_group() -> None:
    """Run, evaluate or budget-check PIPELINE over many drives (folders, bags, globs, or a
    list file: @FILE, FILE.txt, FILE.list), locally or on Ray."""


@fleet_group.command("eval", cls=_FleetCommand, epilog=_EXIT_CODES)
@_common
@click.option("--budgets", "budgets_path", metavar="BUDGETS.yaml",
              help="Also check absolute latency budgets on the runs.")
@click.option("--iou", "iou_threshold", type=click.FloatRange(0.0, 1.0, min_open=True),
              default=0.5, show_default=True, help="IoU a detection needs to count as found.")
@click.option("--interpolation", "method", type=click.Choice(["all", "r40"]), default="all",
              show_default=True, help="all = all-point (VOC 2010+); r40 = KITTI's 40 points.")
@click.option("--min-height", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Ignore (don't-care) image boxes shorter than this many pixels.")
def fleet_eval(**kwargs) -> None:
    """AP per class over every drive's detections (pooled, and per drive)."""
    _fleet("eval", **kwargs)


@fleet_group.command("bench", cls=_FleetCommand, epilog=_EXIT_CODES)
@_common
@click.option("--budgets", "budgets_path", metavar="BUDGETS.yaml", required=True,
              help="Latency budgets (absolute ms or ratios to a reference).")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run each drive K times.")
def fleet_bench(**kwargs) -> None:
    """Latency per stage over every drive's frames, checked against budgets."""
    _fleet("bench", **kwargs)


@fleet_group.command("run", cls=_FleetCommand, epilog=_EXIT_CODES)
@_common
@click.option("--budgets", "budgets_path", metavar="BUDGETS.yaml",
              help="Also check absolute latency budgets on the runs.")
@click.option("--no-deadlines", is_flag=True, help="Measure deadlines but do not act on "
              "misses (each drive's outputs then depend only on the drive).")
def fleet_run(**kwargs) -> None:
    """Run PIPELINE on every drive; each drive's outputs go to OUT/drives/NAME/."""
    _fleet("run", **kwargs)


def _fleet(mode: str, pipeline: str, drives, out, local, ray, ship_package, workers, frames,
           resume, budgets_path, **job_options) -> None:
    from ..fleet import (RESULTS_NAME, ResultsFile, build_report, discover, job_hash,
                         make_job, report_dict, run_fleet)

    backend = make_backend(ray, local, workers, ship_package)
    refs = discover(list(drives))
    job, validated, spec = make_job(mode, pipeline, refs, budgets_path, frames=frames,
                                    workers=workers, **job_options)
    out_dir = Path(out) if out else Path("runs") / f"fleet-{Path(pipeline).stem}-{mode}"
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir}: exists and is not a folder")
    _check_out(out_dir, pipeline, refs, budgets_path)
    with _hold_out(out_dir):
        backend.log_path = out_dir / "ray.log"  # Ray's own messages (the Ray backend only)
        backend.connect()  # before the results file: a cluster that cannot be joined leaves
        # none
        try:
            results = ResultsFile(out_dir / RESULTS_NAME, {"mode": mode, "pipeline": pipeline},
                                  resume)
            display = Display(mode, validated.name, backend)
            try:
                with display:
                    run = run_fleet(job, refs, backend, results, job_hash(job, validated),
                                    out_dir, on_row=display.row, on_start=display.start,
                                    on_retry=display.retry)
            except UsageError:  # found before the first drive (a node's package): no file
                results.close()
                results.discard_if_empty()
                raise
            finally:
                results.close()
        finally:
            backend.close(cancel=True)  # a no-op when run_fleet has closed it
        report = build_report(mode, validated.name, run.rows, spec,
                              job_options.get("method", "all"))
        data = report_dict(report, run, display.backend_text)
        paths = _write_report(out_dir, report, data)
        print_report(report, run, paths)
        if run.interrupted:
            click.echo("interrupted: the results file holds the drives finished before Ctrl-C; "
                       "--resume continues", err=True)
            sys.exit(130)
        sys.exit(report.exit_code)


def _hold_out(out_dir: Path):
    """The fleet's lock on OUT for its life (`rt.output_lock`): a second fleet there stops with
    exit 2 naming this one's pid."""
    from ..rt.output_lock import hold
    from ..rt.output_policy import Claim

    return hold([Claim("--out", out_dir, folder=True)])


def _check_out(out_dir: Path, pipeline: str, refs, budgets_path: str | None) -> None:
    """The output-path policy for what the fleet writes in OUT, before anything runs: no file
    of it inside a drive or onto an input, no drive under ``OUT/drives`` (rule ``input``), and
    no report over a ``report.json`` / ``report.html`` the fleet did not write (``not-ours``;
    ``results.jsonl`` has its own rule: ``--resume``)."""
    from ..rt.output_policy import Claim, check_outputs

    inputs = [Claim("the pipeline file", Path(pipeline))]
    inputs += [Claim(f"drive {ref.name}", ref.path, folder=ref.path.is_dir()) for ref in refs
               if ref.url is None]
    if budgets_path:
        inputs.append(Claim("the budgets file", Path(budgets_path)))
    reports = [Claim("--out", out_dir / name) for name in ("report.json", "report.html")]
    check_outputs(reports + [Claim("--out", out_dir / "results.jsonl"),
                             Claim("--out", out_dir / "drives", folder=True)],
                  inputs, overwrite=True)  # only same-output, input, wrong-kind, not-writable
    check_outputs(reports, [], remedy="move it away or choose another --out")


def make_backend(ray: str | None, local: str | None, workers: int,
                 ship_package: bool = False):
    """The backend the options ask for; a usage error for both, a bad N, or no Ray."""
    from ..fleet import LocalPool, default_processes

    if ray is not None and local is not None:
        raise UsageError("give either --ray ADDRESS or --local [N], not both")
    if ray is not None:
        from ..fleet.ray_backend import RayBackend

        return RayBackend(ray, workers, ship_package)
    if ship_package:
        raise UsageError("--ship-package sends the package to Ray nodes: it needs --ray")
    processes = default_processes(workers) if local in (None, "auto") else parse_processes(
        local)
    return LocalPool(processes)


def parse_processes(text: str) -> int:
    """``--local N``: a whole number from 1 to 16 x the cores."""
    limit = 16 * (os.cpu_count() or 1)
    text = text.strip()
    if not re.fullmatch(r"[0-9]{1,9}", text) or not 1 <= int(text) <= limit:
        raise UsageError(f"--local: the number of processes must be a whole number from 1 to "
                         f"{limit} (16 x the cores), got {text!r}")
    return int(text)


def _write_report(out_dir: Path, report, data: dict) -> list[Path]:
    import cv2

    from ..fleet import write_html, write_json
    from ..rt.plot import histogram_image

    png = None
    if report.pooled_recorder is not None:
        ok, encoded = cv2.imencode(".png", histogram_image(report.pooled_recorder,
                                                          report.pooled_latency))
        png = encoded.tobytes() if ok else None
    try:
        return [write_json(out_dir / "report.json", data),
                write_html(out_dir / "report.html", data, png)]
    except OSError as exc:
        raise UsageError(f"{out_dir}: cannot write the report ({exc.strerror or exc})") \
            from None
