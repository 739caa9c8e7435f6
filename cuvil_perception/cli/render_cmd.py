"""``cuvil-perception render RUN_OUTPUT --out DIR``: pictures and an MP4 of a run.

RUN_OUTPUT is the jsonl a ``run`` wrote; the drive is found again through the run record beside
it (or ``--drive``). Writes ``DIR/camera/*.png``, ``DIR/bev/*.png`` and ``DIR/drive.mp4``
(see ``viz.run_pictures``). Exit codes: 0 done, 2 usage error (no drive, unreadable output, ...).
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console


@click.command("render")
@click.argument("run_output", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", metavar="DIR", required=True, help="Folder for the pictures.")
@click.option("--drive", metavar="DRIVE",
              help="The drive the run replayed [default: from the run record].")
@click.option("--no-video", is_flag=True, help="Write the PNGs only, no MP4.")
@click.option("--gt", "ground_truth", is_flag=True, help="Also draw the drive's labels (white).")
@click.option("--open3d", "open3d", is_flag=True,
              help="Add an Open3D offscreen 3D view (falls back to OpenCV only if unavailable).")
@click.option("--resolution", type=click.FloatRange(0.01, 10.0), default=0.1, show_default=True,
              help="Bird's-eye view metres per pixel, 0.01 .. 10.")
@click.option("--overwrite", is_flag=True,
              help="Let --out be a non-empty folder cuvil-perception did not fill.")
def render_cmd(run_output, out_dir, drive, no_video, ground_truth, open3d, resolution,
               overwrite) -> None:
    """Draw the detections of RUN_OUTPUT on the camera images and a bird's-eye view.

    --out is checked before drawing: never RUN_OUTPUT, the drive or the run record, and never a
    non-empty folder this tool did not fill (unless --overwrite).
    """
    from ..eval.runlog import load_record, record_path
    from ..graph.roles import drive_param
    from ..rt import Claim, check_outputs
    from ..rt.output_lock import hold
    from ..viz import BevView, render_run

    console, errors = Console(), Console(stderr=True)

    def warn(message: str) -> None:
        errors.print(f"[yellow]warning:[/yellow] {message}", highlight=False)

    inputs = [Claim("RUN_OUTPUT", Path(run_output)),
              Claim("the run record", record_path(run_output))]
    if drive is not None:
        inputs.append(Claim("--drive", Path(drive), folder=Path(drive).is_dir()))
    for stage in ((load_record(run_output) or {}).get("pipeline") or {}).get("stages", []):
        param = drive_param(stage.get("op"))  # a drive folder or a bag file
        path = stage.get("params", {}).get(param) if param else None
        if path:
            inputs.append(Claim("the drive of the run", Path(path), folder=True))
    outputs = [Claim("--out", Path(out_dir), folder=True)]
    check_outputs(outputs, inputs, overwrite=overwrite)
    with hold(outputs):  # another render (or run --viz) drawing into --out: exit 2, its pid
        summary = render_run(run_output, out_dir, drive=drive,
                             view=BevView(resolution=resolution), video=not no_video,
                             ground_truth=ground_truth, open3d=open3d, warn=warn)
    print_summary(console, summary)


def print_summary(console: Console, summary) -> None:
    """Where the pictures went; also used by ``run --viz``."""
    camera = "x".join(map(str, summary.camera_size or (0, 0)))
    bev = "x".join(map(str, summary.bev_size or (0, 0)))
    console.print(f"  pictures {summary.frames} frame(s): {summary.camera_dir} ({camera}), "
                  f"{summary.bev_dir} ({bev})", highlight=False)
    if summary.scene3d_dir is not None:
        console.print(f"  3D views {summary.scene3d_dir}", highlight=False)
    if summary.video is not None and summary.frames:
        console.print(f"  video    {summary.video}", highlight=False)
    if summary.marked:
        console.print(f"  marked   {len(summary.marked)} frame(s) whose results were dropped, "
                      "skipped or stale: a banner on their pictures says which stage and why",
                      highlight=False)
    if summary.skipped:
        console.print(f"  skipped  {len(summary.skipped)} frame(s) not found in the drive",
                      highlight=False)
