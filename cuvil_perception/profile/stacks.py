"""Folded stacks: the one data type every part of ``profile`` reads and writes.

A `Stacks` maps a stack, a tuple of frame names from the root (the thread, ``frames[0]``) to
the leaf (where the CPU was), to its sample count. The text form is the folded format of
Brendan Gregg's FlameGraph tools and of speedscope's importer: one ``frame;frame;...;leaf COUNT``
line per distinct stack. Frame names never contain ``;`` (replaced by ``:`` when read).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Stacks:
    """Sample counts per stack. ``rate_hz``: samples a second per thread, so a count / rate is
    seconds of that thread's busy time (perf: on a CPU; py-spy: wall time of a thread not
    blocked, so also time spent waiting for a core on a loaded machine); ``frames``: pipeline
    frames the samples cover (0: unknown)."""

    counts: Counter = field(default_factory=Counter)
    rate_hz: float = 100.0
    frames: int = 0

    def add(self, stack, count: int = 1) -> None:
        stack = tuple(f.replace(";", ":") for f in stack)
        if stack and count > 0:
            self.counts[stack] += count

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def threads(self) -> list[str]:
        """Root frames (thread names) by samples, most first; equal counts by name, so the order
        does not depend on the order the stacks were added (a re-read folded file gives the same)."""
        per = Counter()
        for stack, n in self.counts.items():
            per[stack[0]] += n
        return sorted(per, key=lambda name: (-per[name], name))

    def thread(self, name: str) -> "Stacks":
        """Only the stacks of thread ``name``, without the thread frame."""
        out = Stacks(rate_hz=self.rate_hz, frames=self.frames)
        for stack, n in self.counts.items():
            if stack[0] == name and len(stack) > 1:
                out.add(stack[1:], n)
        return out

    def merge(self, other: "Stacks") -> None:
        """Add ``other``'s samples (same rate expected) and frames."""
        self.counts.update(other.counts)
        self.frames += other.frames

    def ms_per_frame(self, samples: float) -> float:
        """``samples`` as milliseconds per pipeline frame (per run if frames is 0)."""
        return samples * 1000.0 / self.rate_hz / max(self.frames, 1)

    def function_times(self) -> tuple[Counter, Counter]:
        """(self, total) samples per frame name: self = the name is the leaf; total = it is on
        the stack (counted once per sample, however often it recurs)."""
        own, total = Counter(), Counter()
        for stack, n in self.counts.items():
            own[stack[-1]] += n
            for name in set(stack):
                total[name] += n
        return own, total

    def to_folded(self) -> str:
        """The folded text, stacks sorted (the same samples give the same bytes)."""
        return "".join(f"{';'.join(s)} {n}\n" for s, n in sorted(self.counts.items()))


def parse_folded(text: str, rate_hz: float = 100.0, frames: int = 0) -> Stacks:
    """Read folded text (``a;b;c COUNT`` lines; blank lines skipped). Raises ValueError naming
    the line when one has no count."""
    out = Stacks(rate_hz=rate_hz, frames=frames)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"folded stacks line {number}: expected 'frame;...;frame COUNT'")
        out.add(stack.split(";"), int(count))
    return out
