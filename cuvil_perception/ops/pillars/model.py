"""``PointPillars``: a CUDA-PointPillars ONNX model run as native pre/post-processing around an
ONNX runtime for the BEV backbone + head.

    points [N, 4] -> pillarize -> PFN (native, weights from the ONNX) -> scatter -> [C, ny, nx]
    -> backbone + head (OpenCV DNN or onnxruntime) -> decode -> rotated NMS -> boxes

Boxes are (x, y, z, dx, dy, dz, heading) in the LiDAR frame (metres, radians); labels are 0-based
class indices into ``head.anchors`` (OpenPCDet reports label + 1).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx

from ...errors import ModelError
from ..onnx_runner import OnnxRunner
from . import reference
from .config import HeadConfig, PillarConfig
from .native import DecodeKernel, NmsKernel, PfnKernel, PillarizeKernel, ScatterKernel
from .native_bev import NativeRunner
from .native_sparse import ConvScatterKernel, HeadCellsKernel
from .onnx_sparse import SparsePlan, plan_bev
from .onnx_split import SplitModel, split_pointpillars

log = logging.getLogger(__name__)

class BevRunner:
    """Runs the network after the scatter, ``plan.rest`` in the ONNX runtime: its input (the
    [C, ny, nx] map, or the fused first layer's NHWC [H_out, W_out, C_out] map) -> (cls, box,
    dir) NHWC maps. With the heads peeled (``heads`` given) the runtime gives the class map and
    the feature map F (in channel parts), and ``heads`` the box and direction values at candidate
    cells (elsewhere the returned box / dir maps hold stale values that decode never reads)."""

    def __init__(self, plan: SparsePlan, heads: HeadCellsKernel | None, runtime: str = "auto",
                 source: str = "<model>", threads: int = 1, provider: str = "cpu"):
        names = [plan.outputs["cls"]] + (plan.feat if heads is not None else
                                         [plan.outputs["box"], plan.outputs["dir"]])
        # One intra-op thread by default: the other stages of a pipeline run on the other cores
        # (a run passes its placement, rt.placement).
        self.net = OnnxRunner(plan.rest, names, runtime, f"{source} (BEV part)", threads,
                              provider)
        self.runtime = self.net.runtime
        self.heads = heads
        self.cells = 0  # candidate cells of the last call (sparse heads)

    def network(self, x: np.ndarray) -> list:
        """The runtime's outputs for one input map (float32, C-contiguous)."""
        return [np.ascontiguousarray(o, np.float32) for o in self.net.run(x[None])]

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        outputs = self.network(x)
        if self.heads is None:
            return tuple(outputs)
        cells = self.heads(outputs[0], outputs[1:])
        self.cells = cells.count
        return outputs[0], cells.box, cells.dir


