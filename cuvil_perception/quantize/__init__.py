"""Static INT8 quantisation of the detectors' networks, calibrated on a drive
(``cuvil-perception quantize MODEL.onnx --calibrate DRIVE --out MODEL.int8.onnx``).

Modules: ``calibration`` (drive frames through the op's own pre-processing, as ONNX Runtime's
CalibrationDataReader), ``int8`` (what is quantised and how: 7-bit weights, exact on CPUs with
and without VNNI), ``splice`` (the quantised part back into the model's own layout),
``evaluate`` (fp32 vs int8 on a labelled drive, on this machine: ``quantize --evaluate``).
"""

from .calibration import DriveFrames, frame_indices
from .evaluate import Gap, compare_int8, score_models
from .int8 import OP_TYPES, QuantizeSummary, int8_weights, model_kind, quantize_model
from .splice import replace_subgraph

__all__ = ["DriveFrames", "Gap", "OP_TYPES", "QuantizeSummary", "compare_int8", "frame_indices",
           "int8_weights", "model_kind", "quantize_model", "replace_subgraph", "score_models"]
