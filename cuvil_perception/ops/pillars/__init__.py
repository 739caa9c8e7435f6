"""PointPillars (OpenPCDet / CUDA-PointPillars semantics) as static-shape native kernels.

Pipeline, each step a native kernel with a numpy twin of the same name in ``reference``::

    pillarize        points [N, 4] -> voxels [P, 32, 4], coords [P, 3] (z, y, x), num_points [P]
    pfn              PillarVFE features + PFN (BN folded, only real points) -> [P, C]
    scatter          -> persistent BEV map [C, ny, nx], clearing only last frame's cells
    (backbone+head)  ONNX (OpenCV DNN / onnxruntime): cls / box / dir maps

The sparse path (default when the model fits; ``onnx_sparse`` decides and says why):

    conv_scatter     scatter fused into the first Conv(+BN)+ReLU -> its NHWC output directly
    (rest)           ONNX: the network without that layer and without the box / dir heads
    head_cells       box / dir 1x1 heads at the cells whose class logit passes decode's gate
    decode_boxes     sigmoid score >= 0.1, ResidualCoder + direction -> candidates
    nms_bev_rotated  class-agnostic rotated-BEV NMS (IoU > 0.01 suppresses, keep <= 500)

``PointPillars.from_onnx`` loads a model in the CUDA-PointPillars layout. Graph op: one
``pillars.detect`` stage (points -> boxes, scores, labels, stats): the steps exchange large
persistent buffers that should not cross stage boundaries (see ``op``). Labels are 0-based.
"""

from . import native, reference
from .config import HeadConfig, PillarConfig
from .model import PointPillars
from .onnx_split import SplitModel, split_pointpillars
from .op import PillarsDetect
from .onnx_sparse import SparsePlan, plan_bev
from .types import Candidates, CellHeads, CellHeadWeights, ConvLayer, PfnWeights, Pillars

__all__ = [
    "Candidates", "CellHeadWeights", "CellHeads", "ConvLayer", "HeadConfig", "PfnWeights",
    "PillarConfig", "Pillars", "PillarsDetect", "PointPillars", "SparsePlan", "SplitModel",
    "native", "plan_bev", "reference", "split_pointpillars",
]
