"""Pictures of a run: re-read the drive a run log came from and draw its detections.

``render_run(RUN_OUTPUT, OUT_DIR)`` writes, per frame k of the run log (the file of a stage
whose op has the ``run_log`` role, `graph.roles`: ``jsonl``'s ``path``)::

    OUT_DIR/camera/<k:06d>.png   the camera image (drive size) with 2D boxes and projected 3D boxes
    OUT_DIR/bev/<k:06d>.png      bird's-eye view of the LiDAR points with 3D boxes (BevView size)
    OUT_DIR/scene3d/<k:06d>.png  optional (``open3d=True``): Open3D offscreen 3D view
    OUT_DIR/drive.mp4            camera above BEV (above the 3D view), one video frame per run
                                 frame (mp4v, 10 fps)

Finding the drive: ``drive=`` if given, else the drive parameter of the stage that replays a
drive (``drive_param``, see `graph.roles`; ``replay``'s ``path``) in the run record that ``run``
writes beside the run log (``<file>.record.json``). A finished record carries the sha256 of the
run log it wrote: a record whose digest does not match the file describes another run and is
refused (pass ``drive=``) rather than silently drawing the wrong drive. A run frame is matched
to a drive frame by its LiDAR stamp (``stamps.points``), else by index (looped replays).

A frame whose results a deadline decision changed (dropped, skipped at admission, dropped
before the sinks, or outputs reused from an earlier frame: its jsonl line's ``dropped`` and
``stale``) gets a banner across the top of its camera and BEV pictures naming the stage and the
reason, with the measured times from the record's ``decisions`` (`viz.banner`).

Finding the detections: the record says which stage/port feeds each run-log input, and the
stage's op says which role that port has (``objects``, ``detections_2d``, ``boxes_3d``,
``scores_3d``, ``labels_3d``; `graph.roles`); without a record, inputs named ``objects``,
``detections``, ``boxes``, ``scores`` and ``labels`` are used. Fused objects, when present, are
drawn instead of the separate detector outputs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from ..drives import Drive
from ..drives.recording import open_recording
from ..errors import UsageError
from ..geometry import objects as O
from ..graph import roles as R
from ..eval.runlog import RunFrame, load_record, read_run
from ..output_files import mark_folder, write_bytes_atomic
from .banner import draw_banner, frame_notice
from .draw import GT_COLOUR, BevView, draw_bev, draw_boxes_2d, draw_boxes_3d, draw_boxes_bev
from .scene3d import Scene3D
from .video import Mp4Writer, compose

# op role -> what FrameDetections calls it (the input names it accepts without a record)
ROLES = {R.OBJECTS: "objects", R.DETECTIONS_2D: "detections", R.BOXES_3D: "boxes",
         R.SCORES_3D: "scores", R.LABELS_3D: "labels"}


@dataclass
class RenderSummary:
    """What ``render_run`` wrote: folders, the MP4, frames drawn and skipped, image sizes."""

    out_dir: Path
    camera_dir: Path
    bev_dir: Path
    video: Path | None
    frames: int = 0
    skipped: list[int] = field(default_factory=list)
    marked: list[int] = field(default_factory=list)  # frames drawn with a dropped/stale banner
    scene3d_dir: Path | None = None  # Open3D views, when asked for and available
    camera_size: tuple[int, int] | None = None  # (width, height)
    bev_size: tuple[int, int] | None = None


def render_run(run_output: str | Path, out_dir: str | Path, *, drive: str | Path | None = None,
               view: BevView = BevView(), video: bool = True, ground_truth: bool = False,
               fps: float = 10.0, open3d: bool = False, warn=None) -> RenderSummary:
    """Draw every frame of a jsonl run output (see the module docstring); returns a summary.

    ``ground_truth`` also draws the drive's labels (white). ``open3d`` adds a 3D view per frame
    (``scene3d/``, and below the BEV in the video) when Open3D can render offscreen here (else
    one warning and the OpenCV pictures only). ``warn`` gets one line per frame that cannot be
    matched to the drive (skipped)."""
    run_output = Path(run_output)
    frames = read_run(run_output)
    if not frames:
        raise UsageError(f"{run_output}: the run output has no frames")
    record = load_record(run_output)
    if drive is None:
        _check_record_describes(run_output, record)
    opened = open_recording(_drive_path(run_output, record, drive), _tolerance(record))
    roles = _roles(run_output, record, frames[0])
    out = Path(out_dir)
    summary = RenderSummary(out, out / "camera", out / "bev", out / "drive.mp4" if video else None)
    mark_folder(out, "render", frame_dirs=("camera", "bev", "scene3d"), files=("drive.mp4",))
    summary.camera_dir.mkdir(parents=True, exist_ok=True)
    summary.bev_dir.mkdir(parents=True, exist_ok=True)
    scene = Scene3D.create(warn=warn) if open3d else None
    if scene is not None:
        summary.scene3d_dir = out / "scene3d"
        summary.scene3d_dir.mkdir(parents=True, exist_ok=True)
    writer = Mp4Writer(summary.video, fps) if video else None
    decisions = _decisions_by_frame(record)
    try:
        for frame in frames:
            _render_frame(opened, frame, roles, view, ground_truth, summary, writer, scene, warn,
                          decisions.get(frame.index, []))
    finally:
        if writer is not None:
            writer.close()
    return summary


def render_result(pipeline, result, out_dir: str | Path, **options) -> RenderSummary:
    """Pictures right after ``rt.run_pipeline`` (what ``run --viz DIR`` calls): the run's first
    run log, the drive of its ``replay`` stage; ``options`` go to ``render_run``. UsageError
    when the run wrote no run log or replayed no drive (a live camera cannot be re-read)."""
    outputs = R.run_logs(result.outputs)
    if not outputs:
        raise UsageError(f"--viz needs a '{R.sink_op(R.RUN_LOG)}' stage (or another run-log "
                         "sink): the pictures are drawn from its output")
    replays = [s for s in pipeline.ordered() if R.drive_param(s.op)]
    if not replays:
        raise UsageError("--viz needs a replayed drive (--replay): live camera frames are not "
                         "kept, so they cannot be drawn afterwards")
    drive = replays[0].resolved_params.get(R.drive_param(replays[0].op))
    return render_run(outputs[0]["path"], out_dir, drive=drive, **options)


def _render_frame(drive: Drive, frame: RunFrame, roles, view, ground_truth, summary, writer,
                  scene, warn, decisions: list[dict]) -> None:
    """Draw one run frame into the summary's folders (and the video), or record it skipped;
    ``decisions``: the run record's deadline decisions about this frame (for its banner)."""
    index = _drive_index(drive, frame)
    if index is None:
        summary.skipped.append(frame.index)
        if warn is not None:
            warn(f"frame {frame.index} (LiDAR stamp {frame.stamps.get('points')}) is not in "
                 f"drive {drive.path}; skipped")
        return
    data = drive.read(index)
    found = FrameDetections.of(frame, roles)
    camera, bev = draw_frame(data, found, drive.calib.velo_to_image(), view, ground_truth)
    notice = frame_notice(frame.dropped, frame.stale, decisions)
    if notice is not None:
        draw_banner(camera, notice)
        draw_banner(bev, notice)
        summary.marked.append(frame.index)
    _write_png(summary.camera_dir / f"{frame.index:06d}.png", camera)
    _write_png(summary.bev_dir / f"{frame.index:06d}.png", bev)
    panels = [bev]
    if scene is not None:
        view3d = scene.render(data.points, found.boxes3d, found.classes3d)
        _write_png(summary.scene3d_dir / f"{frame.index:06d}.png", view3d)
        panels.append(view3d)
    if writer is not None:
        writer.write(compose(camera, *panels))
    summary.frames += 1
    summary.camera_size = (camera.shape[1], camera.shape[0])
    summary.bev_size = (bev.shape[1], bev.shape[0])


