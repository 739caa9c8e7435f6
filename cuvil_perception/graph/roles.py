"""What an op's outputs mean to the layers above ops (overrides, eval, viz): its roles.

An op class declares ``roles = {role: output port}`` the way it declares ``summary_port``, and
eval, render and the CLI's source overrides ask for roles, never for op names, so a user's own
op is scored and drawn like a built-in one. The roles:

* ``ground_truth`` — labels float32 [N, 12] (``drives.labels.LABEL_COLUMNS``) of a recorded drive;
* ``detections_2d`` — float32 [M, 6]: x1, y1, x2, y2 (image pixels), score, class;
* ``boxes_3d``, ``scores_3d``, ``labels_3d`` — float32 [N, 7] x, y, z, dx, dy, dz, heading
  (m, rad, LiDAR frame), float32 [N] scores, int32 [N] classes;
* ``objects`` — fused objects float32 [N, 15] (``geometry.objects.COLUMNS``), 2D and 3D at once.

Sources also say what they are: ``drive_param`` names the parameter holding the path of a
recorded drive they replay (``--replay`` sets it, eval and render re-read it), and ``live_op``
the op that ``--camera`` puts in their place.

Sinks declare ``sink_roles = {role: param}``, the parameter the role is driven by:

* ``run_log`` — one JSON line per frame in the run-log schema (``docs/drive-format.md``) written
  to the file in that parameter: what ``--out`` sets, and what ``run --summary``, ``render``,
  ``eval`` and the run record read back;
* ``live_view`` — the run's results served live at the ``HOST:PORT`` in that parameter (what
  ``run --foxglove`` sets; a pipeline without such a stage gets one of ``sink_op``).
"""

from __future__ import annotations

from . import plugins
from .registry import lookup, registered

GROUND_TRUTH = "ground_truth"
DETECTIONS_2D = "detections_2d"
BOXES_3D, SCORES_3D, LABELS_3D = "boxes_3d", "scores_3d", "labels_3d"
OBJECTS = "objects"
DETECTOR_ROLES = (DETECTIONS_2D, BOXES_3D, SCORES_3D, LABELS_3D, OBJECTS)  # in capture order
RUN_LOG, LIVE_VIEW = "run_log", "live_view"  # sink roles


def _op_class(op_name):
    """The op class, or None when unknown or not importable here (e.g. an old run record's)."""
    try:
        return lookup(op_name) if isinstance(op_name, str) and op_name else None
    except plugins.OpImportError:
        return None


def op_roles(op_name: str | None) -> dict[str, str]:
    """``{role: port}`` of the op registered as ``op_name``; empty for an unknown op."""
    return dict(getattr(_op_class(op_name), "roles", {}))


def drive_param(op_name: str | None) -> str | None:
    """The parameter holding the recorded drive the op replays, or None (not a drive source)."""
    return getattr(_op_class(op_name), "drive_param", None)


def live_op(op_name: str | None) -> str | None:
    """The live source op that ``--camera`` puts in place of this drive source, or None."""
    return getattr(_op_class(op_name), "live_op", None)


def is_detector(op_name: str | None) -> bool:
    """Whether the op produces 2D detections, 3D boxes or fused objects."""
    roles = op_roles(op_name)
    return any(role in roles for role in (DETECTIONS_2D, BOXES_3D, OBJECTS))


def bev_range(pipeline, stage) -> tuple[float, float, float, float] | None:
    """The BEV area (m) ``stage`` is scored on: its op's ``bev_range(params)``; for a stage
    fed 3D boxes (fusion), that of the stage feeding them; None when nothing says."""
    hook = getattr(_op_class(stage.op), "bev_range", None)
    if hook is not None:
        return hook(stage.resolved_params)
    if OBJECTS not in op_roles(stage.op):
        return None
    for ref in stage.inputs.values():
        upstream = pipeline.stage(ref.stage)
        if op_roles(upstream.op).get(BOXES_3D) == ref.port:
            hook = getattr(_op_class(upstream.op), "bev_range", None)
            return None if hook is None else hook(upstream.resolved_params)
    return None


def sink_param(op_name: str | None, role: str) -> str | None:
    """The parameter of the op's ``role`` (``RUN_LOG``: the file it writes, ``LIVE_VIEW``: the
    address it serves), or None when the op does not play that role."""
    return dict(getattr(_op_class(op_name), "sink_roles", {})).get(role)


def run_logs(outputs: list[dict]) -> list[dict]:
    """The run logs among a run's outputs (``{"stage", "op", "param", "path"}`` rows, as in
    ``RunResult.outputs`` and the run record), in their order."""
    return [o for o in outputs if o.get("param") is not None and
            o.get("param") == sink_param(o.get("op"), RUN_LOG)]


def sink_op(role: str) -> str | None:
    """The op to add when a stage must play ``role`` (eval's capture, the live view): this
    package's own when it has one, else the first by name; None when no op plays it."""
    players = {name: cls for name, cls in registered().items()
               if role in getattr(cls, "sink_roles", {})}
    package = __name__.split(".")[0] + "."
    own = [name for name, cls in players.items() if cls.__module__.startswith(package)]
    return (own or list(players) or [None])[0]
