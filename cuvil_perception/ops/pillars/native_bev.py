"""The lowered BEV network (native_net.NetPlan) bound to its buffers, run in-process:
``runtime: native`` of ``pillars.detect``.

``NativeNet`` allocates the maps (64-byte aligned float32), the change masks (u8, 1 everywhere
at first: the first call computes every cell, see kernel_bev_conv) and the weights blob, and
calls the steps in order with precomputed addresses. ``NativeRunner`` is ``model.BevRunner``'s
twin: (input map) -> (cls, box, dir) NHWC head maps. Results are views of persistent buffers,
valid until the next call. One thread, the GIL released in each kernel.
"""

from __future__ import annotations

import numpy as np
import onnx

from ...compile import get_kernel
from .kernel_bev_marks import bev_marks_spec
from .native import _aligned_zeros
from .native_net import lower
from .native_plan import INPUT, NetPlan

SLACK = 16  # floats past each map: kernel_bev_conv.store_cells reads and keeps them


class NativeNet:
    """A NetPlan's buffers and kernels. ``run(x, changed)``: x the input map (float32,
    C-contiguous, the plan's input shape), changed the int32 cells of x that differ from the
    empty frame's input (None: every cell) -> {role: NHWC map}."""

    def __init__(self, plan: NetPlan):
        self.plan = plan
        self.blob = _aligned_zeros((max(plan.blob_size, 1),))
        self.blob[:plan.blob_size] = plan.weights()
        self.buffers = [_aligned_zeros((size + SLACK,)) for size in plan.buffers]
        self.masks = [np.ones(size, np.uint8) for size in plan.masks]
        source = plan.input
        self.input_mask = np.zeros(source.height * source.width, np.uint8)
        self.calls: list = []
        self.computed = 0  # output cells computed by the last run, all layers
        self.last_input = np.zeros(0, np.float32)

    @property
    def specs(self) -> list:
        return [step.spec for step in self.plan.steps] + [self.marks_spec]

    @property
    def marks_spec(self):
        """kernel_bev_marks for the input map: the changed cells -> ``input_mask``."""
        return bev_marks_spec(self.plan.input.height * self.plan.input.width)

    def open(self) -> "NativeNet":
        if not self.calls:
            self.calls = [(get_kernel(step.spec), step.args) for step in self.plan.steps]
            self.marks = get_kernel(self.marks_spec)
        return self

    def _address(self, ref, x: np.ndarray) -> int:
        kind = ref[0]
        if kind == "input":
            return x.ctypes.data
        if kind == "input_mask":
            return self.input_mask.ctypes.data
        if kind == "blob":
            return self.blob.ctypes.data + 4 * ref[1]
        array = self.buffers[ref[1]] if kind == "buffer" else self.masks[ref[1]]
        return array.ctypes.data

    def run(self, x: np.ndarray, changed: np.ndarray | None = None) -> dict:
        source = self.plan.input
        want = (source.channels, source.height, source.width) if source.nchw else \
            (source.height, source.width, source.channels)
        if x.shape[-3:] != want or x.dtype != np.float32 or not x.flags.c_contiguous:
            raise ValueError(f"native network input must be C-contiguous float32 {list(want)}, "
                             f"got {x.dtype} {list(x.shape)}")
        self.open()
        if changed is None:
            self.input_mask.fill(1)
        else:
            cells = np.ascontiguousarray(changed, np.int32)
            self.marks(cells.ctypes.data, len(cells), self.input_mask.ctypes.data)
        self.last_input = x  # an output may be the input itself (heads reading it)
        computed = 0
        for kernel, refs in self.calls:
            result = kernel(*(self._address(ref, x) for ref in refs))
            computed += result or 0
        self.computed = computed
        return {role: self.output(role) for role in self.plan.outputs}

    def output(self, role: str) -> np.ndarray:
        """The NHWC map [H, W, C] of an output role (a view)."""
        value = self.plan.outputs[role]
        cells = value.height * value.width
        source = self.last_input if value.buffer == INPUT else self.buffers[value.buffer]
        data = source.reshape(-1)[:cells * value.stride].reshape(
            value.height, value.width, value.stride)
        return data[:, :, value.offset:value.offset + value.channels]


class NativeRunner:
    """``BevRunner``'s interface on the native network. ``changes``: a callable giving the
    changed cells of the last input (the fused first layer's reached cells), or None (every
    cell: the dense input). ``heads``: the box / direction heads at candidate cells
    (HeadCellsKernel on the NHWC feature map, roles "cls" + "feat"), or None (roles "cls",
    "box", "dir": the heads are layers of the network)."""

    runtime = "native"

    def __init__(self, model: onnx.ModelProto, roles: dict, sparse: bool, source: str,
                 changes=None, heads=None):
        self.plan = lower(model, roles, sparse, source)
        self.net = _Described(NativeNet(self.plan), sparse)
        self.changes, self.heads = changes, heads
        self.cells = 0  # candidate cells of the last call (heads at candidate cells)

    @property
    def specs(self) -> list:
        """The KernelSpecs the network calls (for prewarming)."""
        return self.net.net.specs

    def open(self) -> "NativeRunner":
        self.net.net.open()
        return self

    def _maps(self, x: np.ndarray, changed) -> dict:
        return self.net.net.run(np.ascontiguousarray(x, np.float32), changed)

    def network(self, x: np.ndarray, changed: np.ndarray | None = None) -> list:
        """The network's outputs as ``BevRunner.network`` gives them: (cls, box, dir) NHWC, or
        with peeled heads (cls NHWC, F as an NCHW view [1, C_f, H, W]); every cell computed
        unless ``changed`` lists the changed input cells."""
        maps = self._maps(x, changed)
        if self.heads is None:
            return [maps["cls"], maps["box"], maps["dir"]]
        return [maps["cls"], maps["feat"].transpose(2, 0, 1)[None]]

    def __call__(self, x: np.ndarray):
        maps = self._maps(x, self.changes() if self.changes is not None else None)
        if self.heads is None:
            return maps["cls"], maps["box"], maps["dir"]
        cells = self.heads(maps["cls"], [maps["feat"]])
        self.cells = cells.count
        return maps["cls"], cells.box, cells.dir


class _Described:
    """What ``placement()`` prints for the native network."""

    input_name = "native"

    def __init__(self, net: NativeNet, sparse: bool):
        self.net, self.sparse = net, sparse

    def describe(self) -> str:
        return (f"native kernels ({len(self.net.plan.steps)} steps, "
                f"{'sparse' if self.sparse else 'dense'}), 1 thread")

