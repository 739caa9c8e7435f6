"""Test ops: a scripted source, ops whose cost the fake clock controls, a byte-exact sink.

Importing this module registers them (they are never imported by ``cuvil_perception.ops``, so
they do not appear in ``inspect`` or user pipelines unless a test imports this module)::

    import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)

=================  ========  ===============================================================
op                 tag       what it does
=================  ========  ===============================================================
test.scripted      io        Source: ``frames`` samples ``value`` float32[n] (seeded, frame i
                             uses seed+i), ``index`` int64[1]; sensor time start + i*dt_ms
test.cost          compute   ``y = x * scale + calls`` (stateful: a frame out of order changes
                             the bytes); "takes" ``cost_ms[i % len]`` by advancing the fake
                             clock (real clock: sleeps); ``open()`` runs timed warm-up passes
                             (``deadline_ms: auto``), pass j taking ``warmup_ms[j % len]``
test.work          compute   real CPU work: ``y = tanh(x @ W) summed over reps`` (numpy,
                             holds the GIL in parts); ``reference_process`` = the same math
test.native_spin   compute   a native kernel (``example.exp_accumulate``, GIL released):
                             ``y += exp(x)`` ``reps`` times; ``reference_process`` = numpy
test.pass          compute   ``y = x`` (no copy): an empty stage, for executor-overhead benchmarks
test.fail          compute   passes ``x`` through, raises RuntimeError on frame ``fail_at``
test.exit          compute   passes LiDAR ``points`` through (after ``sleep_ms``); on frame
                             ``at_frame`` ends its
                             whole process (``os._exit`` or SIGKILL): a worker that dies. With
                             ``marker`` only while that file is missing (it is created first),
                             so a retried run goes through. With ``hold``:
                             ``kernels()`` (prewarm) writes ``HOLD.<pid>`` and waits while
                             the file ``HOLD`` exists (a prewarm a test can catch in flight)
test.lines         io        Sink: one JSON line per frame (frame, stale map, every input as a
                             list) flushed per frame; the file is what determinism tests hash
=================  ========  ===============================================================
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import time
from pathlib import Path

import numpy as np

from ..graph import Op, Param, PortSpec, Range, Sample, Sink, Source, register


@register
class ScriptedSource(Source):
    """Deterministic frames without a drive: ``value`` float32[n], ``index`` int64[1]."""

    name = "test.scripted"
    params = (Param("frames", int, 10, "number of frames", range=Range(0, 10**9)),
              Param("n", int, 8, "length of value", range=Range(0, 10**7)),
              Param("seed", int, 0, "frame i is drawn with seed + i", range=Range(0, 2**32 - 1)),
              Param("dt_ms", float, 100.0, "sensor-time spacing between frames (ms)",
                    range=Range(0.0, 3.6e6, low_open=True), unit="ms"),
              Param("start_ns", int, 1_600_000_000_000_000_000, "sensor time of frame 0 (ns)",
                    range=Range(0, 2**62), unit="ns"))

    def output_ports(self):
        return (PortSpec("value", "float32", (self.p["n"],)), PortSpec("index", "int64", (1,)))

    def open(self, ctx) -> None:
        self.next = 0

    def read(self) -> Sample | None:
        i = self.next
        if i >= self.p["frames"]:
            return None
        self.next += 1
        value = np.random.default_rng(self.p["seed"] + i).standard_normal(self.p["n"])
        stamp = self.p["start_ns"] + round(i * self.p["dt_ms"] * 1e6)
        return Sample(stamp, {"value": value.astype(np.float32),
                              "index": np.array([i], np.int64)}, {"value": stamp})

    def __len__(self) -> int:
        return self.p["frames"]


class _OneInput(Op):
    """Shared ports: input ``x`` float32[N] -> output ``y`` of the same spec."""

    def input_ports(self):
        return (PortSpec("x", "float32", (None,)),)

    def output_ports(self):
        spec = self.connected.get("x")
        return (PortSpec("y", "float32", spec.shape if spec else (None,)),)


@register
class CostOp(_OneInput):
    """``y = x * scale + calls``; each call costs ``cost_ms[frame % len]`` on the run clock."""

    name = "test.cost"
    measures_warmup = True
    params = (Param("cost_ms", list, [1.0], "per-frame cost (ms), indexed by frame % len",
                    item_type=float, range=Range(0.0, 60_000.0), unit="ms", min_items=1),
              Param("warmup_ms", list, [1.0], "cost (ms) of timed warm-up pass j: "
                    "warmup_ms[j % len] (the untimed passes before them cost nothing)",
                    item_type=float, range=Range(0.0, 60_000.0), unit="ms", min_items=1),
              Param("scale", float, 2.0, "output scale (give the degrade variant another one)",
                    range=Range(-1e6, 1e6)))

    def open(self, ctx) -> None:
        from ..ops.warmup import WARMUP_RUNS, warm_up

        self.clock = ctx.clock
        self.calls = 0
        passes = []

        def one_pass(_value) -> None:
            timed = len(passes) - WARMUP_RUNS
            passes.append(None)
            if timed >= 0:
                self._take(self.p["warmup_ms"][timed % len(self.p["warmup_ms"])])

        self.warmup_ns = warm_up(one_pass, lambda: None, ctx)

    def _take(self, cost_ms: float) -> None:
        if hasattr(self.clock, "advance_ms"):
            self.clock.advance_ms(cost_ms)
        else:
            time.sleep(cost_ms / 1e3)

    def process(self, inputs, frame):
        self._take(self.p["cost_ms"][frame.index % len(self.p["cost_ms"])])
        y = inputs["x"] * np.float32(self.p["scale"]) + np.float32(self.calls)
        self.calls += 1
        return {"y": y.astype(np.float32)}


@register
class WorkOp(_OneInput):
    """Real numpy work: ``y = sum over reps of tanh(x @ W)`` with a seeded W (n x n)."""

    name = "test.work"
    params = (Param("reps", int, 4, "repetitions (cost grows linearly)",
                    range=Range(0, 10**7)),)

    def open(self, ctx) -> None:
        n = self.connected["x"].shape[0]
        self.w = np.random.default_rng(7).standard_normal((n, n)).astype(np.float32) / n

    def process(self, inputs, frame):
        x = inputs["x"]
        y = np.zeros_like(x)
        for _ in range(self.p["reps"]):
            y += np.tanh(x @ self.w)
        return {"y": y}

    def reference_process(self, inputs, frame):
        """The same math, one row at a time (the slow "usual way" a budget compares with)."""
        x = inputs["x"]
        row = np.array([np.dot(x, self.w[:, j]) for j in range(self.w.shape[1])], np.float32)
        y = np.zeros_like(x)
        for _ in range(self.p["reps"]):
            y += np.tanh(row)
        return {"y": y}


@register
class NativeSpinOp(_OneInput):
    """``y = x`` then ``reps`` times ``y += exp(x)`` in a native kernel that releases the GIL."""

    name = "test.native_spin"
    params = (Param("reps", int, 200, "kernel repetitions (cost grows linearly)",
                    range=Range(0, 10**9)),
              Param("hold_gil", bool, False, "bind the kernel with PYFUNCTYPE so it keeps the "
                    "GIL (the negative control of GIL-release tests)"))

    def kernels(self):
        from ..compile.examples import EXP_ACCUMULATE

        spec = EXP_ACCUMULATE.with_static(n=self.connected["x"].shape[0])
        # hold_gil binds the kernel's address itself, so it needs the release ABI (a debug
        # build's error record is only supplied by the callable get_kernel returns).
        return [spec.release() if self.p["hold_gil"] else spec]

    def open(self, ctx) -> None:
        from ..compile import get_kernel

        self.kernel = get_kernel(self.kernels()[0])
        if self.p["hold_gil"]:
            self.kernel = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_int64)(self.kernel.address)
        self.x = np.zeros(self.connected["x"].shape, np.float32)
        self.y = np.zeros_like(self.x)
        self.x_addr, self.y_addr = self.x.ctypes.data, self.y.ctypes.data

    def process(self, inputs, frame):
        self.x[:] = inputs["x"]
        self.y[:] = inputs["x"]
        self.kernel(self.x_addr, self.y_addr, self.p["reps"])
        return {"y": self.y.copy()}

    def reference_process(self, inputs, frame):
        from ..compile.examples import exp_accumulate_ref

        y = inputs["x"].copy()
        exp_accumulate_ref(inputs["x"], y, self.p["reps"])
        return {"y": y}


@register
class PassOp(_OneInput):
    """``y = x`` (the same array, no copy): the cheapest possible stage, for overhead benchmarks."""

    name = "test.pass"

    def process(self, inputs, frame):
        return {"y": inputs["x"]}


@register
class FailOp(_OneInput):
    """Passes ``x`` through; raises ``RuntimeError`` on frame ``fail_at`` (a crashing stage)."""

    name = "test.fail"
    params = (Param("fail_at", int, 0, "frame index that raises", range=Range(0, 10**9)),)

    def process(self, inputs, frame):
        if frame.index == self.p["fail_at"]:
            raise RuntimeError(f"scripted failure on frame {frame.index}")
        return {"y": inputs["x"]}


@register
class ExitOp(Op):
    """Passes ``points`` float32 [N, 4] through; ends the process on frame ``at_frame``."""

    name = "test.exit"
    params = (Param("at_frame", int, 0, "frame index that ends the process",
                    range=Range(0, 10**9)),
              Param("how", str, "exit", "exit = os._exit(code); kill = SIGKILL to itself",
                    choices=("exit", "kill")),
              Param("code", int, 17, "exit code for how: exit", range=Range(1, 255)),
              Param("sleep_ms", float, 0.0, "sleep this long on every frame (a slow drive)",
                    range=Range(0.0, 60_000.0), unit="ms"),
              # str, not Path: a file that appears is not an input of the pipeline's results
              Param("marker", str, None, "absolute path of a file: die only while it is "
                    "missing (then create it)", optional=True),
              Param("hold", str, None, "absolute path of a file: kernels() (the prewarm) "
                    "writes HOLD.<pid> and waits while HOLD exists (at most 120 s)",
                    optional=True))

    def input_ports(self):
        return (PortSpec("points", "float32", (None, 4)),)

    def kernels(self) -> list:
        hold = self.p.get("hold")
        if hold is not None and os.path.exists(hold):
            Path(f"{hold}.{os.getpid()}").touch()
            deadline = time.monotonic() + 120
            while os.path.exists(hold) and time.monotonic() < deadline:
                time.sleep(0.05)
        return []

    def output_ports(self):
        return (PortSpec("y", "float32", (None, 4)),)

    def process(self, inputs, frame):
        time.sleep(self.p["sleep_ms"] / 1e3)
        if frame.index == self.p["at_frame"] and self._first_to_die():
            if self.p["how"] == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(self.p["code"])
        return {"y": inputs["points"]}

    def _first_to_die(self) -> bool:
        """True without a marker; with one, only for the process that creates it: an exclusive
        create, so two drives reaching the frame at once cannot both die."""
        marker = self.p.get("marker")
        if marker is None:
            return True
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True


@register
class LinesSink(Sink):
    """One JSON object per frame: ``{"frame", "timestamp_ns", "stamps", "stale", "inputs":
    {port: list}}``, compact like the ``jsonl`` sink's lines."""

    name = "test.lines"
    params = (Param("path", Path, doc="output file (created or truncated)"),)

    def open(self, ctx) -> None:
        self.path = Path(self.p["path"])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = self.path.open("w", encoding="utf-8")

    def process(self, inputs, frame):
        line = {"frame": frame.index, "timestamp_ns": int(frame.timestamp_ns),
                "stamps": {k: int(v) for k, v in sorted(frame.stamps.items())},
                "stale": dict(sorted(frame.stale.items())),
                "inputs": {k: v.tolist() for k, v in sorted(inputs.items())}}
        # the jsonl sink's compact header, so a rerun recognises the file as ours
        self.file.write(json.dumps(line, separators=(",", ":")) + "\n")
        self.file.flush()
        return {}

    def close(self) -> None:
        file = getattr(self, "file", None)
        if file is not None:
            file.close()
