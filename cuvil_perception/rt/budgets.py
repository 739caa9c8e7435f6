"""Latency budgets: a strict YAML file of per-stage limits, checked against a run's report.

::

    pipeline: ../configs/demo.yaml     # optional (relative to this file): what the pytest
    replay: ../datasets/sample_drive   #   fixture runs when called without arguments
    frames: 20                         # optional frame limit
    references:                        # optional: named references timed in the same run
      bev_numpy: {reference_of: bev}   #   = stage bev's op.reference_process on the same inputs
    budgets:
      - {stage: crop, p99_ms: 5}                              # absolute: p99 <= 5 ms
      - {stage: bev, p99_ratio: 0.5, reference: bev_numpy}    # relative: p99 <= 0.5 x ref p99
      - {stage: bev, p50_ratio: 2.0, reference: crop}         # a stage id works as reference
      - {stage: e2e, p99_ms: 40}                              # end to end

Limits: ``p50_ms p90_ms p99_ms max_ms`` (absolute, for a known target machine) and
``p50_ratio p90_ratio p99_ratio max_ratio`` (relative to the same percentile of ``reference``,
measured in the same run, because absolute times drift on shared machines). ``reference`` is a
stage id, a name from ``references``, or ``<stage>@reference``.

Reference implementations: an op may define ``reference_process(inputs, frame) -> dict``, its
numpy twin with the same semantics. For each stage named by a reference, the executor calls it
right after ``process()`` on the same worker with the same inputs, times it as
``<stage>@reference``, and discards its outputs (they never reach downstream stages).

Every error names ``file:line:column`` and the field (the pipeline loader's approach).
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import BudgetFileError, Location
from ..graph.op import suggest
from ..graph.yaml_loader import compose_strict, mark_location
from .stats import E2E

METRICS = ("p50", "p90", "p99", "max")
LIMIT_KEYS = tuple(f"{m}_ms" for m in METRICS) + tuple(f"{m}_ratio" for m in METRICS)
TOP_KEYS = ("pipeline", "replay", "frames", "references", "budgets")
BUDGET_KEYS = ("stage", "reference") + LIMIT_KEYS


@dataclass
class Budget:
    """One limit: ``stage``'s ``metric`` <= ``limit`` ms, or <= ``limit`` x the reference's."""

    stage: str
    metric: str
    kind: str  # "ms" | "ratio"
    limit: float
    reference: str | None
    loc: Location


@dataclass
class BudgetSpec:
    path: Path
    budgets: list[Budget]
    references: dict[str, str] = field(default_factory=dict)  # name -> stage id
    pipeline: Path | None = None
    replay: Path | None = None
    frames: int | None = None
    locs: dict[str, Location] = field(default_factory=dict)

    def reference_stage(self, reference: str) -> str | None:
        """The stage whose ``reference_process`` a reference name means, or None (a stage id)."""
        if reference in self.references:
            return self.references[reference]
        if reference.endswith("@reference"):
            return reference[: -len("@reference")]
        return None

    def reference_row(self, reference: str) -> str:
        """The latency-report row a reference reads."""
        stage = self.reference_stage(reference)
        return f"{stage}@reference" if stage is not None else reference

    def reference_stages(self) -> tuple[str, ...]:
        found = [self.reference_stage(b.reference) for b in self.budgets if b.reference]
        return tuple(sorted({s for s in found if s is not None}))

    def check_pipeline(self, pipeline) -> None:
        """Every stage and reference must exist, and referenced ops must have a numpy twin."""
        stages = {s.id: s for s in pipeline.ordered()}
        for budget in self.budgets:
            for name, what in ((budget.stage, "stage"), (budget.reference, "reference")):
                if name is None:
                    continue
                target = self.reference_stage(name) if what == "reference" else None
                stage_id = target or name
                if stage_id not in stages and not (stage_id == E2E and target is None):
                    raise BudgetFileError(f"no stage '{stage_id}' in pipeline {pipeline.source}"
                                          f"{suggest(stage_id, stages)}", budget.loc, what)
                if target is not None and not callable(
                        getattr(stages[target].op_cls, "reference_process", None)):
                    raise BudgetFileError(f"op '{stages[target].op}' of stage '{target}' has no "
                                          "reference_process(), so it has no reference to time",
                                          budget.loc, what)


def load_budgets(path: str | Path) -> BudgetSpec:
    """Parse and check a budgets file (see the module docstring for the format)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BudgetFileError(f"cannot read budgets file ({exc.__class__.__name__}: {exc})",
                              Location(str(path))) from None
    return parse_budgets(text, path)


