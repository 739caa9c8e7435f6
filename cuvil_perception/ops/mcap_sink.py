"""The ``mcap`` sink: a run's results as an MCAP file Foxglove opens as is, and/or live over the
Foxglove WebSocket protocol (``live: HOST:PORT``, what ``run --foxglove`` sets).

Why ``foxglove-sdk``: it ships Foxglove's well-known schemas as classes (protobuf-encoded, the
encoding the app reads natively: no layout or schema work) and an MCAP writer. Its JSON-schema
alternative would need the schemas copied here by hand. The live view is our own server of the
public protocol (``foxglove_server`` says why), fed the same encoded messages on the same
topics as the file.

Topics (``topic_prefix`` /cuvil by default), one message per frame each when the input is wired:
``/boxes`` and ``/objects`` (foxglove.SceneUpdate, LiDAR frame), ``/camera/image``,
``/camera/detections`` and ``/camera/objects`` (foxglove.ImageAnnotations, stamped like the
image so the Image panel overlays them), ``/camera/calibration``, ``/points``, ``/tf``
(foxglove.FrameTransforms camera <- LiDAR), and two JSON topics: ``/latency`` (schema
``cuvil.FrameTimings``: per-stage ms, cpu ms, outcome, e2e ms; written one frame later, when
the frame's stages have settled, and the last at close) and ``/deadlines`` (schema
``cuvil.DeadlineDecisions``: the deadline decisions of a frame, when it has any).

Off the frame's path: ``background_frames: N`` moves the encoding and writing onto a writer thread
of the sink's own (``background_writer``), in frame order, at most N frames behind; the run's
latency table then shows that work as ``<stage>@background`` and the time until a frame is
written as ``e2e+background``.

Crash safety: chunked (one chunk per frame: the writer's ``flush()`` finishes the chunk and
hands it to the OS after every frame), indexed (chunk indexes, statistics, summary) at close. A
run killed with -9 leaves a file without summary whose complete chunks are every frame but the
one being written: ``mcap``'s non-seeking ``StreamReader`` (and Foxglove) read them, and
``--replay`` of a cut ROS bag does the same through ``drives/bag/mcap_stream``. With
``background_frames: N`` the kill may also take the up to N frames still queued; a failed write
is raised by the next frame's ``process()`` or by ``close()``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..drives.labels import CLASSES
from ..errors import UsageError
from ..geometry import objects as O
from ..graph import FrameInfo, Param, ParamProblem, PortSpec, Range, RunContext, Sink, register
from ..output_files import is_previous_output
from . import foxglove_msgs as fm
from .background_writer import BackgroundWriter
from .mcap_channels import Channels, FrameTimings, parse_address

INPUTS = {
    "detections": PortSpec("detections", "float32", (None, 6), "2D: x1 y1 x2 y2 score class"),
    "boxes": PortSpec("boxes", "float32", (None, 7), "3D: x y z dx dy dz heading (LiDAR)"),
    "scores": PortSpec("scores", "float32", (None,), "scores of the 3D boxes"),
    "labels": PortSpec("labels", "int32", (None,), "classes of the 3D boxes, 0-based"),
    "objects": PortSpec("objects", "float32", (None, 15), "fused objects (fusion.associate)"),
    "image": PortSpec("image", "uint8", (None, None, 3), "camera image, BGR"),
    "points": PortSpec("points", "float32", (None, 4), "LiDAR x y z intensity"),
    "P2": PortSpec("P2", "float64", (3, 4), "rectified camera-0 coords -> pixels"),
    "R0_rect": PortSpec("R0_rect", "float64", (3, 3), "rectifying rotation of camera 0"),
    "Tr_velo_to_cam": PortSpec("Tr_velo_to_cam", "float64", (3, 4), "LiDAR -> camera 0 (m)"),
}
# The writer waits this long at most for a frame to leave the pipeline before writing it anyway
# (checking every FINISH_POLL_S whether the sink is closing: then it writes at once).
FINISH_WAIT_S = 1.0
FINISH_POLL_S = 0.05


@register
class McapSink(Sink):
    """Per frame, the wired results as Foxglove messages into an MCAP file and/or a live
    Foxglove WebSocket server (see the module docstring for topics and crash safety)."""

    name = "mcap"
    tag = "io"
    sink_roles = {"live_view": "live"}  # run --foxglove sets it (or adds a stage of this op)
    doc = ("Write results as Foxglove messages (3D boxes, 2D detections, fused objects, image, "
           "cloud, transforms, per-stage latency) to an MCAP file and/or a live view.")
    variadic_inputs = False
    params = (
        Param("path", Path, None, "output .mcap (replaces only an earlier MCAP file)",
              optional=True),
        Param("live", str, None, "serve the same channels over Foxglove WebSocket at HOST:PORT "
              "(run --foxglove sets it)", optional=True),
        Param("live_wait", float, 0.0, "with live: before frame 0, wait up to this long for a "
              "live client to subscribe (0: start at once)", range=Range(0, 3600), unit="s"),
        Param("image_format", str, "jpeg", "camera image as jpeg, png or raw (bgr8)",
              choices=("jpeg", "png", "raw")),
        Param("jpeg_quality", int, 90, "JPEG quality 1..100", range=Range(1, 100)),
        Param("compression", str, "lz4", "chunk compression: lz4, zstd or none",
              choices=("lz4", "zstd", "none")),
        Param("topic_prefix", str, "/cuvil", "prefix of every topic"),
        Param("lidar_frame", str, "velo_link", "frame id of the LiDAR (boxes, cloud)"),
        Param("camera_frame", str, "camera_00", "frame id of the camera (image, calibration)"),
        Param("class_names", list, list(CLASSES), "names of class ids",
              item_type=str),
        Param("background_frames", int, 0, "0: encode and write on the stage's own thread; "
              "N: on a writer thread of its own, up to N frames behind (off the frame's "
              "end-to-end path; a kill -9 may lose those N)", range=Range(0, 64)),
    )

    def __init__(self, params, inputs):
        super().__init__(params, inputs)
        self._channels: Channels | None = None
        self._timings: FrameTimings | None = None
        self._writer: BackgroundWriter | None = None
        self._feed = None  # the run's feed (rt.feed), when run by the executor
        self._closing = False

    def input_ports(self) -> tuple[PortSpec, ...]:
        names = [n for n in INPUTS if n in self.connected] or list(INPUTS)
        return tuple(INPUTS[n] for n in names)

    def check(self) -> None:
        p = self.p
        if p.get("path") is None and not p.get("live"):
            raise ParamProblem("path", "give a path, a live HOST:PORT, or both")
        if p.get("live") is not None:
            try:
                parse_address(p["live"])
            except ValueError as exc:
                raise ParamProblem("live", str(exc)) from None
        if not p["topic_prefix"].startswith("/") or p["topic_prefix"].strip() != p["topic_prefix"]:
            raise ParamProblem("topic_prefix", f"must start with '/' and have no spaces, got "
                               f"{p['topic_prefix']!r}")
        for name in ("lidar_frame", "camera_frame"):
            if not p[name].strip():
                raise ParamProblem(name, "must be a frame id, got an empty string")
        if p["lidar_frame"] == p["camera_frame"]:
            raise ParamProblem("camera_frame", "must differ from lidar_frame")
        if not p["class_names"] or not all(n.strip() for n in p["class_names"]):
            raise ParamProblem("class_names", "must be a non-empty list of non-empty names")

    def open(self, ctx: RunContext) -> None:
        path = self.p.get("path")
        if path is not None:
            _check_target(Path(path))
        feed = self._feed = ctx.feed
        self._timings = FrameTimings(feed.reader()) if feed is not None else None
        self._channels = Channels(self.p, set(self.connected), path, self.p.get("live"),
                                  timings=self._timings is not None)
        server = self._channels.server
        if server is not None:
            ctx.info(f"Foxglove live view: ws://{parse_address(self.p['live'])[0]}:"
                     f"{server.port} (open it in Foxglove or Lichtblick: Open connection)")
            wait = self.p["live_wait"]
            if wait > 0 and not server.wait_for_subscriber(wait):
                ctx.warning(f"Foxglove live view: no client subscribed within {wait:g} s "
                            "(live_wait); starting without one")
        if self.p["background_frames"] > 0:
            self._writer = _background_writer(ctx, self.p["background_frames"])

    def process(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> dict[str, np.ndarray]:
        if self._writer is None:
            self._write_frame(inputs, frame)
        else:  # the arrays belong to the frame and stay unchanged: safe to read later
            self._writer.submit(frame.index, lambda: self._write_later(inputs, frame))
        return {}

    def _write_later(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> None:
        """On the writer thread: wait until the frame has left the pipeline (its other sinks
        included, so the writer does not take the GIL from them), then write it."""
        waited = 0.0
        while self._feed is not None and not self._closing and waited < FINISH_WAIT_S:
            if self._feed.wait_finished(frame.index, FINISH_POLL_S):
                break
            waited += FINISH_POLL_S  # a frame stopped by Ctrl-C never finishes: close() ends this
        self._write_frame(inputs, frame)

    def _write_frame(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> None:
        """Every wired input of ``frame`` as messages, then the frame's chunk to the OS."""
        stamp = int(frame.timestamp_ns)
        lidar_ns = _stream_stamp(frame, "points", stamp)
        camera_ns = _stream_stamp(frame, "image", stamp)
        out, p, names = self._channels, self.p, self.p["class_names"]
        if "boxes" in inputs:
            out.log("boxes", _boxes_update(inputs, lidar_ns, p["lidar_frame"], names), lidar_ns)
        if "objects" in inputs:
            out.log("objects", _objects_update(inputs["objects"], lidar_ns, p["lidar_frame"],
                                               names), lidar_ns)
            out.log("camera_objects", _objects_annotations(inputs["objects"], camera_ns, names),
                    camera_ns)
        if "detections" in inputs:
            d = inputs["detections"]
            texts = [f"{fm.class_name(r[5], names)} {r[4]:.2f}" for r in d]
            out.log("detections", fm.image_annotations(camera_ns, d[:, :4], d[:, 5], texts),
                    camera_ns)
        self._log_sensors(inputs, lidar_ns, camera_ns)
        if self._timings is not None:
            self._timings.seen(frame.index, stamp)
            for topic, message, log_ns in self._timings.ready(frame.index):
                out.log(topic, message, log_ns)
        out.end_frame(frame.index)

    def _log_sensors(self, inputs: dict, lidar_ns: int, camera_ns: int) -> None:
        out, p = self._channels, self.p
        if "image" in inputs:
            out.log("image", fm.camera_image(camera_ns, p["camera_frame"], inputs["image"],
                                             p["image_format"], p["jpeg_quality"]), camera_ns)
        if "points" in inputs:
            out.log("points", fm.point_cloud(lidar_ns, p["lidar_frame"], inputs["points"]),
                    lidar_ns)
        if "P2" in inputs and "R0_rect" in inputs:
            image = inputs.get("image")
            size = (image.shape[1], image.shape[0]) if image is not None else (0, 0)
            out.log("calibration", fm.camera_calibration(camera_ns, p["camera_frame"],
                                                         inputs["P2"], inputs["R0_rect"], size),
                    camera_ns)
        if "Tr_velo_to_cam" in inputs:
            out.log("tf", fm.frame_transforms(lidar_ns, p["camera_frame"], p["lidar_frame"],
                                              inputs["Tr_velo_to_cam"]), lidar_ns)

    def close(self) -> None:
        """Finish the queued frames (a failed write raises its ``OutputWriteError`` after the
        file is closed), then index and close the file."""
        writer, self._writer = self._writer, None
        self._closing = True  # the queued frames are written now, finished or not
        try:
            if writer is not None:
                writer.close()
        finally:
            self._close_channels()

    def _close_channels(self) -> None:
        if self._channels is not None:
            if self._timings is not None:
                for topic, message, log_ns in self._timings.ready(None):
                    self._channels.log(topic, message, log_ns)
            self._channels.close()
            self._channels = None


