"""Pipeline arrays -> Foxglove's well-known messages (``foxglove.messages``, protobuf-encoded by
``foxglove-sdk``), which the Foxglove app draws without any layout work:

=========================  =====================================  ===============================
array                      message                                drawn as
=========================  =====================================  ===============================
boxes [N, 7] (+ scores,    foxglove.SceneUpdate, LiDAR frame      3D boxes (cubes) with a
labels)                                                           "class score" label each
objects [N, 15] (fusion)   foxglove.SceneUpdate, LiDAR frame      fused boxes, coloured by class
detections [N, 6]          foxglove.ImageAnnotations              2D rectangles + labels on the
                                                                  camera image
image [H, W, 3] BGR        foxglove.CompressedImage (jpeg/png)    the camera image
                           or foxglove.RawImage (bgr8)
points [N, 4]              foxglove.PointCloud (x y z intensity)  the LiDAR cloud
P2, R0_rect                foxglove.CameraCalibration             lets 3D panels project
Tr_velo_to_cam             foxglove.FrameTransforms               camera frame <- LiDAR frame
=========================  =====================================  ===============================

Boxes are ``x y z dx dy dz heading`` (metres, radians; z is the box centre; heading about +z).
"""

from __future__ import annotations

import math

import cv2
import numpy as np

# RGBA per class id (car, pedestrian, cyclist); other ids use the last colour.
CLASS_COLOURS = ((0.2, 0.6, 1.0, 0.45), (1.0, 0.3, 0.3, 0.45), (0.3, 0.9, 0.3, 0.45),
                 (0.9, 0.9, 0.2, 0.45))


def _m():
    import foxglove.messages as messages

    return messages


