"""The pipeline DSL: ops, typed ports, the Pipeline DAG, the strict YAML loader."""

from .op import FrameInfo, Op, ParamProblem, RunContext, Sample, Sink, Source
from .registry import lookup, register, registered
from .params import BUILTIN_PREFIX, MAX_STATIC_BYTES, Param, Range, builtin_models_dir
from .pipeline import Pipeline
from .stage import AUTO, MISS_POLICIES, Degrade, PortRef, Stage
from .ports import PortSpec
from .overrides import apply_cli_sources
from .preflight import preflight
from . import roles
from .yaml_loader import load_pipeline, parse_pipeline

__all__ = [
    "AUTO", "BUILTIN_PREFIX", "MAX_STATIC_BYTES", "apply_cli_sources", "builtin_models_dir",
    "Degrade",
    "FrameInfo", "Range",
    "MISS_POLICIES", "Op", "Param", "ParamProblem", "Pipeline", "PortRef",
    "PortSpec", "RunContext", "Sample", "Sink", "Source", "Stage", "load_pipeline", "lookup",
    "parse_pipeline", "preflight", "register", "registered", "roles",
]
