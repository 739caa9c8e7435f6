"""Render the camera-2 image of a synthetic scene with a pinhole model from the calibration.

Background per pixel: each pixel's ray meets the road plane (material colour, a smooth texture,
haze towards the horizon) or the sky (a vertical gradient). Actors are drawn as shaded boxes
(their parts) in painter's order, far to near, only faces turned to the camera; each face's
brightness follows a fixed sun direction. Soft shadows darken the road under each actor.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ..calib import Calibration
from . import road
from .geometry import FACES, box_corners, part_in_world, rotation_z
from .scene import CAR, Scene
from .sensor import IMAGE_SIZE, LIDAR_HEIGHT, camera_rays

SUN = np.array([-0.35, 0.45, 0.82]) / np.linalg.norm([-0.35, 0.45, 0.82])
HORIZON = np.array([222.0, 214.0, 204.0])  # BGR
ZENITH = np.array([205.0, 150.0, 92.0])
SHIFT = 4  # sub-pixel bits for cv2 polygon drawing
MIN_DEPTH = 0.1  # metres; faces with a corner closer than this to the camera plane are skipped


@dataclass(frozen=True)
class ImageLabel:
    """An actor's box in the image: box2d (x1, y1, x2, y2) px or None, truncation 0..1,
    KITTI occlusion level 0/1/2."""

    box2d: tuple[float, float, float, float] | None
    truncated: float
    occluded: int


class Camera:
    """Camera 2 of the rig: projection and cached per-pixel rays (velodyne frame)."""

    def __init__(self, calib: Calibration):
        self.matrix = calib.velo_to_image()
        self.centre, self.rays = camera_rays(calib)
        self.width, self.height = IMAGE_SIZE

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """velodyne points [N, 3] -> (pixels [N, 2], depth [N])."""
        homo = np.concatenate([points, np.ones((points.shape[0], 1))], axis=1) @ self.matrix.T
        depth = homo[:, 2]
        return homo[:, :2] / np.where(np.abs(depth) < 1e-9, 1e-9, depth)[:, None], depth


def background(cam: Camera, scene: Scene, travelled: float) -> np.ndarray:
    """float64 [H, W, 3] BGR road + sky."""
    d = cam.rays
    elevation = d[..., 2] / np.hypot(d[..., 0], d[..., 1])
    sky_mix = np.clip(elevation / 0.35, 0.0, 1.0)[..., None]
    image = HORIZON * (1 - sky_mix) + ZENITH * sky_mix
    ground = d[..., 2] < -1e-6
    t = (-LIDAR_HEIGHT - cam.centre[2]) / d[ground][:, 2]
    gx = cam.centre[0] + t * d[ground][:, 0]
    gy = cam.centre[1] + t * d[ground][:, 1]
    colour = road.COLOURS[road.material(gx, gy, travelled)]
    colour = colour * (1 + 0.06 * road.texture(gx, gy, travelled, scene.ground_phases))[:, None]
    haze = 1 - np.exp(-np.hypot(gx, gy) / 220.0)
    image[ground] = colour * (1 - haze[:, None]) + HORIZON * haze[:, None]
    return image


def _draw_shadows(image: np.ndarray, cam: Camera, boxes: np.ndarray) -> None:
    mask = np.zeros(image.shape[:2], dtype=np.uint8)
    for box in boxes:
        size = box[3:6] * np.array([1.1, 1.1, 0.0])
        centre = box[:3] + np.array([0.25, -0.3, -box[5] / 2])
        foot = box_corners(centre, size, box[6])[:4][[0, 1, 3, 2]]
        pix, depth = cam.project(foot)
        if (depth > MIN_DEPTH).all():
            cv2.fillConvexPoly(mask, np.round(pix * (1 << SHIFT)).astype(np.int32), 255,
                               cv2.LINE_AA, SHIFT)
    mask = cv2.GaussianBlur(mask, (9, 9), 0)
    image *= (1 - 0.45 * mask.astype(np.float64) / 255.0)[..., None]


def _draw_part(image: np.ndarray, cam: Camera, box: np.ndarray, part: np.ndarray, colour,
               top_colour) -> None:
    centre, size = part_in_world(box, part)
    corners = box_corners(centre, size, box[6])
    pix, depth = cam.project(corners)
    rot = rotation_z(box[6])
    for face, normal in FACES:
        n_world = rot @ normal
        if n_world @ (cam.centre - corners[face].mean(axis=0)) <= 0 or \
                (depth[face] < MIN_DEPTH).any():
            continue
        base = np.asarray(top_colour if normal[2] > 0 else colour, dtype=np.float64)
        shade = base * (0.45 + 0.55 * max(0.0, float(n_world @ SUN)))
        cv2.fillConvexPoly(image, np.round(pix[face] * (1 << SHIFT)).astype(np.int32),
                           tuple(float(c) for c in shade), cv2.LINE_AA, SHIFT)


def render(cam: Camera, scene: Scene, t: float,
           travelled: float) -> tuple[np.ndarray, list[ImageLabel]]:
    """(image uint8 [H, W, 3] BGR, one ImageLabel per actor) at time t (s)."""
    boxes = scene.boxes_at(t)
    image = background(cam, scene, travelled)
    _draw_shadows(image, cam, boxes)
    order = np.argsort(-np.linalg.norm(boxes[:, :3] - cam.centre, axis=1), kind="stable")
    for index in order:
        actor = scene.actors[index]
        for number, (part, colour, _) in enumerate(actor.parts()):
            top = actor.colour if actor.cls == CAR and number == 1 else colour
            _draw_part(image, cam, boxes[index], part, colour, top)
    labels = _image_labels(cam, boxes, order)
    return np.clip(np.round(image), 0, 255).astype(np.uint8), labels


def _image_labels(cam: Camera, boxes: np.ndarray, order: np.ndarray) -> list[ImageLabel]:
    """2D boxes, truncation, and occlusion from an id buffer drawn in the same painter order."""
    ids = np.zeros((cam.height, cam.width), dtype=np.uint8)
    projected: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for index in order:
        pix, depth = cam.project(box_corners(boxes[index, :3], boxes[index, 3:6], boxes[index, 6]))
        if (depth > MIN_DEPTH).all():
            hull = cv2.convexHull(np.round(pix).astype(np.int32))
            projected[int(index)] = (pix, hull)
            cv2.fillConvexPoly(ids, hull, int(index) + 1)
    visible = np.bincount(ids.ravel(), minlength=len(boxes) + 1)
    labels = []
    for index in range(len(boxes)):
        if index in projected:
            labels.append(_label_of(*projected[index], visible[index + 1], cam))
        else:
            labels.append(ImageLabel(None, 1.0, 2))
    return labels


def _label_of(pix: np.ndarray, hull: np.ndarray, visible_pixels: int,
              cam: Camera) -> ImageLabel:
    x1, y1 = pix.min(axis=0)
    x2, y2 = pix.max(axis=0)
    cx1, cy1 = max(float(x1), 0.0), max(float(y1), 0.0)
    cx2, cy2 = min(float(x2), cam.width - 1.0), min(float(y2), cam.height - 1.0)
    if cx2 - cx1 < 1.0 or cy2 - cy1 < 1.0:
        return ImageLabel(None, 1.0, 2)
    full = max(1.0, float((x2 - x1) * (y2 - y1)))
    truncated = 1.0 - (cx2 - cx1) * (cy2 - cy1) / full
    own = np.zeros((cam.height, cam.width), dtype=np.uint8)
    cv2.fillConvexPoly(own, hull, 1)
    shown = visible_pixels / max(1, int(np.count_nonzero(own)))
    occluded = 0 if shown > 0.9 else 1 if shown > 0.5 else 2
    return ImageLabel((cx1, cy1, cx2, cy2), truncated, occluded)