def parse_budgets(text: str, path: Path) -> BudgetSpec:
    root = compose_strict(text, str(path), error=BudgetFileError)  # plain data only
    reader = _Reader(str(path))
    top = reader.mapping(root, "the budgets file", TOP_KEYS)
    spec = BudgetSpec(path=path, budgets=[])
    base = path.resolve().parent
    for key in ("pipeline", "replay"):
        if key in top:
            setattr(spec, key, base / Path(reader.value(top[key], str, key)))
    if "frames" in top:
        spec.frames = reader.value(top["frames"], int, "frames")
        if spec.frames < 1:
            raise BudgetFileError("must be at least 1", reader.loc(top["frames"]), "frames")
    if "references" in top:
        spec.references = _references(reader, top["references"])
    if "budgets" not in top:
        raise BudgetFileError("missing 'budgets' (a list of {stage, limit})", reader.loc(root))
    node = top["budgets"]
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise BudgetFileError("must be a non-empty list", reader.loc(node), "budgets")
    for item in node.value:
        spec.budgets.extend(_budget_items(reader, item))
    return spec


def _references(reader: "_Reader", node) -> dict[str, str]:
    out = {}
    for name, value in reader.mapping(node, "'references'", None).items():
        fields = reader.mapping(value, f"reference '{name}'", ("reference_of",))
        if "reference_of" not in fields:
            raise BudgetFileError("needs 'reference_of: <stage id>'", reader.loc(value),
                                  f"references.{name}")
        out[name] = reader.value(fields["reference_of"], str, f"references.{name}.reference_of")
    return out


def _budget_items(reader: "_Reader", node) -> list[Budget]:
    fields = reader.mapping(node, "a budget", BUDGET_KEYS)
    loc = reader.loc(node)
    if "stage" not in fields:
        raise BudgetFileError("a budget needs 'stage'", loc, "stage")
    stage = reader.value(fields["stage"], str, "stage")
    reference = reader.value(fields["reference"], str, "reference") if "reference" in fields \
        else None
    limits = [k for k in fields if k in LIMIT_KEYS]
    if not limits:
        raise BudgetFileError(f"budget for '{stage}' has no limit (one of: "
                              f"{', '.join(LIMIT_KEYS)})", loc)
    out = []
    for key in limits:
        value = reader.value(fields[key], (int, float), key)
        if not 0 < value < math.inf:  # NaN compares False: a NaN limit never breached
            raise BudgetFileError(f"must be a positive finite number, got {value!r}",
                                  reader.loc(fields[key]), key)
        metric, kind = key.split("_")
        if kind == "ratio" and reference is None:
            raise BudgetFileError(f"'{key}' needs 'reference: <stage or named reference>'",
                                  reader.loc(fields[key]), key)
        out.append(Budget(stage, metric, kind, float(value), reference if kind == "ratio"
                          else None, reader.loc(fields[key])))
    return out


class _Reader:
    """yaml node helpers that keep file:line:col (same approach as the pipeline loader)."""

    def __init__(self, filename: str):
        self.filename = filename

    def loc(self, node) -> Location:
        return mark_location(self.filename, node.start_mark)

    def mapping(self, node, what: str, allowed) -> dict:
        if not isinstance(node, yaml.MappingNode):
            raise BudgetFileError(f"{what} must be a mapping",
                                  self.loc(node) if node is not None else Location(self.filename))
        out = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if allowed is not None and key not in allowed:
                raise BudgetFileError(f"unknown field '{key}' in {what}"
                                      f"{suggest(str(key), allowed)} (allowed: "
                                      f"{', '.join(allowed)})", self.loc(key_node), str(key))
            if key in out:
                raise BudgetFileError("appears twice", self.loc(key_node), str(key))
            out[key] = value_node
        return out

    def value(self, node, kind, field_name: str):
        value = yaml.SafeLoader("").construct_object(node, deep=True)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise BudgetFileError(f"must be {names}, got {value!r}", self.loc(node), field_name)
        return value
