"""The Pipeline DAG: stages wired port to port, built from YAML or from Python.

Python API (builds the same object as the YAML loader)::

    p = Pipeline("lidar_bev")
    drive = p.add("drive", "replay", path="datasets/sample_drive")
    crop = p.add("crop", "lidar.crop", inputs={"points": drive.out("points")})
    p.add("out", "jsonl", inputs={"points": crop.out("points")}, path="run.jsonl")
    p.validate()         # raises PipelineError naming the stage and field

After ``validate()``, ``p.order`` lists stage ids in execution order and every stage has its
op class, filled-in params and resolved input/output port specs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Location, PipelineError
from .op import Op
from .ports import PortSpec

MISS_POLICIES = ("drop", "reuse_last", "degrade", "fail")
AUTO = "auto"  # deadline_ms: auto, measured on the machine that runs (rt.deadlines)
MAX_DEADLINE_MS = 3_600_000.0  # an hour: a longer deadline is a typo, not a real-time budget


@dataclass(frozen=True)
class PortRef:
    """``stage/port``: an output of a stage."""

    stage: str
    port: str

    def __str__(self) -> str:
        return f"{self.stage}/{self.port}"

    @classmethod
    def parse(cls, text: str) -> "PortRef":
        stage, sep, port = text.partition("/")
        if not sep or not stage or not port or "/" in port:
            raise ValueError(f"'{text}' is not of the form stage/port")
        return cls(stage, port)


@dataclass
class Degrade:
    """Cheaper params a stage switches to for ``frames`` frames after a deadline miss."""

    params: dict[str, Any]
    frames: int = 10


@dataclass
class Stage:
    """One stage as declared; ``locs`` maps field names (and '' for the stage) to locations."""

    id: str
    op: str
    params: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, PortRef] = field(default_factory=dict)
    tag: str | None = None
    deadline_ms: float | str | None = None  # ms, AUTO (resolved per run: rt.deadlines) or None
    on_miss: str = "drop"
    degrade: Degrade | None = None
    locs: dict[str, Location] = field(default_factory=dict)
    # filled by validate():
    op_cls: type[Op] | None = None
    resolved_params: dict[str, Any] = field(default_factory=dict)
    input_specs: dict[str, PortSpec] = field(default_factory=dict)
    output_specs: dict[str, PortSpec] = field(default_factory=dict)
    degrade_params: dict[str, Any] | None = None

    def out(self, port: str) -> PortRef:
        return PortRef(self.id, port)

    def loc(self, key: str = "") -> Location:
        return self.locs.get(key) or self.locs.get("") or Location()

    @property
    def auto_deadline(self) -> bool:
        """``deadline_ms: auto``: the run measures it (``rt.deadlines``)."""
        return self.deadline_ms == AUTO

    @property
    def effective_tag(self) -> str:
        return self.tag or (self.op_cls.tag if self.op_cls else "compute")

    def make_op(self, degraded: bool = False) -> Op:
        """A fresh op instance for this validated stage (the degrade variant on request)."""
        if self.op_cls is None:
            raise PipelineError("stage used before the pipeline was validated", self.loc(),
                                self.id)
        params = self.degrade_params if degraded and self.degrade_params else self.resolved_params
        return self.op_cls(dict(params), dict(self.input_specs))


@dataclass
class Pipeline:
    """A DAG of stages. ``source`` is the file it came from (for error locations)."""

    name: str = "pipeline"
    stages: list[Stage] = field(default_factory=list)
    e2e_deadline_ms: float | None = None
    description: str = ""
    rt: dict[str, Any] = field(default_factory=dict)
    source: str = "<python>"
    base_dir: Path = field(default_factory=Path.cwd)
    locs: dict[str, Location] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)  # --set texts applied (STAGE.PARAM=VALUE)

    def add(self, id: str, op: str, inputs: dict[str, PortRef | str] | None = None, *,
            tag: str | None = None, deadline_ms: float | str | None = None,
            on_miss: str = "drop",
            degrade: Degrade | dict | None = None, **params: Any) -> Stage:
        """Append a stage; ``inputs`` maps this op's input ports to ``stage/port`` outputs."""
        wired = {}
        for port, ref in (inputs or {}).items():
            wired[port] = ref if isinstance(ref, PortRef) else PortRef.parse(ref)
        if isinstance(degrade, dict):
            degrade = Degrade(dict(degrade.get("params", {})), int(degrade.get("frames", 10)))
        stage = Stage(id=id, op=op, params=dict(params), inputs=wired, tag=tag,
                      deadline_ms=deadline_ms, on_miss=on_miss, degrade=degrade,
                      locs={"": Location(self.source)})
        self.stages.append(stage)
        self.order = []
        return stage

    def stage(self, id: str) -> Stage:
        for stage in self.stages:
            if stage.id == id:
                return stage
        raise KeyError(id)

    def validate(self) -> "Pipeline":
        """Check everything that can be checked before the first frame; fill resolved fields."""
        from .validate import validate

        validate(self)
        return self

    def ordered(self) -> list[Stage]:
        if not self.order:
            self.validate()
        by_id = {s.id: s for s in self.stages}
        return [by_id[i] for i in self.order]

    def consumers(self, stage_id: str) -> list[Stage]:
        return [s for s in self.ordered() if any(r.stage == stage_id for r in s.inputs.values())]
