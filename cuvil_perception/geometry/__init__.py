"""Geometry shared by ops, eval and viz: box corners, projections, 2D IoU, rotated BEV IoU,
and the column layout of fused-object rows (`objects`).

A leaf package (numpy only): nothing here imports the rest of cuvil_perception.
"""

from .bev_iou import box_table, iou_rows, may_overlap, rotated_bev_iou
from .boxes import (BOX_EDGES, MIN_DEPTH, box_corners, iou_matrix, project_boxes, project_points,
                    velo_to_image)
from . import objects

__all__ = ["BOX_EDGES", "MIN_DEPTH", "box_corners", "box_table", "iou_matrix", "iou_rows",
           "may_overlap", "objects", "project_boxes", "project_points", "rotated_bev_iou",
           "velo_to_image"]