@dataclass
class FrameDetections:
    """What one run frame says about the scene, whichever stages produced it.

    boxes3d float [N, 7] + classes3d [N] (LiDAR frame); boxes2d [M, 4] + classes2d [M] +
    scores2d [M] (image pixels). From fused objects when present (2D rows: those a camera saw),
    else from the separate 3D box and 2D detection outputs (`graph.roles`).
    """

    boxes3d: np.ndarray
    classes3d: np.ndarray
    boxes2d: np.ndarray
    classes2d: np.ndarray
    scores2d: np.ndarray

    @classmethod
    def of(cls, frame: RunFrame, roles: dict[str, str]) -> "FrameDetections":
        found = {role: frame.outputs.get(name) for name, role in roles.items()}
        objects = found.get("objects")
        if objects is not None:
            objects = objects.reshape(-1, len(O.COLUMNS))
            seen = (np.nan_to_num(objects[:, O.SEEN_BY]).astype(np.int64) & O.SEEN_CAMERA) > 0
            return cls(objects[:, O.BOX_3D], objects[:, O.CLASS], objects[seen, O.BOX_2D],
                       objects[seen, O.CLASS], objects[seen, O.SCORE_2D])
        boxes = found.get("boxes")
        boxes = np.zeros((0, 7)) if boxes is None else boxes.reshape(-1, 7)
        labels = found.get("labels")
        classes = np.zeros(len(boxes)) if labels is None else labels.reshape(-1)
        dets = found.get("detections")
        dets = np.zeros((0, 6)) if dets is None else dets.reshape(-1, 6)
        return cls(boxes, classes, dets[:, :4], dets[:, 5], dets[:, 4])


