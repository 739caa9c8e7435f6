"""Draw detections on the camera image and on a bird's-eye view of the LiDAR points (OpenCV).

Colours (BGR) per class: car orange, pedestrian red, cyclist green; ground truth (optional) in
white. Camera: 2D boxes as rectangles with class and score, 3D boxes as wireframes projected with
``P2 @ R0_rect @ Tr_velo_to_cam`` (edges with a corner behind the camera are skipped; the front
face is drawn thicker). Bird's-eye view: x (forward) up, y (left) to the left, one pixel per
``resolution`` metres, points shaded by height, boxes as rotated rectangles with a heading tick.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ..drives.labels import CLASSES
from ..geometry import BOX_EDGES, MIN_DEPTH, box_corners, project_points

CLASS_COLOURS = ((0, 140, 255), (60, 60, 230), (60, 200, 60))
GT_COLOUR = (235, 235, 235)
OTHER_COLOUR = (200, 200, 0)
SHIFT = 4  # sub-pixel bits for cv2 line drawing


def class_colour(cls: float) -> tuple[int, int, int]:
    index = int(cls) if np.isfinite(cls) else -1
    return CLASS_COLOURS[index] if 0 <= index < len(CLASS_COLOURS) else OTHER_COLOUR


def class_name(cls: float) -> str:
    index = int(cls) if np.isfinite(cls) else -1
    return CLASSES[index] if 0 <= index < len(CLASSES) else f"class {index}"


def _fixed(points: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(points) * (1 << SHIFT)).astype(np.int32)


def draw_boxes_2d(image: np.ndarray, boxes: np.ndarray, classes: np.ndarray,
                  scores: np.ndarray | None = None, colour=None, thickness: int = 2) -> None:
    """Rectangles [N, 4] (x1, y1, x2, y2 pixels) in place, with "class score" captions."""
    for k, box in enumerate(np.asarray(boxes, np.float64).reshape(-1, 4)):
        if not np.isfinite(box).all():
            continue
        c = colour or class_colour(classes[k])
        p1, p2 = _fixed(box[:2]), _fixed(box[2:])
        cv2.rectangle(image, tuple(p1), tuple(p2), c, thickness, cv2.LINE_AA, SHIFT)
        if scores is not None and np.isfinite(scores[k]):
            text = f"{class_name(classes[k])} {scores[k]:.2f}"
            org = (int(box[0]), max(int(box[1]) - 4, 10))
            cv2.putText(image, text, org, cv2.FONT_HERSHEY_SIMPLEX, 0.4, c, 1, cv2.LINE_AA)


def draw_boxes_3d(image: np.ndarray, boxes: np.ndarray, classes: np.ndarray, matrix: np.ndarray,
                  colour=None, thickness: int = 1) -> None:
    """Wireframes of 3D boxes [N, 7] (LiDAR frame) projected with ``matrix`` [3, 4], in place."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 7)
    finite = np.isfinite(boxes).all(axis=1)
    if not finite.any():
        return
    pixels, depth = project_points(box_corners(boxes[finite]), matrix)
    for k, index in enumerate(np.nonzero(finite)[0]):
        c = colour or class_colour(classes[index])
        for e, (a, b) in enumerate(BOX_EDGES):
            if depth[k, a] <= MIN_DEPTH or depth[k, b] <= MIN_DEPTH:
                continue
            width = thickness + 1 if e in (0, 4, 8, 9) else thickness  # front face
            pa, pb = _fixed(pixels[k, a]), _fixed(pixels[k, b])
            if np.abs(np.concatenate([pa, pb])).max() > 2**28:
                continue  # far off-image after projection; cv2 would overflow
            cv2.line(image, tuple(pa), tuple(pb), c, width, cv2.LINE_AA, SHIFT)


@dataclass(frozen=True)
class BevView:
    """The bird's-eye-view raster: x range (forward), y range (left), metres per pixel.

    Pixel (row, col) of LiDAR point (x, y): row = (x_max - x) / res, col = (y_max - y) / res,
    so the ego car sits at the bottom centre looking up. Size = (width, height) in pixels.
    """

    x_range: tuple[float, float] = (0.0, 69.12)
    y_range: tuple[float, float] = (-39.68, 39.68)
    resolution: float = 0.1

    @property
    def size(self) -> tuple[int, int]:
        width = int(round((self.y_range[1] - self.y_range[0]) / self.resolution))
        height = int(round((self.x_range[1] - self.x_range[0]) / self.resolution))
        return width, height

    def to_pixels(self, xy: np.ndarray) -> np.ndarray:
        """LiDAR (x, y) [..., 2] metres -> (col, row) [..., 2] float pixels."""
        xy = np.asarray(xy, np.float64)
        col = (self.y_range[1] - xy[..., 1]) / self.resolution
        row = (self.x_range[1] - xy[..., 0]) / self.resolution
        return np.stack([col, row], axis=-1)


def draw_bev(points: np.ndarray, view: BevView = BevView()) -> np.ndarray:
    """uint8 [H, W, 3] image of points [N, >=3] (LiDAR frame), brighter = higher, on dark grey."""
    width, height = view.size
    image = np.full((height, width, 3), 24, np.uint8)
    pts = np.asarray(points, np.float32)
    if pts.ndim != 2 or pts.shape[1] < 3:
        raise ValueError(f"points must be [N, >=3], got shape {pts.shape}")
    pix = np.floor(view.to_pixels(pts[:, :2])).astype(np.int64)
    keep = (pix[:, 0] >= 0) & (pix[:, 0] < width) & (pix[:, 1] >= 0) & (pix[:, 1] < height)
    if keep.any():
        z = np.clip((pts[keep, 2] + 2.5) / 3.5, 0.0, 1.0)
        shade = (90 + 165 * z).astype(np.uint8)
        image[pix[keep, 1], pix[keep, 0]] = np.stack([shade, shade, shade // 2 + 60], axis=1)
    _draw_rings(image, view)
    return image


def _draw_rings(image: np.ndarray, view: BevView) -> None:
    """Range rings every 10 m around the sensor, to read distances off the picture."""
    centre = view.to_pixels(np.array([0.0, 0.0]))
    for metres in range(10, int(view.x_range[1]) + 1, 10):
        radius = int(round(metres / view.resolution))
        cv2.circle(image, (int(round(centre[0])), int(round(centre[1]))), radius, (60, 60, 60), 1,
                   cv2.LINE_AA)


def draw_boxes_bev(image: np.ndarray, boxes: np.ndarray, classes: np.ndarray,
                   view: BevView = BevView(), colour=None, thickness: int = 2) -> None:
    """Rotated rectangles of 3D boxes [N, 7] with a tick from the centre to the front, in place."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 7)
    for k, box in enumerate(boxes):
        if not np.isfinite(box).all():
            continue
        c = colour or class_colour(classes[k])
        corners = box_corners(box[None])[0, :4, :2]  # bottom face, counter-clockwise
        poly = _fixed(view.to_pixels(corners))
        cv2.polylines(image, [poly], True, c, thickness, cv2.LINE_AA, SHIFT)
        front = box[:2] + 0.5 * box[3] * np.array([np.cos(box[6]), np.sin(box[6])])
        ends = _fixed(view.to_pixels(np.stack([box[:2], front])))
        cv2.line(image, tuple(ends[0]), tuple(ends[1]), c, thickness, cv2.LINE_AA, SHIFT)
