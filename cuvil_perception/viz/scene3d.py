"""Optional 3D view of a frame with Open3D's offscreen renderer (Filament; headless through
Vulkan/EGL, e.g. Mesa llvmpipe): the points shaded by height and the 3D boxes as lines, seen
from behind and above the ego car.

``Scene3D.create(size)`` returns None (and says why) when Open3D or its renderer is not usable
here; callers then fall back to the OpenCV bird's-eye view, so pictures never depend on a GPU.
"""

from __future__ import annotations

import numpy as np

from ..geometry import BOX_EDGES, box_corners
from .draw import class_colour

EYE = (-12.0, 0.0, 14.0)  # metres, LiDAR frame: behind and above the sensor
TARGET = (25.0, 0.0, 0.0)
FOV_DEG = 60.0


class Scene3D:
    """An offscreen renderer of (width, height) pixels, created once and reused per frame."""

    def __init__(self, renderer, size: tuple[int, int]):
        self._renderer = renderer
        self.size = size

    @classmethod
    def create(cls, size: tuple[int, int] = (960, 540), warn=None) -> "Scene3D | None":
        """A renderer, or None (with one warning) when Open3D cannot render offscreen here."""
        try:
            from open3d.visualization import rendering

            renderer = rendering.OffscreenRenderer(int(size[0]), int(size[1]))
        except Exception as exc:  # ImportError, or no Vulkan/EGL device: fall back, never fail
            if warn is not None:
                warn(f"Open3D offscreen rendering unavailable ({type(exc).__name__}: {exc}); "
                     "using the OpenCV bird's-eye view")
            return None
        return cls(renderer, size)

    def render(self, points: np.ndarray, boxes: np.ndarray, classes: np.ndarray) -> np.ndarray:
        """uint8 [H, W, 3] BGR image of points [N, >=3] and boxes [M, 7] (LiDAR frame)."""
        import open3d as o3d
        from open3d.visualization import rendering

        scene = self._renderer.scene
        scene.clear_geometry()
        scene.set_background([0.08, 0.08, 0.09, 1.0])
        cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(
            np.asarray(points, np.float64)[:, :3]))
        shade = np.clip((np.asarray(points)[:, 2] + 2.5) / 3.5, 0.0, 1.0)[:, None]
        cloud.colors = o3d.utility.Vector3dVector(0.35 + 0.65 * np.repeat(shade, 3, axis=1))
        points_mat = rendering.MaterialRecord()
        points_mat.shader, points_mat.point_size = "defaultUnlit", 2.0
        scene.add_geometry("points", cloud, points_mat)
        lines = _box_lines(np.asarray(boxes, np.float64).reshape(-1, 7), classes)
        if lines is not None:
            line_mat = rendering.MaterialRecord()
            line_mat.shader, line_mat.line_width = "unlitLine", 2.0
            scene.add_geometry("boxes", lines, line_mat)
        self._renderer.setup_camera(FOV_DEG, np.array(TARGET), np.array(EYE),
                                    np.array([0.0, 0.0, 1.0]))
        image = np.asarray(self._renderer.render_to_image())
        return np.ascontiguousarray(image[..., :3][..., ::-1])  # RGB -> BGR


def _box_lines(boxes: np.ndarray, classes: np.ndarray):
    """An Open3D LineSet of the boxes' 12 edges each, coloured by class; None when empty."""
    import open3d as o3d

    keep = np.isfinite(boxes).all(axis=1)
    if not keep.any():
        return None
    corners = box_corners(boxes[keep]).reshape(-1, 3)
    edges = np.array(BOX_EDGES)
    pairs = np.concatenate([edges + 8 * k for k in range(int(keep.sum()))])
    colours = [np.array(class_colour(c)[::-1]) / 255.0 for c in np.asarray(classes)[keep]]
    lines = o3d.geometry.LineSet(o3d.utility.Vector3dVector(corners),
                                 o3d.utility.Vector2iVector(pairs))
    lines.colors = o3d.utility.Vector3dVector(np.repeat(np.array(colours), len(edges), axis=0))
    return lines
