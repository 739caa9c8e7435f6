"""RunContext: named run fields, one copy per op with its stage's id, and the read-only
``extra`` view that ops written against the old string keys still read."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from cuvil_perception.graph import RunContext
from cuvil_perception.rt.lifecycle import open_all
from cuvil_perception.testing.clock import FakeClock


class _Probe:
    name = "probe"

    def open(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def close(self) -> None:
        pass


def test_each_op_gets_its_stage_id_and_only_the_normal_variant_times_warmup():
    clock = FakeClock()
    instances = {"a": {"normal": _Probe(), "degraded": _Probe()}, "b": {"normal": _Probe()}}
    base = RunContext(clock=clock, intra_op_threads=2)
    open_all(instances, base, {"a": 3})
    a, a_degraded, b = (instances["a"]["normal"].ctx, instances["a"]["degraded"].ctx,
                        instances["b"]["normal"].ctx)
    assert (a.stage_id, a.timed_warmup_passes) == ("a", 3)
    assert (a_degraded.stage_id, a_degraded.timed_warmup_passes) == ("a", 0)
    assert (b.stage_id, b.timed_warmup_passes, b.clock, b.intra_op_threads) == ("b", 0, clock, 2)
    assert base.stage_id is None  # the caller's context is not changed
    with pytest.raises(FrozenInstanceError):
        a.clock = None


def test_the_legacy_extra_view_names_the_fields_that_are_set():
    clock = FakeClock()
    ctx = RunContext(clock=clock, stage_id="det", timed_warmup_passes=2)
    assert dict(ctx.extra) == {"stage_id": "det", "clock": clock, "intra_op_threads": 1,
                               "timed_warmup_passes": 2}
    assert ctx.extra.get("feed") is None and RunContext().extra.get("stage_id", "x") == "x"
    with pytest.raises(TypeError):
        ctx.extra["clock"] = None
