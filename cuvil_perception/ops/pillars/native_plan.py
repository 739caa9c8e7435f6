"""The lowered BEV network as plain data (native_net.lower builds it, native_bev binds it): maps,
kernel calls, the flat weights blob and its layout table. See native_net for what each ONNX
node becomes; ``NetPlan.layout()`` is what a C library embedding the blob needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...compile import KernelSpec

INPUT = -1  # buffer / mask index of the network's input map and its change mask
ALIGN = 16  # floats: 64 bytes


@dataclass(frozen=True)
class Map:
    """A map of the network: channels ``offset .. offset + channels`` of buffer ``buffer``
    (cells of ``stride`` floats, [height, width] cells), change mask ``mask``; ``nchw``: the
    dense input canvas [channels, height, width]."""

    buffer: int
    height: int
    width: int
    channels: int
    stride: int
    offset: int
    mask: int
    nchw: bool = False

    def in_layout(self) -> tuple:
        """(ps, cs, ioff) of kernel_bev_conv for reading this map."""
        if self.nchw:
            return 1, self.height * self.width, self.offset
        return self.stride, 1, self.offset


@dataclass(frozen=True)
class Step:
    """One kernel call: ``spec`` with ``args``, each ("input",), ("buffer", i), ("mask", i) or
    ("blob", offset in floats); ``what`` names the ONNX nodes it computes."""

    spec: KernelSpec
    args: tuple
    what: str


@dataclass
class NetPlan:
    """The lowered network (see the module docstring). buffers: float32 sizes; masks: u8 sizes;
    outputs: role -> Map (NHWC); blob: float32 weights; table: (name, offset, shape)."""

    input: Map
    steps: list = field(default_factory=list)
    buffers: list = field(default_factory=list)
    masks: list = field(default_factory=list)
    outputs: dict = field(default_factory=dict)
    blob: list = field(default_factory=list)
    table: list = field(default_factory=list)
    blob_size: int = 0

    def add_weights(self, name: str, array: np.ndarray) -> tuple:
        """Append ``array`` (float32) to the blob; ("blob", offset)."""
        offset = self.blob_size
        self.blob.append(np.ascontiguousarray(array, np.float32).ravel())
        self.table.append((name, offset, tuple(array.shape)))
        self.blob_size += -(-array.size // ALIGN) * ALIGN
        return ("blob", offset)

    def weights(self) -> np.ndarray:
        """The weights blob, float32 [blob_size]."""
        out = np.zeros(self.blob_size, np.float32)
        for (_, offset, _), array in zip(self.table, self.blob):
            out[offset:offset + array.size] = array
        return out

    def layout(self) -> dict:
        """The plan as plain data (JSON-serialisable) for a C caller that embeds the blob:
        weights (name, offset and shape in floats), map sizes in floats (each needs 16 floats of
        slack past it, kernel_bev_conv.store_cells), mask sizes in bytes (initialised to 1), the
        calls in order (kernel name, static values, arguments as in ``Step``), input and
        outputs (buffer -1 / mask -1: the input map and its marks, kernel_bev_marks)."""
        return {
            "blob_floats": self.blob_size,
            "weights": [{"name": n, "offset": o, "shape": list(sh)} for n, o, sh in self.table],
            "buffers": list(self.buffers), "masks": list(self.masks),
            "steps": [{"kernel": st.spec.name, "static": dict(st.spec.static),
                       "args": [list(a) for a in st.args], "what": st.what}
                      for st in self.steps],
            "input": vars(self.input).copy(),
            "outputs": {role: vars(m).copy() for role, m in self.outputs.items()},
        }

    def new_map(self, height: int, width: int, channels: int) -> Map:
        self.buffers.append(height * width * channels)
        self.masks.append(height * width)
        return Map(len(self.buffers) - 1, height, width, channels, channels, 0,
                   len(self.masks) - 1)
