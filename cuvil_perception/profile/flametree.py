"""The tree a flame graph draws: stacks merged by common prefix, each node's samples, and for a
differential graph its change.

Children keep the name order (alphabetical, as FlameGraph draws them), so a graph does not
reorder itself between two recordings of the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Node:
    """``value``: weight of every stack through this node (samples, or ms per frame);
    ``delta``: that weight minus the other recording's at the same path (differential graphs;
    0 otherwise); ``depth``: 0 for the root."""

    name: str
    depth: int = 0
    value: float = 0.0
    delta: float = 0.0
    children: dict[str, "Node"] = field(default_factory=dict)

    def child(self, name: str) -> "Node":
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = Node(name, self.depth + 1)
        return node

    def ordered(self) -> list["Node"]:
        return [self.children[k] for k in sorted(self.children)]

    def walk(self):
        """Every node, parents before children, children in drawing order."""
        yield self
        for child in self.ordered():
            yield from child.walk()

    def max_depth(self) -> int:
        return max((c.max_depth() for c in self.children.values()), default=self.depth)


def build(weights: dict[tuple, float], root: str = "all") -> Node:
    """The tree of ``weights`` (stack tuple -> weight)."""
    top = Node(root)
    for stack, weight in weights.items():
        top.value += weight
        node = top
        for frame in stack:
            node = node.child(frame)
            node.value += weight
    return top


def build_diff(after: dict[tuple, float], before: dict[tuple, float],
               root: str = "all") -> Node:
    """The tree of ``after`` (widths: the second recording), each node's ``delta`` = its
    weight in ``after`` minus the weight of the same path in ``before``. Paths only in
    ``before`` are not drawn (their loss still shows in their parents' deltas)."""
    top = build(after, root)
    top.delta = top.value
    for stack, weight in before.items():
        top.delta -= weight
        node = top
        for frame in stack:
            node = node.children.get(frame)
            if node is None:
                break
            node.delta -= weight
    for node in top.walk():
        if node is not top:
            node.delta += node.value
    return top
