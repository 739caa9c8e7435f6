"""One stage as declared (op, params, wiring, tag, deadline, miss policy) and the fields
validation fills in; `pipeline` holds the stages, `validate` checks them.

A stage's inputs name outputs of other stages as ``stage/port`` (`PortRef`). ``deadline_ms`` is
in milliseconds (a positive number up to ``MAX_DEADLINE_MS``) or ``AUTO``; ``on_miss`` is one of
``MISS_POLICIES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
