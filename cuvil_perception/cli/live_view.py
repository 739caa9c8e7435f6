"""``run ... --foxglove [HOST:PORT]``: serve the run's results live over the Foxglove WebSocket
protocol, through the same ``mcap`` sink that writes MCAP files (same channels, io side).

Every ``mcap`` stage of the pipeline also serves live; a pipeline without one gets a live-only
``mcap`` stage wired by port roles: the sources' sensor outputs (image, points, calibration),
and the detectors' outputs found through their ``summary_port`` (2D detections, 3D boxes with
their scores and labels, fused objects), falling back to any output of that name and shape.
"""

from __future__ import annotations

import click

from ..graph import Source

DEFAULT_ADDRESS = "127.0.0.1:8765"
LIVE_STAGE = "foxglove_live"
SENSOR_ROLES = ("image", "points", "P2", "R0_rect", "Tr_velo_to_cam")


def foxglove_option(command):
    """The ``--foxglove [HOST:PORT]`` option (bare ``--foxglove`` serves on 127.0.0.1:8765)."""
    return click.option(
        "--foxglove", "foxglove", metavar="[HOST:]PORT", is_flag=False,
        flag_value=DEFAULT_ADDRESS, default=None,
        help="Serve results live over the Foxglove WebSocket protocol [bare: "
             f"{DEFAULT_ADDRESS}]; pair a replay with --rate 1.")(command)


def _role_sources(pipeline) -> dict[str, str]:
    """role -> ``stage/port`` for the live stage's inputs."""
    from ..ops.mcap_sink import INPUTS

    found: dict[str, tuple[int, str]] = {}
    for stage in pipeline.ordered():
        op = stage.make_op()
        summary = getattr(op, "summary_port", None)
        is_source = isinstance(op, Source)
        for port, spec in stage.output_specs.items():
            want = INPUTS.get(port)
            if want is None or spec.mismatch(want) is not None:
                continue
            if port in SENSOR_ROLES:
                rank = 2 if is_source else 0
            else:  # detector outputs: prefer the stage that summarises itself through them
                rank = 2 if summary is not None else 1
            if rank >= found.get(port, (-1, ""))[0]:
                found[port] = (rank, f"{stage.id}/{port}")
    return {role: ref for role, (_, ref) in found.items()}


def apply_foxglove(pipeline, address: str | None):
    """Make the validated ``pipeline`` serve live at ``address`` (None: leave it alone);
    returns it validated again."""
    if address is None:
        return pipeline
    sinks = [s for s in pipeline.stages if s.op == "mcap"]
    for stage in sinks:
        stage.params["live"] = address
    if not sinks:
        pipeline.add(LIVE_STAGE, "mcap", inputs=_role_sources(pipeline), live=address)
    return pipeline.validate()
