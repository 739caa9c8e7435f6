"""Shape reading shared by the ONNX graph surgeries (YOLO's head split, PointPillars' split)."""

from __future__ import annotations

import onnx


def value_dims(value_info: onnx.ValueInfoProto) -> list:
    """A tensor's dims as ints, ``None`` for a symbolic or unknown dim (e.g. a dynamic batch)."""
    dims = value_info.type.tensor_type.shape.dim
    return [d.dim_value if d.HasField("dim_value") else None for d in dims]
