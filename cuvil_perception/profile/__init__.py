"""``profile``: record pipeline runs with a sampling profiler; flame graphs, folded stacks,
speedscope files, differential graphs.

Layout, in the order a recording flows through it::

    samplers    which sampler may run here (py-spy, perf), one line on what to change if none
    session     worker processes (worker), the sampler attached to each, runs interleaved
    threadnames the workers' thread names, polled from the parent
    pyspy/perf  a sampler's command line and its output read into Stacks (frames names them)
    perfmap     the native kernels' names from the worker's /tmp/perf-<pid>.map
    stacks      Stacks: sample counts per stack, folded text in and out
    flametree   the merged tree (and a differential one) -> flamegraph: the SVG
    speedscope  the speedscope JSON; diff: per-frame weights and the table of changes
    output      the files of --out
"""

from .samplers import SAMPLERS, choose
from .diff import Change, changes, changes_text, diff_tree
from .session import Recording, record
from .stacks import Stacks, parse_folded

# py-spy --native stops the worker ~4 ms a sample: 10 Hz keeps that ~4 % of the run (the
# target: <= 10 % on e2e p50); 60 runs give the sample drive's graph ~230 samples, above the
# 200 under which `profile` calls a graph coarse (docs/profiling.md, "What recording costs")
DEFAULT_HZ = 10  # samples a second
DEFAULT_REPEAT = 60  # runs of the drive a recording (per side)

__all__ = ["DEFAULT_HZ", "DEFAULT_REPEAT", "SAMPLERS", "Change", "Recording", "Stacks", "changes",
           "changes_text", "choose", "diff_tree", "parse_folded", "record"]
