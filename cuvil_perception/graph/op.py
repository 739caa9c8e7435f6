"""The op contract every stage implementation follows (`registry` names the ops).

An op class declares its name, default tag, parameters and ports. The executor builds one
instance per stage (plus one per ``degrade`` variant) and calls, in order::

    kernels()        native kernels to prewarm before frame 0 (compile.KernelSpec list)
    open(ctx)        allocate static buffers, bind kernels, open files or devices
    process(...)     once per frame, on numpy arrays; returns a dict port name -> array
    close()          release everything; must be safe after a failed open

Sources (no inputs) implement ``read()`` instead of ``process()``.

Optional hooks the executor looks for:

* ``reference_process(inputs, frame) -> dict``: the op's numpy twin with the same semantics;
  ``bench`` times it on the same inputs in the same run for relative budgets.
* ``reuses_output_buffers = True`` (class attribute): ``process()`` returns persistent buffers
  that the next call overwrites; the executor copies them before handing them downstream.
* ``describe() -> list[str]``: lines ``inspect`` prints under the stage table (e.g. which
  execution path a model takes and why); may load the stage's model, never runs a frame.
* ``preflight()``: checks that read files but touch no sensor (the replay source reads its
  drive's index); ``run`` and ``inspect`` call it before anything is opened (`preflight`).
* ``summary_port = "name"`` with ``summarize(port, value) -> str``: the output that stands for the
  stage in ``run --summary`` and a short human line for one value of it (e.g. detections by
  class); without them the summary shows row counts.
* ``roles = {role: port}``, ``drive_param``, ``live_op``: what the outputs mean to eval, render
  and the CLI's source overrides (`roles`), which never name an op; a 3D detector may add
  ``bev_range(params) -> (x_min, y_min, x_max, y_max)``, the area (m) eval scores it on.
* ``measures_warmup = True`` (class attribute): ``open()`` runs warm-up passes of the stage's
  whole ``process()`` work through ``ops.warmup.warm_up`` and keeps the wall times of its timed
  passes (ns, ``ctx.clock``) in ``self.warmup_ns``; the executor asks for timed passes
  with ``ctx.timed_warmup_passes``. Only such stages may have ``deadline_ms: auto``
  (``rt.deadlines``).
* ``sink_roles = {role: param}``: sinks that write the run log (``run_log``: what ``--out``,
  ``--summary``, render and eval use) or serve the live view (``live_view``), see `roles`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from .params import Param
from .ports import PortSpec

TAGS = ("io", "compute")


@dataclass
class FrameInfo:
    """What a stage knows about the frame it processes.

    ``timestamp_ns`` is the frame's sensor time (ns since the epoch, from the drive's
    timestamps.txt or the camera clock); ``stamps`` holds each stream's own time.
    ``stale`` maps ``stage/port`` to the original frame index of a reused (stale) value.
    """

    index: int
    timestamp_ns: int
    stamps: dict[str, int] = field(default_factory=dict)
    stale: dict[str, int] = field(default_factory=dict)


@dataclass
class Sample:
    """One synchronised read of a source: its outputs and the sensor time of each stream (ns)."""

    timestamp_ns: int
    outputs: dict[str, np.ndarray]
    stamps: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RunContext:
    """Run-wide facts an op may need when it opens (the executor gives each op its own copy).

    ``base_dir`` is the pipeline file's folder; ``out_dir`` is where run outputs go; ``live``
    is True for camera input (keep only the newest frame); ``warn`` prints a warning line (a
    problem the user may want to fix), ``note`` a neutral line (information that asks nothing of
    the user: which bag topic was chosen, where a server listens).

    Set by the executor, defaults outside a run (an op opened by hand in a test):

    * ``stage_id``: the id of the stage this op runs (None outside a run).
    * ``clock``: the run's clock, ``now_ns()`` in ns (``rt.clock``; a ``testing.clock.FakeClock``
      in tests); None outside a run.
    * ``feed``: the run's ``rt.feed.RunFeed`` (stage timings and deadline decisions so far, for
      sinks that log them); None outside a run and in the sequential executor.
    * ``intra_op_threads``: threads an op's own runtime may use inside one call (ONNX Runtime's
      intra-op pool; ``rt.placement``).
    * ``thread_init``: what a thread the op starts itself calls first (a sink's background
      writer), so that it runs under the run's ``rt`` knobs like the io threads; None: nothing.
    * ``timed_warmup_passes``: timed warm-up passes ``open()`` should run (``measures_warmup``
      ops with ``deadline_ms: auto``; ``ops.warmup.warm_up``).
    """

    base_dir: Path = Path(".")
    out_dir: Path | None = None
    live: bool = False
    warn: Any = None
    note: Any = None
    stage_id: str | None = None
    clock: Any = None
    feed: Any = None
    intra_op_threads: int = 1
    thread_init: Callable[[], None] | None = None
    timed_warmup_passes: int = 0

    @property
    def extra(self) -> Mapping[str, Any]:
        """Deprecated read-only view for ops written against the old string keys
        (``ctx.extra["clock"]``, ...): the run fields above that are set, by name. Read the
        fields instead."""
        names = ("stage_id", "clock", "feed", "intra_op_threads", "thread_init",
                 "timed_warmup_passes")
        return MappingProxyType({name: getattr(self, name) for name in names
                                 if getattr(self, name) is not None})

    def warning(self, message: str) -> None:
        if self.warn is not None:
            self.warn(message)

    def info(self, message: str) -> None:
        """A line of information, not a warning (``run`` prints it as ``note:``)."""
        if self.note is not None:
            self.note(message)


class Op:
    """Base class of stage implementations. Subclasses set the class attributes below."""

    name: ClassVar[str] = ""
    tag: ClassVar[str] = "compute"
    params: ClassVar[tuple[Param, ...]] = ()
    doc: ClassVar[str] = ""
    variadic_inputs: ClassVar[bool] = False  # sinks: accept any input name and spec
    reuses_output_buffers: ClassVar[bool] = False  # process() returns persistent buffers
    roles: ClassVar[dict[str, str]] = {}  # role -> output port (see `roles`)
    drive_param: ClassVar[str | None] = None  # sources: the param with the drive they replay
    live_op: ClassVar[str | None] = None  # drive sources: the op --camera puts in their place
    sink_roles: ClassVar[dict[str, str]] = {}  # sinks: role -> the param it drives (see `roles`)
    measures_warmup: ClassVar[bool] = False  # open() times warm-up passes (deadline_ms: auto)
    warmup_ns: tuple[int, ...] = ()  # wall times of open()'s timed warm-up passes (ns)

    def __init__(self, params: dict[str, Any], inputs: dict[str, PortSpec]):
        self.p = params
        self.connected = inputs

    # -- declarations, used before the first frame ----------------------------------------
    def input_ports(self) -> tuple[PortSpec, ...]:
        """Declared inputs (may depend on params)."""
        return ()

    def output_ports(self) -> tuple[PortSpec, ...]:
        """Declared outputs (may depend on params and on ``self.connected`` specs)."""
        return ()

    def kernels(self) -> list:
        """Native kernels (``compile.KernelSpec``) this stage calls; prewarmed before frame 0."""
        return []

    def check(self) -> None:
        """Cross-parameter validation: raise ``ParamProblem(param, reason)`` to blame one param."""

    # -- lifecycle ----------------------------------------------------------------------
    def open(self, ctx: RunContext) -> None:
        pass

    def process(self, inputs: dict[str, np.ndarray], frame: FrameInfo) -> dict[str, np.ndarray]:
        raise NotImplementedError(f"op {self.name} does not implement process()")

    def close(self) -> None:
        pass


class Source(Op):
    """A stage with no inputs that produces frames from the outside world."""

    tag: ClassVar[str] = "io"

    def read(self) -> Sample | None:
        """The next synchronised sample, or None at the end of the stream."""
        raise NotImplementedError

    def __len__(self) -> int:
        """Number of frames if known (replay), else 0."""
        return 0


class Sink(Op):
    """A stage with no outputs that writes results somewhere."""

    tag: ClassVar[str] = "io"
    variadic_inputs: ClassVar[bool] = True


class ParamProblem(ValueError):
    """Raised by ``Op.check`` to blame one parameter: ``ParamProblem(param_name, reason)``."""

    def __init__(self, param: str, reason: str):
        super().__init__(reason)
        self.param = param
        self.reason = reason


def suggest(word: str, choices) -> str:
    """`` (did you mean 'x'?)`` or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