def _background_writer(ctx: RunContext, depth: int) -> BackgroundWriter:
    """The sink's writer thread; its writes are reported to the run's feed (when run by the
    executor) as timings of variant ``background``."""
    feed, stage_id = ctx.feed, ctx.stage_id or "mcap"
    report = None
    if feed is not None:
        def report(frame, start_ns, end_ns, cpu_ns, worker, tid):
            feed.add_background(stage_id, frame, start_ns, end_ns, cpu_ns, worker, tid)
    return BackgroundWriter(f"cuvil-writer-{stage_id}", depth,
                            getattr(feed, "clock", None) or ctx.clock, report, ctx.thread_init)


def _check_target(path: Path) -> None:
    """Never write over a file this tool did not make (``run`` checks it before the run too,
    with ``--overwrite`` as the way out; the Python API gets this check)."""
    if path.is_dir():
        raise UsageError(f"{path}: is a folder, the mcap sink writes a file")
    if path.exists() and not is_previous_output(path):
        raise UsageError(f"{path}: exists and is not an output of cuvil-perception; not "
                         "overwriting it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{path}: cannot create its folder ({exc.strerror or exc})") from None


def _stream_stamp(frame: FrameInfo, stream: str, default: int) -> int:
    """The sensor time of ``stream`` (``image`` or ``points``; several sources prefix it with
    their stage id), else the frame's time."""
    for key, value in sorted(frame.stamps.items()):
        if key == stream or key.endswith("/" + stream):
            return int(value)
    return default