def draw_frame(data, found: FrameDetections, matrix: np.ndarray, view: BevView,
               ground_truth: bool) -> tuple[np.ndarray, np.ndarray]:
    """(camera image, BEV image) of one drive frame ``data`` with the frame's detections."""
    camera = data.image.copy()
    bev = draw_bev(data.points, view)
    if ground_truth and len(data.labels):
        gt = data.labels
        draw_boxes_3d(camera, gt[:, 1:8], gt[:, 0], matrix, colour=GT_COLOUR)
        draw_boxes_bev(bev, gt[:, 1:8], gt[:, 0], view, colour=GT_COLOUR, thickness=1)
    draw_boxes_3d(camera, found.boxes3d, found.classes3d, matrix)
    draw_boxes_2d(camera, found.boxes2d, found.classes2d, found.scores2d)
    draw_boxes_bev(bev, found.boxes3d, found.classes3d, view)
    return camera, bev


def _decisions_by_frame(record: dict | None) -> dict[int, list[dict]]:
    """frame index -> the run record's deadline decisions about that frame."""
    by_frame: dict[int, list[dict]] = {}
    for decision in (record or {}).get("decisions") or []:
        if isinstance(decision, dict) and isinstance(decision.get("frame"), int):
            by_frame.setdefault(decision["frame"], []).append(decision)
    return by_frame


def _drive_path(run_output: Path, record: dict | None, drive) -> Path:
    if drive is not None:
        return Path(drive)
    stages = (record or {}).get("pipeline", {}).get("stages", [])
    paths = [s.get("params", {}).get(R.drive_param(s.get("op"))) for s in stages
             if R.drive_param(s.get("op"))]
    paths = [p for p in paths if p]
    if not paths:
        where = "its run record has no replay stage" if record else \
            f"there is no run record {run_output.name}.record.json beside it"
        raise UsageError(f"{run_output}: cannot tell which drive this run replayed ({where}); "
                         "pass --drive DRIVE")
    return Path(paths[0])


def _check_record_describes(run_output: Path, record: dict | None) -> None:
    """UsageError when the record beside ``run_output`` is finished and its jsonl digest is not
    this file's (a record of an earlier run left beside a newer output)."""
    digests = (record or {}).get("output_digests")
    if not digests:
        return  # an unfinished record (written at the start of the run that wrote the file)
    data = run_output.read_bytes()
    found = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if found not in list(digests.values()):
        raise UsageError(f"{run_output}: the run record beside it ({run_output.name}"
                         ".record.json) describes another run (its jsonl digest differs); "
                         "pass --drive DRIVE")


def _tolerance(record: dict | None) -> float:
    stages = (record or {}).get("pipeline", {}).get("stages", [])
    for stage in stages:
        if R.drive_param(stage.get("op")):
            return float(stage.get("params", {}).get("sync_tolerance_ms", 50.0))
    return 50.0


def _roles(run_output: Path, record: dict | None, first: RunFrame) -> dict[str, str]:
    """run-log input name -> role ("objects", "detections", "boxes", "scores", "labels")."""
    stages = {s.get("id"): s for s in (record or {}).get("pipeline", {}).get("stages", [])}
    for stage in stages.values():
        path = stage.get("params", {}).get(R.sink_param(stage.get("op"), R.RUN_LOG))
        if not path or Path(path).resolve() != run_output.resolve():
            continue
        roles = {}
        for name, ref in stage.get("inputs", {}).items():
            source, _, port = ref.partition("/")
            by_port = {p: role for role, p in R.op_roles(stages.get(source, {}).get("op")).items()}
            role = ROLES.get(by_port.get(port))
            if role is not None:
                roles[name] = role
        return roles
    known = {"objects", "detections", "boxes", "scores", "labels"}
    return {name: name for name in first.outputs if name in known}


def _drive_index(drive: Drive, frame: RunFrame) -> int | None:
    """The drive frame a run frame came from: by LiDAR stamp, else by index modulo the drive."""
    stamp = frame.stamps.get("points")
    scans = [drive.lidar.stamps[scan] for scan, _ in drive.pairs]
    if stamp is not None:
        hits = [k for k, s in enumerate(scans) if int(s) == stamp]
        if hits:
            return hits[0]
    if stamp is None or frame.index >= len(scans):
        return frame.index % len(scans)  # looped replay: stamps are shifted per pass
    return None


def _write_png(path: Path, image: np.ndarray) -> None:
    ok, data = cv2.imencode(".png", image)
    if not ok:
        raise UsageError(f"{path}: OpenCV cannot encode the picture as PNG")
    write_bytes_atomic(path, data.tobytes())
