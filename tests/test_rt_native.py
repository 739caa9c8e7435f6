"""Native kernels inside the executor: prewarm before frame 0, no compile after, GIL released."""

from __future__ import annotations

import numpy as np
import pytest

from cuvil_perception.compile import get_kernel, registry
from cuvil_perception.graph import Op, Pipeline, PortSpec, register
from cuvil_perception.rt import RunOptions, read_record, run_pipeline
from cuvil_perception.testing.gil import CallProbe, size_for
from cuvil_perception.testing.ops import NativeSpinOp

N = 4096


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    registry.clear_memory()
    yield
    registry.clear_memory()


def spin_pipeline(out, frames: int, reps: int, hold_gil: bool = False,
                  op: str = "test.native_spin") -> Pipeline:
    p = Pipeline("spin")
    p.add("src", "test.scripted", frames=frames, n=N)
    p.add("spin", op, inputs={"x": "src/value"}, reps=reps, hold_gil=hold_gil)
    p.add("out", "test.lines", inputs={"y": "spin/y"}, path=str(out))
    return p.validate()


def test_prewarm_before_frame0_and_no_compile_after(tmp_path, fresh_cache):
    result = run_pipeline(spin_pipeline(tmp_path / "a.jsonl", 3, 5), RunOptions(workers=2))
    assert [(r["name"], r["status"], r["stages"]) for r in result.prewarm] == \
        [("example.exp_accumulate", "miss", ["spin"])]
    assert result.prewarm_summary() == {"kernels": 1, "hits": 0, "misses": 1}
    assert result.compiles_after_frame0 == 0
    record = read_record(result.record_path)
    assert record["compile"]["compiles_after_frame0"] == 0
    assert record["compile"]["before_frame0"]["compiles"] >= 1
    registry.clear_memory()  # a new process: the disk cache serves it
    again = run_pipeline(spin_pipeline(tmp_path / "b.jsonl", 3, 5), RunOptions(workers=1))
    assert [r["status"] for r in again.prewarm] == ["hit"]
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


@register
class _LazyKernel(Op):
    """Calls get_kernel inside process() for a spec its kernels() does not declare."""

    name = "rttest.lazy_kernel"

    def input_ports(self):
        return (PortSpec("x", "float32", (None,)),)

    def process(self, inputs, frame):
        from cuvil_perception.compile.examples import AXPY

        get_kernel(AXPY.with_static(n=777 + frame.index))
        return {}


def _run_one(op: str, frames: int):
    p = Pipeline("lazy")
    p.add("src", "test.scripted", frames=frames, n=8)
    p.add("lazy", op, inputs={"x": "src/value"})
    return run_pipeline(p.validate(), RunOptions(workers=1, write_record=False))


def test_a_compile_after_frame0_is_counted_and_warned(tmp_path, fresh_cache):
    result = _run_one("rttest.lazy_kernel", frames=2)
    assert result.compiles_after_frame0 == 2
    assert any("compiled after prewarm" in w for w in result.warnings)


@register
class _OpenKernel(Op):
    """Binds a kernel in open() that its kernels() does not declare (issue 12, item 7)."""

    name = "rttest.open_kernel"

    def input_ports(self):
        return (PortSpec("x", "float32", (None,)),)

    def open(self, ctx):
        from cuvil_perception.compile.examples import AXPY

        get_kernel(AXPY.with_static(n=991))

    def process(self, inputs, frame):
        return {}


def test_a_compile_inside_open_counts_as_after_prewarm(tmp_path, fresh_cache):
    result = _run_one("rttest.open_kernel", frames=1)
    assert result.compiles_after_frame0 == 1


@register
class _ProbedSpin(NativeSpinOp):
    """test.native_spin whose kernel calls ``probe`` times (see CallProbe)."""

    name = "rttest.probed_spin"
    probe: CallProbe | None = None

    def open(self, ctx):
        super().open(ctx)
        self.kernel = type(self).probe.wrap(self.kernel)


def test_python_thread_keeps_running_while_compute_stages_run(tmp_path):
    from cuvil_perception.compile import get_kernel
    from cuvil_perception.compile.examples import EXP_ACCUMULATE

    kernel = get_kernel(EXP_ACCUMULATE.with_static(n=N))
    x, y = np.zeros(N, np.float32), np.zeros(N, np.float32)
    reps = size_for(lambda n: kernel(x.ctypes.data, y.ctypes.data, n), 0.05)  # ~50 ms a frame
    shares = {}
    for hold in (False, True):  # True: bound with PYFUNCTYPE, holding the GIL (must fail)
        p = spin_pipeline(tmp_path / f"o-{hold}.jsonl", 8, reps, hold_gil=hold,
                          op="rttest.probed_spin")
        with CallProbe() as _ProbedSpin.probe:
            run_pipeline(p, RunOptions(workers=2, write_record=False))
        assert len(_ProbedSpin.probe.calls) == 8
        shares[hold] = _ProbedSpin.probe.progress_share()
    print(f"kernel calls a Python thread ran during: {shares[False]:.0%} "
          f"(GIL held: {shares[True]:.0%})")
    assert shares[False] >= 0.75  # load slows the calls and the Python thread alike
    assert shares[True] <= 0.25  # the check can fail: holding the GIL stops the thread
