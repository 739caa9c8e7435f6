"""``PointPillars``: a CUDA-PointPillars ONNX model run as native pre/post-processing around an
ONNX runtime for the BEV backbone + head.

    points [N, 4] -> pillarize -> PFN (native, weights from the ONNX) -> scatter -> [C, ny, nx]
    -> backbone + head (OpenCV DNN or onnxruntime) -> decode -> rotated NMS -> boxes

Boxes are (x, y, z, dx, dy, dz, heading) in the LiDAR frame (metres, radians); labels are 0-based
class indices into ``head.anchors`` (OpenPCDet reports label + 1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from ...errors import ModelError
from ..onnx_runner import OnnxRunner
from . import reference
from .config import HeadConfig, PillarConfig
from .native import DecodeKernel, NmsKernel, PfnKernel, PillarizeKernel, ScatterKernel
from .onnx_split import SplitModel, split_pointpillars

class BevRunner:
    """Runs the BEV half of the model: float32 [C, ny, nx] -> (cls, box, dir) NHWC maps."""

    def __init__(self, split: SplitModel, runtime: str = "auto", source: str = "<model>"):
        names = [split.outputs[r] for r in ("cls", "box", "dir")]
        # One intra-op thread: the other stages of a pipeline run on the other cores.
        self.net = OnnxRunner(split.bev, names, runtime, f"{source} (BEV part)", threads=1)
        self.runtime = self.net.runtime

    def __call__(self, bev: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tuple(np.ascontiguousarray(o, np.float32) for o in self.net.run(bev[None]))


class PointPillars:
    """A loaded model with its static buffers. Not thread-safe: one instance per stage.

    ``bev(points)`` -> float32 [C, ny, nx] (a persistent buffer, overwritten by the next call);
    ``detect(points)`` -> (boxes float32 [N, 7], scores float32 [N], labels int32 [N]) by
    descending score; ``stats`` holds the last frame's counters (pillarize counts, candidates,
    candidate overflow).
    """

    def __init__(self, split: SplitModel, config: PillarConfig, head: HeadConfig,
                 runtime: str = "auto", source: str = "<model>"):
        if split.dense_shape != (config.ny, config.nx):
            raise ModelError(f"{source}: PPScatterPlugin dense_shape {list(split.dense_shape)} "
                             f"does not match the config grid [ny, nx] = "
                             f"[{config.ny}, {config.nx}]")
        if split.pfn.channels != config.num_features:
            raise ModelError(f"{source}: the PFN has {split.pfn.channels} channels, the config "
                             f"expects {config.num_features}")
        self.config, self.head, self.split = config, head, split
        self.anchors = reference.anchors(config, head)
        self.pillarize = PillarizeKernel(config)
        self.pfn = PfnKernel(config, split.pfn)
        self.scatter = ScatterKernel(config)
        self.decode = DecodeKernel(config, head, self.anchors)
        self.nms = NmsKernel(head)
        self.runner = BevRunner(split, runtime, source)
        self.stats: dict = {}

    @classmethod
    def from_onnx(cls, path: str | Path, config: PillarConfig | None = None,
                  head: HeadConfig | None = None, runtime: str = "auto") -> "PointPillars":
        """Load a CUDA-PointPillars-layout ONNX file (see onnx_split). ``config`` defaults to the
        KITTI grid with ``max_pillars`` = the model's P; ``head`` to the KITTI anchors."""
        path = Path(path)
        split = load_split(path)
        if config is None:
            config = PillarConfig(max_pillars=split.max_voxels or 12000,
                                  num_features=split.pfn.channels)
        return cls(split, config, head or HeadConfig(), runtime, str(path))

    def kernels(self) -> list:
        """The KernelSpecs this model calls (for prewarming)."""
        return [k.spec for k in (self.pillarize, self.pfn, self.scatter, self.decode, self.nms)]

    def open(self) -> "PointPillars":
        for kernel in (self.pillarize, self.pfn, self.scatter, self.decode, self.nms):
            kernel.open()
        return self

    def bev(self, points: np.ndarray) -> np.ndarray:
        """points float32 [N, 4] (x, y, z, r), LiDAR frame -> BEV map float32 [C, ny, nx]."""
        pillars = self.pillarize(points)
        self.stats = pillars.stats()
        features = self.pfn(pillars)
        return self.scatter(features, pillars.coords, pillars.count)

    def postprocess(self, cls_map, box_map, dir_map):
        """Head maps -> (boxes [N, 7], scores [N], labels [N]) (copies)."""
        cand = self.decode(cls_map, box_map, dir_map)
        self.stats.update(candidates=cand.count, candidate_overflow=cand.overflow)
        kept = self.nms(cand.boxes, cand.scores, cand.count)
        return cand.boxes[kept].copy(), cand.scores[kept].copy(), cand.labels[kept].copy()

    def detect(self, points: np.ndarray):
        """points float32 [N, 4] -> (boxes float32 [N, 7], scores float32 [N], labels int32 [N])."""
        return self.postprocess(*self.runner(self.bev(points)))

    def detect_reference(self, points: np.ndarray):
        """``detect`` computed with the numpy references (same ONNX runtime for the BEV part)."""
        pillars = reference.pillarize(points, self.config)
        features = reference.pfn(pillars, self.split.pfn, self.config)
        bev = reference.scatter(features, pillars.coords, pillars.count, self.config)
        cls_map, box_map, dir_map = self.runner(bev)
        cap = self.head.candidate_capacity(self.config)
        cand = reference.decode_boxes(cls_map, box_map, dir_map, self.anchors, self.head, cap)
        kept = reference.nms_bev_rotated(cand.boxes, cand.scores, cand.count, self.head)
        return cand.boxes[kept], cand.scores[kept], cand.labels[kept]


def load_split(path: str | Path) -> SplitModel:
    """Read a CUDA-PointPillars-layout ONNX file and split it at the scatter (onnx_split);
    a missing or unreadable file is a ModelError naming it."""
    path = Path(path)
    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise ModelError(f"{path}: model file not found") from None
    except Exception as exc:  # onnx raises DecodeError and others for a bad file
        raise ModelError(f"{path}: not a readable ONNX model ({exc})") from None
    return split_pointpillars(model, str(path))