def timestamp(ns: int):
    return _m().Timestamp(int(ns) // 1_000_000_000, int(ns) % 1_000_000_000)


def _colour(cls: int, alpha: float | None = None):
    r, g, b, a = CLASS_COLOURS[min(max(int(cls), 0), len(CLASS_COLOURS) - 1)]
    return _m().Color(r=r, g=g, b=b, a=a if alpha is None else alpha)


def class_name(cls: float, names) -> str:
    cls = int(cls)
    return names[cls] if 0 <= cls < len(names) else f"class {cls}"


def _cube_and_text(box: np.ndarray, cls: int, text: str):
    m = _m()
    x, y, z, dx, dy, dz, heading = (float(v) for v in box[:7])
    pose = m.Pose(position=m.Vector3(x=x, y=y, z=z),
                  orientation=m.Quaternion(x=0.0, y=0.0, z=math.sin(heading / 2),
                                           w=math.cos(heading / 2)))
    cube = m.CubePrimitive(pose=pose, size=m.Vector3(x=dx, y=dy, z=dz), color=_colour(cls))
    label_pose = m.Pose(position=m.Vector3(x=x, y=y, z=z + dz / 2 + 0.3),
                        orientation=m.Quaternion(x=0.0, y=0.0, z=0.0, w=1.0))
    label = m.TextPrimitive(pose=label_pose, billboard=True, font_size=14.0,
                            scale_invariant=True, color=_colour(cls, 1.0), text=text)
    return cube, label


def scene_update(entity_id: str, stamp_ns: int, frame_id: str, boxes: np.ndarray,
                 classes: np.ndarray, texts: list[str]):
    """One entity ``entity_id`` holding every box (replaces the previous frame's)."""
    m = _m()
    cubes, labels = [], []
    for box, cls, text in zip(boxes, classes, texts):
        if not np.isfinite(box[:7]).all():
            continue  # a NaN box cannot be drawn; the JSONL output still has it
        cube, label = _cube_and_text(box, int(cls), text)
        cubes.append(cube)
        labels.append(label)
    entity = m.SceneEntity(timestamp=timestamp(stamp_ns), frame_id=frame_id, id=entity_id,
                           cubes=cubes, texts=labels)
    return m.SceneUpdate(entities=[entity])


def image_annotations(stamp_ns: int, rects: np.ndarray, classes: np.ndarray,
                      texts: list[str], thickness: float = 2.0):
    """Rectangles ``rects`` [N, 4] (x1 y1 x2 y2, pixels) with a label above each."""
    m = _m()
    ts = timestamp(stamp_ns)
    outlines, labels = [], []
    for rect, cls, text in zip(rects, classes, texts):
        if not np.isfinite(rect[:4]).all():
            continue
        x1, y1, x2, y2 = (float(v) for v in rect[:4])
        corners = [m.Point2(x=x1, y=y1), m.Point2(x=x2, y=y1), m.Point2(x=x2, y=y2),
                   m.Point2(x=x1, y=y2)]
        outlines.append(m.PointsAnnotation(timestamp=ts, type=m.PointsAnnotationType.LineLoop,
                                           points=corners, outline_color=_colour(cls, 1.0),
                                           thickness=thickness))
        labels.append(m.TextAnnotation(timestamp=ts, position=m.Point2(x=x1, y=max(y1 - 4, 0)),
                                       text=text, font_size=12.0,
                                       text_color=m.Color(r=1.0, g=1.0, b=1.0, a=1.0),
                                       background_color=_colour(cls, 0.8)))
    return m.ImageAnnotations(points=outlines, texts=labels)


def camera_image(stamp_ns: int, frame_id: str, image: np.ndarray, fmt: str, quality: int):
    """The BGR image as CompressedImage (``jpeg``/``png``) or RawImage (``raw``: bgr8)."""
    m = _m()
    if fmt == "raw":
        height, width = image.shape[:2]
        return m.RawImage(timestamp=timestamp(stamp_ns), frame_id=frame_id, width=width,
                          height=height, encoding="bgr8", step=width * 3,
                          data=np.ascontiguousarray(image).tobytes())
    params = [cv2.IMWRITE_JPEG_QUALITY, quality] if fmt == "jpeg" else []
    ok, data = cv2.imencode("." + fmt, image, params)
    if not ok:
        raise ValueError(f"OpenCV cannot encode a {image.shape} image as {fmt}")
    return m.CompressedImage(timestamp=timestamp(stamp_ns), frame_id=frame_id,
                             data=data.tobytes(), format=fmt)


def point_cloud(stamp_ns: int, frame_id: str, points: np.ndarray):
    """[N, 4] float32 x y z intensity as a foxglove.PointCloud (16-byte stride)."""
    m = _m()
    f32 = m.PackedElementFieldNumericType.Float32
    fields = [m.PackedElementField(name=n, offset=4 * i, type=f32)
              for i, n in enumerate(("x", "y", "z", "intensity"))]
    identity = m.Pose(position=m.Vector3(x=0.0, y=0.0, z=0.0),
                      orientation=m.Quaternion(x=0.0, y=0.0, z=0.0, w=1.0))
    return m.PointCloud(timestamp=timestamp(stamp_ns), frame_id=frame_id, pose=identity,
                        point_stride=16, fields=fields,
                        data=np.ascontiguousarray(points[:, :4], dtype="<f4").tobytes())


def camera_calibration(stamp_ns: int, frame_id: str, p2: np.ndarray, r0: np.ndarray,
                       size: tuple[int, int]):
    """P2 / R0_rect as a foxglove.CameraCalibration (no distortion: KITTI images are
    rectified)."""
    return _m().CameraCalibration(
        timestamp=timestamp(stamp_ns), frame_id=frame_id, width=int(size[0]),
        height=int(size[1]), distortion_model="plumb_bob", D=[0.0] * 5,
        K=[float(v) for v in p2[:, :3].ravel()], R=[float(v) for v in r0.ravel()],
        P=[float(v) for v in p2.ravel()])


def frame_transforms(stamp_ns: int, parent: str, child: str, tr: np.ndarray):
    """``parent <- child`` from a [3, 4] transform (its rotation through a quaternion)."""
    from ..drives.bag.tf import matrix_to_quaternion

    m = _m()
    x, y, z, w = matrix_to_quaternion(tr[:, :3])
    transform = m.FrameTransform(
        timestamp=timestamp(stamp_ns), parent_frame_id=parent, child_frame_id=child,
        translation=m.Vector3(x=float(tr[0, 3]), y=float(tr[1, 3]), z=float(tr[2, 3])),
        rotation=m.Quaternion(x=x, y=y, z=z, w=w))
    return m.FrameTransforms(transforms=[transform])
