"""Public test doubles: build and test your own pipelines the way cuvil-perception tests its own.

Modules: ``clock`` (a fake clock for deadline tests), ``gil`` (measure GIL release), ``interrupt``
(a child process that Ctrl-C reaches even when started in the background), ``ops`` (a
scripted source and ops whose cost the fake clock controls), ``pillars_onnx`` and ``yolo_onnx``
(small ONNX models in the CUDA-PointPillars and ultralytics layouts, built with onnx.helper).
"""
