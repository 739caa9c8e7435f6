"""Pictures of a run: camera image with 2D and projected 3D boxes, a bird's-eye view of the
LiDAR points with 3D boxes (OpenCV rasterisation), and an MP4 of the drive.

    from cuvil_perception.viz import render_result, render_run
    summary = render_run("runs/fusion/detections.jsonl", "runs/fusion/viz")   # render
    summary = render_result(pipeline, run_result, "runs/fusion/viz")          # run --viz DIR

Modules: ``draw`` (drawing primitives, ``BevView``), ``video`` (panel + ``Mp4Writer``),
``run_pictures`` (``render_run``: find the drive again, draw every frame, write PNGs and the MP4),
``banner`` (the banner of a frame whose results were dropped, skipped or stale),
``scene3d`` (optional Open3D offscreen 3D view, falls back cleanly when unavailable).
"""

from .banner import Notice, draw_banner, frame_notice
from .draw import (CLASS_COLOURS, BevView, draw_bev, draw_boxes_2d, draw_boxes_3d,
                   draw_boxes_bev)
from .run_pictures import FrameDetections, RenderSummary, draw_frame, render_result, render_run
from .scene3d import Scene3D
from .video import FOURCC, Mp4Writer, compose

__all__ = [
    "BevView", "CLASS_COLOURS", "FOURCC", "FrameDetections", "Mp4Writer", "Notice",
    "RenderSummary", "Scene3D", "compose", "draw_banner", "draw_bev", "frame_notice",
    "draw_boxes_2d", "draw_boxes_3d", "draw_boxes_bev", "draw_frame", "render_result",
    "render_run",
]