def _boxes_update(inputs: dict, stamp: int, frame_id: str, names) -> object:
    boxes = inputs["boxes"]
    count = boxes.shape[0]
    labels = inputs.get("labels", np.zeros(count, np.int32))
    scores = inputs.get("scores")
    texts = [fm.class_name(labels[i], names) + ("" if scores is None else f" {scores[i]:.2f}")
             for i in range(count)]
    return fm.scene_update("boxes", stamp, frame_id, boxes, labels, texts)


def _objects_update(objects: np.ndarray, stamp: int, frame_id: str, names) -> object:
    """Fused rows (``geometry.objects``): the 3D boxes, labelled with class and sensors."""
    texts = [f"{fm.class_name(o[O.CLASS], names)} {_seen(o)}" for o in objects]
    return fm.scene_update("objects", stamp, frame_id, objects[:, O.BOX_3D], objects[:, O.CLASS],
                           texts)


def _objects_annotations(objects: np.ndarray, stamp: int, names) -> object:
    texts = [f"{fm.class_name(o[O.CLASS], names)} {_seen(o)}" for o in objects]
    return fm.image_annotations(stamp, objects[:, O.BOX_2D], objects[:, O.CLASS], texts,
                                thickness=4.0)


def _seen(row: np.ndarray) -> str:
    seen = int(row[O.SEEN_BY]) if np.isfinite(row[O.SEEN_BY]) else 0
    parts = [name for bit, name in ((O.SEEN_CAMERA, "camera"), (O.SEEN_LIDAR, "lidar"))
             if seen & bit]
    return "+".join(parts) or "-"
