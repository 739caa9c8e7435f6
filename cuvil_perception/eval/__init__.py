"""Detection quality against a drive's labels: 2D AP per class, rotated BEV AP.

    from cuvil_perception.eval import evaluate_pipeline, score_2d, score_bev, average_precision
    report = evaluate_pipeline(load_pipeline("configs/fusion.yaml"))   # runs it through rt
    report.score("yolo", "2d").ap("car")

AP is at IoU >= 0.5 with all-point interpolation (PASCAL VOC 2010+) by default, or KITTI's 40
recall points (``method="r40"``); matching and don't-care rules are in ``ap`` and ``scoring``.
``runlog.read_run`` reads back any jsonl run output; ``compare_models`` evaluates a pipeline twice,
the second time with other model files for some stages (``eval --compare-model``: INT8 vs fp32).
"""

from .ap import (METHOD_NAMES, METHODS, ClassAP, average_precision, evaluate, match_frame,
                 mean_ap, pool)
from .compare import Comparison, compare_models, parse_swaps
from .iou import iou_2d, iou_bev
from .pipeline_eval import EvalReport, evaluate_pipeline
from .runlog import RunFrame, decode_array, load_record, read_run, record_path
from .scoring import StageScore, fused_as_2d, fused_as_bev, gt_2d, gt_bev, score_2d, score_bev

__all__ = [
    "ClassAP", "Comparison", "EvalReport", "METHODS", "METHOD_NAMES", "RunFrame", "StageScore",
    "average_precision", "compare_models", "decode_array", "evaluate", "evaluate_pipeline", "fused_as_2d",
    "fused_as_bev", "gt_2d", "gt_bev", "iou_2d", "iou_bev", "load_record", "match_frame",
    "mean_ap", "parse_swaps", "pool", "read_run", "record_path", "score_2d", "score_bev",
]
