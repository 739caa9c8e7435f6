"""Two evaluations of one pipeline on one drive, side by side: as configured, and with some
detector stages given another model file (``eval --compare-model STAGE=MODEL``), typically the
INT8 version ``quantize`` wrote. Reports the AP of both, the difference, and each swapped
stage's speed ratio (p50 wall time of the stage in the two runs, same machine, one after the
other).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ..errors import UsageError
from ..graph import lookup
from ..graph.params import model_file
from .pipeline_eval import EvalReport, evaluate_pipeline


@dataclass
class Comparison:
    """``base`` (as configured) and ``other`` (models swapped per ``swaps``: stage -> path)."""

    base: EvalReport
    other: EvalReport
    swaps: dict

    def rows(self) -> list[tuple]:
        """(stage, metric, class, AP base, AP other, difference) for every class and mean."""
        out = []
        for score in self.base.scores:
            theirs = self.other.score(score.stage, score.metric)
            for mine in score.classes:
                other = theirs.ap(mine.name)
                out.append((score.stage, score.metric, mine.name, mine.ap, other, other - mine.ap))
            out.append((score.stage, score.metric, "mean", score.mean_ap, theirs.mean_ap,
                        theirs.mean_ap - score.mean_ap))
        return out

    def speed(self) -> dict:
        """stage -> (p50 ms base, p50 ms other, base / other) for the swapped stages."""
        return {stage: (self.base.stage_ms[stage], self.other.stage_ms[stage],
                        self.base.stage_ms[stage] / self.other.stage_ms[stage]
                        if self.other.stage_ms[stage] > 0 else math.nan)
                for stage in self.swaps}

    def as_dict(self) -> dict:
        return {"format": "cuvil-eval-compare/1", "swaps": {k: str(v) for k, v in
                                                           self.swaps.items()},
                "base": self.base.as_dict(), "other": self.other.as_dict()}

    def timing_dict(self) -> dict:
        """The measured wall times of both runs and the swapped stages' speed ratio (differ run
        to run, so kept out of ``as_dict``)."""
        return {"base": self.base.timing_dict(), "other": self.other.timing_dict(),
                "speed": {k: {"p50_ms_base": round(a, 4), "p50_ms_other": round(b, 4),
                              "speedup": round(r, 4)} for k, (a, b, r) in self.speed().items()}}


def parse_swaps(values: tuple[str, ...], pipeline) -> dict:
    """``("STAGE=MODEL", ...)`` -> {stage: Path}; UsageError naming the bad value."""
    swaps = {}
    for value in values:
        stage_id, sep, model = value.partition("=")
        if not sep or not stage_id or not model:
            raise UsageError(f"--compare-model {value!r}: expected STAGE=MODEL.onnx")
        stage = next((s for s in pipeline.stages if s.id == stage_id), None)
        if stage is None:
            raise UsageError(f"--compare-model {value}: the pipeline has no stage '{stage_id}' "
                             f"(stages: {', '.join(s.id for s in pipeline.stages)})")
        cls = lookup(stage.op)
        if cls is None or "model" not in {p.name for p in cls.params}:
            raise UsageError(f"--compare-model {value}: stage '{stage_id}' (op {stage.op}) "
                             "has no model param")
        swaps[stage_id] = model_file(model, f"--compare-model {value}").resolve()
    return swaps


def compare_models(load: Callable, swaps: dict, **options) -> Comparison:
    """Evaluate ``load()`` as is, then with ``swaps`` applied (``load`` must return a fresh
    pipeline each call); ``options`` go to ``evaluate_pipeline``."""
    base = evaluate_pipeline(load(), **options)
    swapped = load()
    for stage_id, model in swaps.items():
        swapped.stage(stage_id).params["model"] = str(model)
    return Comparison(base, evaluate_pipeline(swapped, **options), dict(swaps))
