"""Typed ports: the (name, dtype, static shape) every stage input and output declares."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Shape = tuple  # of int | None; None marks an axis whose length varies per frame (bounded by the op)


@dataclass(frozen=True)
class PortSpec:
    """One input or output of a stage.

    ``dtype`` is a numpy dtype name (``"float32"``, ``"uint8"``, ...). ``shape`` is static: ints are
    fixed, ``None`` marks an axis whose length varies per frame (a point cloud's row count, a
    detection list). ``doc`` says units and coordinate frame.
    """

    name: str
    dtype: str
    shape: Shape
    doc: str = ""

    def describe(self) -> str:
        dims = ", ".join("N" if d is None else str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]"

    def mismatch(self, other: "PortSpec") -> str | None:
        """Why an output ``self`` cannot feed an input declared as ``other``, or None if it can.

        An input declared with dtype ``"any"`` or shape ``None`` accepts anything; ``None`` axes on
        either side match any length.
        """
        if other.dtype != "any" and np.dtype(self.dtype) != np.dtype(other.dtype):
            return f"dtype {self.dtype} does not match the input's {other.dtype}"
        if other.shape is None or self.shape is None:
            return None
        if len(self.shape) != len(other.shape):
            return (f"shape {self.describe()} has {len(self.shape)} axes, the input expects "
                    f"{other.describe()}")
        for a, b in zip(self.shape, other.shape):
            if a is not None and b is not None and a != b:
                return f"shape {self.describe()} does not match the input's {other.describe()}"
        return None

    def check_value(self, value: np.ndarray) -> str | None:
        """Why an array produced at run time breaks this spec, or None."""
        if not isinstance(value, np.ndarray):
            return f"expected a numpy array, got {type(value).__name__}"
        if self.dtype != "any" and value.dtype != np.dtype(self.dtype):
            return f"dtype {value.dtype} instead of {self.dtype}"
        if self.shape is not None:
            if value.ndim != len(self.shape) or any(
                    d is not None and d != n for d, n in zip(self.shape, value.shape)):
                return f"shape {value.shape} instead of {self.describe()}"
        return None
