"""What ``profile`` writes into its ``--out`` folder.

One recording: ``flamegraph.svg``, ``stacks.folded``, ``profile.speedscope.json``.
``--vs``: the same three for each side with an ``a-`` / ``b-`` prefix, plus ``diff.svg`` (B's
widths, red grew, blue shrank) and ``changes.txt`` (the top functions by change).
"""

from __future__ import annotations

from pathlib import Path

from ..output_files import mark_folder, write_text_atomic
from .diff import Change, changes_text, diff_tree, per_frame
from .flamegraph import render
from .flametree import Node, build
from .speedscope import to_speedscope
from .stacks import Stacks

FILES = ("flamegraph.svg", "stacks.folded", "profile.speedscope.json")


def describe(stacks: Stacks):
    """The hover line of a plain graph's frame (node values in ms per frame)."""
    total_ms = stacks.ms_per_frame(stacks.total)

    def line(node: Node) -> str:
        share = 100.0 * node.value / total_ms if total_ms else 0.0
        return f"{node.name}: {node.value:.3f} ms per frame, {share:.1f} %"
    return line


def describe_diff(node: Node) -> str:
    before = node.value - node.delta
    change = f"{100.0 * node.delta / before:+.0f} %" if before > 0 else "new"
    return (f"{node.name}: B {node.value:.3f} ms per frame, A {before:.3f} "
            f"({node.delta:+.3f} ms, {change})")


def title(label: str, stacks: Stacks, sampler: str) -> str:
    return (f"{label}: {stacks.total} samples at {stacks.rate_hz:g} Hz ({sampler}), "
            f"{stacks.frames} frames")


def write_one(folder: Path, stacks: Stacks, label: str, sampler: str,
              prefix: str = "") -> list[Path]:
    """The three files of one recording (widths in ms per pipeline frame)."""
    tree = build(per_frame(stacks))
    paths = [folder / f"{prefix}{name}" for name in FILES]
    write_text_atomic(paths[0], render(tree, title(label, stacks, sampler), describe(stacks)))
    write_text_atomic(paths[1], stacks.to_folded())
    write_text_atomic(paths[2], to_speedscope(stacks, label))
    return paths


def write_profile(folder: Path, stacks: Stacks, label: str, sampler: str) -> list[Path]:
    mark_folder(folder, "profile", files=FILES)
    return write_one(folder, stacks, label, sampler)


def write_vs(folder: Path, a: Stacks, b: Stacks, labels: tuple[str, str], sampler: str,
             rows: list[Change]) -> list[Path]:
    """Both sides' files, ``diff.svg`` and ``changes.txt``."""
    names = tuple(p + n for p in ("a-", "b-") for n in FILES) + ("diff.svg", "changes.txt")
    mark_folder(folder, "profile", files=names)
    paths = write_one(folder, a, labels[0], sampler, "a-")
    paths += write_one(folder, b, labels[1], sampler, "b-")
    heading = (f"B {labels[1]} vs A {labels[0]}: widths B, red grew, blue shrank "
               f"(ms per frame; {sampler} at {b.rate_hz:g} Hz)")
    paths.append(folder / "diff.svg")
    write_text_atomic(paths[-1], render(diff_tree(a, b), heading, describe_diff, diff=True))
    paths.append(folder / "changes.txt")
    write_text_atomic(paths[-1], changes_text(rows, labels))
    return paths
