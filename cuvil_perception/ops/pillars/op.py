"""Graph op ``pillars.detect``: a LiDAR scan in, PointPillars 3D boxes out (one stage).

One op rather than pillarize / pfn / scatter / head / decode stages: the stages in between
exchange large static buffers (the [C, ny, nx] BEV map is 55 MB on the KITTI grid) that the
native kernels keep persistent and clear incrementally; crossing a stage boundary would force a
copy per frame, and frames may overlap stage-wise in the executor. ``PointPillars`` keeps the
steps separately callable and ``stats`` reports each step's counters.
"""

from __future__ import annotations

import math

from pathlib import Path

import numpy as np

from ...drives.labels import CLASSES
from ...errors import ConfigError
from ...graph import FrameInfo, Op, Param, ParamProblem, PortSpec, Range, RunContext, register
from ..onnx_runner import PROVIDERS, RUNTIMES, provider_problem
from ..summary import count_by_class
from ..warmup import synthetic_cloud, warm_up
from ...geometry.bev_iou import TABLE_WIDTH
from .config import KITTI_RANGE, KITTI_VOXEL, HeadConfig, PillarConfig
from .c_backbone import BackbonePlan
from .c_detect import check_sparse
from .c_net import accumulators, library_kernels, library_part, library_plan
from .c_example import example_files
from .c_example_detect import detect_example_files
from .kernel_pfn import fold_weights, pfn_spec
from .kernel_pillarize import pillarize_spec
from .model import PointPillars, load_split

# A RANDOM-WEIGHT model at the KITTI grid, for tests and benchmarks (many candidates, boxes mean
# nothing).
RANDOM_MODEL = Path(__file__).resolve().parents[2] / "models" / "pointpillars_kitti_random.onnx"
# Static bytes per pillar: voxels 32 x 4 float32 (512), PFN features 64 float32 (256), coords,
# counts and the scatter's index arrays (52).
BYTES_PER_PILLAR = 820
# Static bytes per NMS candidate: the BEV corner table (float64), extents, flags.
BYTES_PER_NMS_CANDIDATE = TABLE_WIDTH * 8 + 4 * 8 + 2
LIDAR_REACH = Range(-1000.0, 1000.0)  # m: far beyond any LiDAR; larger is a typo
STATS = ("pillars", "dropped_points", "dropped_pillars", "invalid_points", "out_of_range",
         "candidates", "candidate_overflow", "nonfinite_boxes")


