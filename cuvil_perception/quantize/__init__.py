"""Static INT8 quantisation of the detectors' networks, calibrated on a drive
(``cuvil-perception quantize MODEL.onnx --calibrate DRIVE --out MODEL.int8.onnx``).

Modules: ``calibration`` (drive frames through the op's own pre-processing, as ONNX Runtime's
CalibrationDataReader), ``int8`` (what is quantised and how), ``splice`` (the quantised part
back into the model's own layout).
"""

from .calibration import DriveFrames, frame_indices
from .int8 import OP_TYPES, QuantizeSummary, model_kind, quantize_model
from .splice import replace_subgraph

__all__ = ["DriveFrames", "OP_TYPES", "QuantizeSummary", "frame_indices", "model_kind",
           "quantize_model", "replace_subgraph"]
