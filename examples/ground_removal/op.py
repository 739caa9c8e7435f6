"""``example.ground_removal``: drop the ground points of a LiDAR scan (a native stage).

A point is ground when it lies less than ``height`` m above the lowest point of its
``cell`` x ``cell`` m grid cell; points outside the x/y ranges are dropped too. The kept points
keep their input order. The output is a view of a preallocated [capacity, 4] buffer.
"""

from __future__ import annotations

import math

import numpy as np

from cuvil_perception.compile import get_kernel
from cuvil_perception.graph import FrameInfo, Op, Param, ParamProblem, PortSpec, Range
from cuvil_perception.graph import RunContext, register

from . import reference
from .kernel import remove_ground

MAX_CELLS = 1 << 22  # 4 M cells (16 MB of scratch)


@register
class GroundRemoval(Op):
    """Ground removal by the lowest point of each grid cell (numpy twin: reference.py)."""

    name = "example.ground_removal"
    tag = "compute"
    doc = "Drop LiDAR points less than `height` m above the lowest point of their grid cell."
    reuses_output_buffers = True
    params = (
        Param("x_range", list, [0.0, 69.12], "[low, high) forward", item_type=float, length=2,
              range=Range(-1000.0, 1000.0), unit="m"),
        Param("y_range", list, [-39.68, 39.68], "[low, high) left", item_type=float, length=2,
              range=Range(-1000.0, 1000.0), unit="m"),
        Param("cell", float, 1.0, "grid cell side", range=Range(0.0, 1000.0, low_open=True),
              unit="m"),
        Param("height", float, 0.25, "points this far above their cell's lowest are kept",
              range=Range(0.0, 1000.0), unit="m"),
        Param("capacity", int, 200_000, "most points kept per scan (the rest are counted)",
              range=Range(1, 10_000_000)),
    )

    def check(self) -> None:
        """What the declared ranges cannot say (NaN, inf, types and bounds are checked from
        ``params`` before this runs)."""
        for name in ("x_range", "y_range"):
            low, high = self.p[name]
            if not low < high:
                raise ParamProblem(name, f"must be [low, high] with low < high, got "
                                         f"{self.p[name]}")
        (x0, x1), (y0, y1), cell = self.p["x_range"], self.p["y_range"], self.p["cell"]
        across, along = (x1 - x0) / cell, (y1 - y0) / cell  # inf for a tiny cell: no ceil()
        if not math.isfinite(across * along) or math.prod(self._grid()) > MAX_CELLS:
            raise ParamProblem("cell", f"{across:.6g} x {along:.6g} cells is more than "
                                       f"{MAX_CELLS}; use a bigger cell")

    def _grid(self) -> tuple[int, int]:
        (x0, x1), (y0, y1), cell = self.p["x_range"], self.p["y_range"], self.p["cell"]
        return math.ceil((x1 - x0) / cell), math.ceil((y1 - y0) / cell)

    def static(self) -> dict:
        """The kernel's static parameters (one compiled kernel per distinct set)."""
        nx, ny = self._grid()
        return {"x0": self.p["x_range"][0], "y0": self.p["y_range"][0], "cell": self.p["cell"],
                "nx": nx, "ny": ny, "height": self.p["height"], "capacity": self.p["capacity"],
                "cells": nx * ny}

    def input_ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("points", "float32", (None, 4), "x, y, z, reflectance (LiDAR frame)"),)

    def output_ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("points", "float32", (None, 4), "the non-ground points, in order"),)

    def kernels(self) -> list:
        return [remove_ground.spec(**self.static())]

    def open(self, ctx: RunContext) -> None:
        nx, ny = self._grid()
        self._kernel = get_kernel(self.kernels()[0])  # prewarmed: a memory hit here
        self._lowest = np.empty(nx * ny, np.float32)
        self._out = np.zeros((self.p["capacity"], 4), np.float32)
        self._addr = (self._lowest.ctypes.data, self._out.ctypes.data)
        self._warn = ctx.warn
        self.overflow = 0

    def process(self, inputs: dict, frame: FrameInfo) -> dict:
        points = np.ascontiguousarray(inputs["points"], np.float32)
        passed = self._kernel(points.ctypes.data, len(points), *self._addr)
        return {"points": self._out[:self._count(passed, frame)]}

    def reference_process(self, inputs: dict, frame: FrameInfo) -> dict:
        """``process`` computed by the numpy twin (for `bench` and tests)."""
        nx, ny = self._grid()
        out = np.zeros((self.p["capacity"], 4), np.float32)
        points = np.ascontiguousarray(inputs["points"], np.float32)
        passed = reference.remove_ground(points, len(points), np.empty(nx * ny, np.float32),
                                         out, **self.static())
        return {"points": out[:min(passed, self.p["capacity"])]}

    def _count(self, passed: int, frame: FrameInfo) -> int:
        capacity = self.p["capacity"]
        if passed > capacity:
            self.overflow += passed - capacity
            if self._warn is not None:
                self._warn(f"example.ground_removal: frame {frame.index}: {passed} points kept, "
                           f"capacity {capacity}; {passed - capacity} dropped")
        return min(passed, capacity)
