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

from ..errors import Location
from .stage import Degrade, PortRef, Stage
from .validate import validate_stages


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
        self.order = validate_stages(self.stages, self.base_dir, self.e2e_deadline_ms,
                                     self.locs.get("e2e_deadline_ms"))
        return self

    def ordered(self) -> list[Stage]:
        if not self.order:
            self.validate()
        by_id = {s.id: s for s in self.stages}
        return [by_id[i] for i in self.order]

    def consumers(self, stage_id: str) -> list[Stage]:
        return [s for s in self.ordered() if any(r.stage == stage_id for r in s.inputs.values())]