@register
class PillarsDetect(Op):
    """PointPillars on a CUDA-PointPillars ONNX model: native pre/post; the backbone in an ONNX
    runtime or (runtime native) lowered to our kernels (native_net)."""

    name = "pillars.detect"
    tag = "compute"
    measures_warmup = True  # open() times warm-up passes of detect(): deadline_ms: auto
    doc = ("PointPillars 3D detection (CUDA-PointPillars ONNX layout): native pillarize, PFN, "
           "scatter, decode and rotated NMS; backbone + head in OpenCV DNN, ONNX Runtime or "
           "native kernels (runtime: native).")
    params = (
        Param("model", Path,
              doc="CUDA-PointPillars ONNX file (builtin:pointpillars_cuvil_demo.onnx is the "
                  "demo model trained on the project's synthetic drives)", must_exist=True),
        Param("runtime", str, "auto", choices=RUNTIMES + ("native",),
              doc="where the backbone + head run: native = kernels our compiler builds from "
                  "the ONNX graph (Conv, ConvTranspose, BatchNormalization, Relu, Concat, Pad; "
                  "another op is refused, naming it), else ONNX Runtime / OpenCV DNN"),
        Param("execution_provider", str, "cpu", choices=tuple(PROVIDERS),
              doc="ONNX Runtime execution provider of the backbone + head (cpu, cuda, "
                  "tensorrt, openvino: the ones this machine's onnxruntime build has)"),
        Param("sparse", bool, True,
              doc="true: where the network fits, the scatter is fused into its first Conv "
                  "(+BN)+ReLU and its 1x1 box / direction heads run at candidate cells only "
                  "(inspect says which path a model takes; with runtime native every layer "
                  "also skips the cells equal to the empty frame's); false: the network as "
                  "exported"),
        Param("point_cloud_range", list, list(KITTI_RANGE), item_type=float, length=6,
              doc="x_min, y_min, z_min, x_max, y_max, z_max (m, LiDAR frame); min <= p < max",
              range=LIDAR_REACH, unit="m"),
        Param("voxel_size", list, list(KITTI_VOXEL), item_type=float, length=3,
              doc="pillar size x, y, z (m); must divide the range, z spans it",
              range=Range(0.0, 100.0, low_open=True), unit="m"),
        Param("max_pillars", int, 12000, doc="pillar budget; more are dropped and counted",
              range=Range(1), bytes_each=BYTES_PER_PILLAR),
        Param("score_threshold", float, 0.1, doc="keep anchors with sigmoid score >= this",
              range=Range(0.0, 1.0, high_open=True)),
        Param("nms_threshold", float, 0.01, doc="suppress when rotated BEV IoU > this",
              range=Range(0.0, 1.0)),
        Param("nms_pre", int, 4096, doc="best-scoring candidates entering NMS",
              range=Range(1), bytes_each=BYTES_PER_NMS_CANDIDATE),
        Param("nms_post", int, 500, doc="at most this many boxes per frame",
              range=Range(1, 100_000)),
        Param("anchor_rotations", list, [0.0, math.pi / 2], item_type=float,
              doc="anchor headings (rad) per class, in the model's order; OpenPCDet's KITTI "
                  "config trains with [0, 1.57]: set that for its checkpoints",
              range=Range(-6.2832, 6.2832), unit="rad", min_items=1),
    )

    def input_ports(self):
        return (PortSpec("points", "float32", (None, 4),
                         "x, y, z (m, LiDAR frame: x fwd, y left, z up), reflectance"),)

    def output_ports(self):
        return (
            PortSpec("boxes", "float32", (None, 7),
                     "x, y, z (box centre), dx, dy, dz (m), heading (rad), LiDAR frame; "
                     "by descending score"),
            PortSpec("scores", "float32", (None,), "sigmoid class score"),
            PortSpec("labels", "int32", (None,), "0-based class: 0 Car, 1 Pedestrian, 2 Cyclist"),
            PortSpec("stats", "int64", (len(STATS),), "per frame: " + ", ".join(STATS)),
        )

    def check(self) -> None:
        self._configs()
        problem = provider_problem(self.p["runtime"], self.p.get("execution_provider", "cpu"))
        if problem is not None:
            raise ParamProblem("execution_provider", problem)

    def _configs(self) -> tuple[PillarConfig, HeadConfig]:
        try:
            config = PillarConfig(tuple(self.p["point_cloud_range"]), tuple(self.p["voxel_size"]),
                                  max_pillars=self.p["max_pillars"])
        except ConfigError as exc:
            raise _param_problem(exc) from None
        try:
            head = HeadConfig(score_threshold=self.p["score_threshold"],
                              nms_threshold=self.p["nms_threshold"], nms_pre=self.p["nms_pre"],
                              nms_post=self.p["nms_post"],
                              rotations=tuple(self.p["anchor_rotations"]))
            head.map_size(config)
        except ConfigError as exc:
            raise _param_problem(exc) from None
        return config, head

    def _detector(self) -> PointPillars:
        """The loaded model (built once: kernels() needs its layer shapes before open())."""
        if getattr(self, "_model", None) is None:
            config, head = self._configs()
            self._model = PointPillars.from_onnx(
                self.p["model"], config, head, self.p["runtime"], self.p["sparse"],
                threads=getattr(self, "_threads", 1),
                provider=self.p.get("execution_provider", "cpu"))
        return self._model

    def kernels(self) -> list:
        """The model's kernels: the sparse ones depend on its first layer and heads."""
        return self._detector().kernels()

    def describe(self) -> list[str]:
        """What ``inspect`` says about this stage: which path the model takes, and why."""
        return self._detector().notes

    def library_files(self, symbols: dict, prefix: str, cc: str) -> dict[str, bytes]:
        """Files for a deployment library (``compile --library``): a C example running
        pillarize then PFN on a .bin scan, its Makefile and the model's folded PFN weights.
        ``symbols`` maps each KernelSpec to its exported symbol; {} if ours are not there."""
        config, _ = self._configs()
        pillarize, pfn = symbols.get(pillarize_spec(config)), symbols.get(pfn_spec(config))
        if pillarize is None or pfn is None:
            return {}
        weights, bias = fold_weights(load_split(self.p["model"]).pfn)
        return example_files(pillarize, pfn, prefix, cc, weights, bias)

    def _library_model(self, target=None) -> tuple[PointPillars, BackbonePlan]:
        """The model a whole-pipeline library for ``target`` holds and its backbone: the
        network lowered to native kernels on the sparse path whatever ``runtime`` says (a C
        library has no ONNX Runtime; ``runtime`` picks where ``run`` computes it: the boxes
        agree within the documented tolerance, docs/c-library.md)."""
        if getattr(self, "_library", None) is None:
            config, head = self._configs()
            pp = PointPillars.from_onnx(self.p["model"], config, head, "native", sparse=True)
            check_sparse(pp, self.name)
            self._library = (pp, {})
        pp, plans = self._library
        key = accumulators(target)  # the only thing of the target the plan depends on
        if key not in plans:
            plans[key] = library_plan(pp, self.name, target)
        return pp, plans[key]

    def library_kernels(self, target=None) -> list:
        """The kernels of a whole-pipeline library for ``target`` (``compile --library``):
        pre / post-processing and the native network, with the target's run lengths (`c_net`)."""
        return library_kernels(*self._library_model(target))

    def library_api(self, symbols: dict, prefix: str, cc: str, target=None):
        """The whole-pipeline C API of a library (``compile --library``: `c_detect`, the
        backbone from `c_net`), with its example. ``symbols``: each of
        ``library_kernels(target)`` -> its exported symbol."""
        pp, plan = self._library_model(target)
        part = library_part(pp, plan, symbols, prefix, self.name, str(self.p["model"]))
        part.example = detect_example_files(prefix, cc)
        return part

    def open(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._warned: set = set()
        threads = ctx.intra_op_threads  # rt.placement
        if threads != getattr(self, "_threads", 1):  # prewarm built the session with 1
            self._threads, self._model = threads, None
        self._model = self._detector().open()
        # Warm-up passes before frame 0 (ops.warmup says why several, on a cloud filling the
        # pillar budget): the backbone runtime allocates on its first two calls and the kernels'
        # buffers fault in on first touch, which would otherwise land on the first frames.
        config = self._model.config
        self.warmup_ns = warm_up(self._model.detect, lambda: synthetic_cloud(
            config.point_cloud_range, config.voxel_size, config.max_pillars), ctx)

    def placement(self) -> str | None:
        """Where the backbone + head run (``run`` prints it with the stage's thread group)."""
        model = getattr(self, "_model", None)
        return None if model is None else model.runner.net.describe()

    summary_port = "labels"
    roles = {"boxes_3d": "boxes", "scores_3d": "scores", "labels_3d": "labels"}

    @staticmethod
    def bev_range(params: dict) -> tuple[float, float, float, float]:
        """(x_min, y_min, x_max, y_max) in m of ``point_cloud_range``: the area eval scores."""
        r = np.asarray(params["point_cloud_range"], np.float64)
        return float(r[0]), float(r[1]), float(r[3]), float(r[4])

    def summarize(self, port: str, value: np.ndarray) -> str:
        """Boxes by class for ``labels``; the row count otherwise."""
        if port == "labels" and len(value):
            return f"{len(value)}: {count_by_class(value, CLASSES)}"
        return str(len(value))

    def process(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> dict[str, np.ndarray]:
        boxes, scores, labels = self._model.detect(inputs["points"])
        stats = self._model.stats
        row = np.array([stats["count"]] + [stats[k] for k in STATS[1:]], np.int64)
        for key, fix in (("dropped_pillars", "raise max_pillars"),
                         ("candidate_overflow", "raise the candidate cap"),
                         ("nonfinite_boxes", "dropped; the points hold absurd values")):
            if stats.get(key) and key not in self._warned:
                self._warned.add(key)
                self._ctx.warning(f"pillars.detect frame {frame.index}: {stats[key]} {key} "
                                  f"({fix}); counted per frame in the 'stats' output")
        return {"boxes": boxes, "scores": scores, "labels": labels, "stats": row}

    def reference_process(self, inputs: dict[str, np.ndarray],
                          frame: FrameInfo) -> dict[str, np.ndarray]:
        """The same frame through the numpy references (same ONNX runtime for the backbone)."""
        boxes, scores, labels = self._model.detect_reference(inputs["points"])
        return {"boxes": boxes, "scores": scores, "labels": labels}

    def close(self) -> None:
        self._model = None


# Config field -> the param it comes from; the head's stride fails when the grid (range / voxel
# size) does not divide by it, so that is reported at voxel_size.
_PARAM_OF_FIELD = {"rotations": "anchor_rotations", "anchors": "anchor_rotations",
                   "stride": "voxel_size"}


def _param_problem(exc: ConfigError) -> ParamProblem:
    """The ParamProblem for a PillarConfig/HeadConfig error, at the param its field comes from."""
    field = exc.field or "point_cloud_range"
    return ParamProblem(_PARAM_OF_FIELD.get(field, field), str(exc).split(": ", 1)[-1])