class PointPillars:
    """A loaded model with its static buffers. Not thread-safe: one instance per stage.

    ``sparse``: True peels the first layer and the box / direction heads off the network where
    they fit (onnx_sparse; ``notes`` says what was done), False runs the network as exported.
    ``runtime``: "native" runs the network after the scatter as kernels our compiler built
    (native_net; sparse: each layer computes only the cells that differ from the empty
    frame's), else ONNX Runtime or OpenCV DNN (onnx_runner).
    ``bev(points)`` -> the network's input map: float32 [C, ny, nx] (dense scatter) or the fused
    first layer's [H_out, W_out, C_out] (a persistent buffer, overwritten by the next call);
    ``runner(map)`` -> the (cls, box, dir) NHWC head maps; ``detect(points)`` -> (boxes
    float32 [N, 7], scores float32 [N], labels int32 [N]) by descending score; ``stats`` holds
    the last frame's counters (pillarize counts, candidates, candidate overflow, non-finite boxes
    dropped, candidate cells of the sparse heads). Boxes and scores are always finite.
    """

    def __init__(self, split: SplitModel, config: PillarConfig, head: HeadConfig,
                 runtime: str = "auto", source: str = "<model>", sparse: bool = True,
                 threads: int = 1, provider: str = "cpu"):
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
        native = runtime == "native"
        self.plan = plan_bev(split, head.map_size(config), head.anchors_per_cell, sparse,
                             rewrite=not native)
        self.notes = list(self.plan.notes)
        for note in self.notes:
            log.info("%s: %s", source, note)
        self.scatter = ConvScatterKernel(config, self.plan.conv) if self.plan.conv \
            else ScatterKernel(config)
        self.decode = DecodeKernel(config, head, self.anchors)
        self.nms = NmsKernel(head)
        heads = self.plan.heads
        self.heads = HeadCellsKernel(head.map_size(config), head, heads,
                                     self.plan.feat_channels, nhwc=native) if heads else None
        if native:
            changes = self._reached if self.plan.conv is not None else None
            roles = dict(self.plan.outputs, **({"feat": self.plan.feat[0]} if heads else {}))
            self.runner = NativeRunner(self.plan.rest, roles, sparse, source, changes,
                                       self.heads)
            self.notes.append(f"native: the network after the scatter lowered to "
                              f"{len(self.runner.plan.steps)} kernel calls (native_net)")
        else:
            self.runner = BevRunner(self.plan, self.heads, runtime, source, threads, provider)
        self.stats: dict = {}

    def _reached(self) -> np.ndarray:
        """The output cells of the fused first layer that the last frame's pillars reached."""
        return self.scatter.touched[:self.scatter.reached]

    @classmethod
    def from_onnx(cls, path: str | Path, config: PillarConfig | None = None,
                  head: HeadConfig | None = None, runtime: str = "auto",
                  sparse: bool = True, threads: int = 1,
                  provider: str = "cpu") -> "PointPillars":
        """Load a CUDA-PointPillars-layout ONNX file (see onnx_split). ``config`` defaults to the
        KITTI grid with ``max_pillars`` = the model's P; ``head`` to the KITTI anchors;
        ``sparse`` as in the class docstring; ``threads`` and ``provider`` place the BEV part's
        session (``OnnxRunner``)."""
        path = Path(path)
        split = load_split(path)
        if config is None:
            config = PillarConfig(max_pillars=split.max_voxels or 12000,
                                  num_features=split.pfn.channels)
        return cls(split, config, head or HeadConfig(), runtime, str(path), sparse, threads,
                   provider)

    def _kernels(self) -> list:
        steps = [self.pillarize, self.pfn, self.scatter, self.decode, self.nms]
        return steps + ([self.heads] if self.heads is not None else [])

    def kernels(self) -> list:
        """The KernelSpecs this model calls (for prewarming)."""
        native = self.runner.specs if isinstance(self.runner, NativeRunner) else []
        return [k.spec for k in self._kernels()] + native

    def open(self) -> "PointPillars":
        for kernel in self._kernels():
            kernel.open()
        if isinstance(self.runner, NativeRunner):
            self.runner.open()
        return self

    def bev(self, points: np.ndarray) -> np.ndarray:
        """points float32 [N, 4] (x, y, z, r), LiDAR frame -> the network's input map (see the
        class docstring)."""
        pillars = self.pillarize(points)
        self.stats = pillars.stats()
        features = self.pfn(pillars)
        return self.scatter(features, pillars.coords, pillars.count)

    def ort_inputs(self, points: np.ndarray) -> dict[str, np.ndarray]:
        """What the runtime is fed for one scan: ``{input name: float32 [1, ...]}``, a copy of
        the network's input map (``bev``). INT8 calibration (``quantize``) uses it."""
        return {self.runner.net.input_name: np.array(self.bev(points)[None], np.float32)}

    def postprocess(self, cls_map, box_map, dir_map):
        """Head maps -> (boxes [N, 7], scores [N], labels [N]) (copies)."""
        cand = self.decode(cls_map, box_map, dir_map)
        self.stats.update(candidates=cand.count, candidate_overflow=cand.overflow,
                          head_cells=self.runner.cells)
        kept = self.nms(cand.boxes, cand.scores, cand.count)
        return self._finite(cand.boxes[kept], cand.scores[kept], cand.labels[kept])

    def _finite(self, boxes, scores, labels):
        """Copies of the rows whose box and score are finite; the others are counted in
        ``stats["nonfinite_boxes"]``. A model fed absurd features (a reflectance of 1e30 through
        the Python API) overflows exp() in decoding: such rows are never returned."""
        finite = np.isfinite(boxes).all(axis=1) & np.isfinite(scores)
        self.stats["nonfinite_boxes"] = int(finite.size - np.count_nonzero(finite))
        return boxes[finite].copy(), scores[finite].copy(), labels[finite].copy()

    def detect(self, points: np.ndarray):
        """points float32 [N, 4] -> (boxes float32 [N, 7], scores float32 [N], labels int32 [N])."""
        return self.postprocess(*self.runner(self.bev(points)))

    def detect_reference(self, points: np.ndarray):
        """``detect`` computed with the numpy references (same ONNX runtime for the BEV part)."""
        pillars = reference.pillarize(points, self.config)
        features = reference.pfn(pillars, self.split.pfn, self.config)
        if self.plan.conv is not None:
            bev = reference.conv_scatter(features, pillars.coords, pillars.count, self.plan.conv,
                                         self.config)
        else:
            bev = reference.scatter(features, pillars.coords, pillars.count, self.config)
        outputs = self.runner.network(bev)
        if self.plan.heads is not None:
            cells = reference.head_cells(outputs[0], outputs[1:], self.plan.heads, self.head)
            outputs = [outputs[0], cells.box, cells.dir]
        cls_map, box_map, dir_map = outputs
        cap = self.head.candidate_capacity(self.config)
        cand = reference.decode_boxes(cls_map, box_map, dir_map, self.anchors, self.head, cap)
        kept = reference.nms_bev_rotated(cand.boxes, cand.scores, cand.count, self.head)
        return self._finite(cand.boxes[kept], cand.scores[kept], cand.labels[kept])


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
