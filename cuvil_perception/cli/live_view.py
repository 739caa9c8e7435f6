"""``run ... --foxglove [HOST:PORT]``: serve the run's results live over the Foxglove WebSocket
protocol, through the sink with the ``live_view`` role (`graph.roles`: the ``mcap`` sink, which
writes MCAP files with the same channels, io side).

Every live-view stage of the pipeline serves live; a pipeline without one gets a live-only stage
of ``roles.sink_op(LIVE_VIEW)`` wired by port names: the sources' sensor outputs (image,
points, calibration), and the detectors' outputs found through their ``summary_port`` (2D
detections, 3D boxes with their scores and labels, fused objects), falling back to any output
of that name and shape.
"""

from __future__ import annotations

import click

from ..graph import Source, lookup
from ..graph import roles as R

DEFAULT_ADDRESS = "127.0.0.1:8765"
LIVE_STAGE = "foxglove_live"
SENSOR_ROLES = ("image", "points", "P2", "R0_rect", "Tr_velo_to_cam")


def foxglove_option(command):
    """The ``--foxglove [HOST:PORT]`` option (bare ``--foxglove`` serves on 127.0.0.1:8765)."""
    return click.option(
        "--foxglove", "foxglove", metavar="[HOST:]PORT", is_flag=False,
        flag_value=DEFAULT_ADDRESS, default=None,
        help="Serve results live over the Foxglove WebSocket protocol (subprotocol "
             "foxglove.websocket.v1 or foxglove.sdk.v1) at ws://HOST:PORT [bare: "
             f"{DEFAULT_ADDRESS}]; pair a replay with --rate 1.")(command)


def _role_sources(pipeline, op_name: str) -> dict[str, str]:
    """input -> ``stage/port`` for a live stage of op ``op_name`` (its inputs when unwired)."""
    inputs = {spec.name: spec for spec in lookup(op_name)({}, {}).input_ports()}
    found: dict[str, tuple[int, str]] = {}
    for stage in pipeline.ordered():
        op = stage.make_op()
        summary = getattr(op, "summary_port", None)
        is_source = isinstance(op, Source)
        for port, spec in stage.output_specs.items():
            want = inputs.get(port)
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
    sinks = [s for s in pipeline.stages if R.sink_param(s.op, R.LIVE_VIEW)]
    for stage in sinks:
        stage.params[R.sink_param(stage.op, R.LIVE_VIEW)] = address
    if not sinks:
        op = R.sink_op(R.LIVE_VIEW)
        pipeline.add(LIVE_STAGE, op, inputs=_role_sources(pipeline, op),
                     **{R.sink_param(op, R.LIVE_VIEW): address})
    return pipeline.validate()
