"""Two recordings compared: weights per pipeline frame, the differential tree, and the table of
functions whose time changed most.

Both sides are put in milliseconds of sampled time per pipeline frame (samples / rate /
frames), so a side that ran more frames or at another rate compares fairly.
"""

from __future__ import annotations

from dataclasses import dataclass

from .flametree import Node, build_diff
from .stacks import Stacks


def per_frame(stacks: Stacks) -> dict[tuple, float]:
    """Each stack's weight in ms per pipeline frame."""
    return {stack: stacks.ms_per_frame(n) for stack, n in stacks.counts.items()}


def diff_tree(a: Stacks, b: Stacks) -> Node:
    """B's tree (widths: B's ms per frame), each node's delta = B - A at that path."""
    return build_diff(per_frame(b), per_frame(a))


@dataclass(frozen=True)
class Change:
    """One function: self and total ms per frame in A and in B."""

    name: str
    a_self: float
    b_self: float
    a_total: float
    b_total: float

    @property
    def self_delta(self) -> float:
        return self.b_self - self.a_self

    @property
    def total_delta(self) -> float:
        return self.b_total - self.a_total


def changes(a: Stacks, b: Stacks, top: int = 15) -> list[Change]:
    """The ``top`` functions by the size of their self-time change (ms per frame), largest
    first; thread frames (the roots) left out."""
    a_self, a_total = a.function_times()
    b_self, b_total = b.function_times()
    threads = set(a.threads()) | set(b.threads())
    names = (set(a_self) | set(b_self)) - threads
    rows = [Change(n, a.ms_per_frame(a_self[n]), b.ms_per_frame(b_self[n]),
                   a.ms_per_frame(a_total[n]), b.ms_per_frame(b_total[n])) for n in names]
    rows.sort(key=lambda c: (-abs(c.self_delta), c.name))
    return rows[:top]


def changes_text(rows: list[Change], labels: tuple[str, str]) -> str:
    """The table as plain text (also what ``profile --vs`` writes to changes.txt)."""
    head = (f"{'function':<60} {'A self':>8} {'B self':>8} {'B-A self':>9} "
            f"{'A total':>8} {'B total':>8}")
    lines = [f"A = {labels[0]}, B = {labels[1]}; ms per frame", head]
    for c in rows:
        name = c.name if len(c.name) <= 60 else c.name[:57] + "..."
        lines.append(f"{name:<60} {c.a_self:>8.3f} {c.b_self:>8.3f} {c.self_delta:>+9.3f} "
                     f"{c.a_total:>8.3f} {c.b_total:>8.3f}")
    return "\n".join(lines) + "\n"
