"""PointPillars (OpenPCDet / CUDA-PointPillars semantics) as static-shape native kernels.

Pipeline, each step a native kernel with a numpy twin of the same name in ``reference``::

    pillarize        points [N, 4] -> voxels [P, 32, 4], coords [P, 3] (z, y, x), num_points [P]
    pfn              PillarVFE features + PFN (BN folded, only real points) -> [P, C]
    scatter          -> persistent BEV map [C, ny, nx], clearing only last frame's cells
    (backbone+head)  ONNX (OpenCV DNN / onnxruntime): cls / box / dir maps
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
from .types import Candidates, PfnWeights, Pillars

__all__ = [
    "Candidates", "HeadConfig", "PfnWeights", "PillarConfig", "Pillars", "PillarsDetect",
    "PointPillars", "SplitModel", "native", "reference", "split_pointpillars",
]
