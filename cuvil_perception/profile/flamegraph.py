"""A flame graph as one self-contained interactive SVG (no outside script, font or style).

Each frame is a ``<g class="f">`` holding a ``<title>`` (name and figures: the hover text), a
``<rect>`` and a ``<text>`` label; its attributes ``data-n`` (name), ``data-v`` (weight),
``data-x`` / ``data-w`` (start and width as fractions of the root) and ``data-d`` (depth) are
what the script zooms and searches with, and what tests check against the folded stacks. The
root is at the bottom, callers below callees; widths are proportional to the weight.

Colours: plain graphs by kind of frame (yellow Python, green native kernels, purple ONNX
Runtime, orange other native code, grey threads), a shade per name; differential graphs
(`flametree.build_diff`) red where the frame grew, blue where it shrank, white unchanged, the
shade proportional to the change.
"""

from __future__ import annotations

import zlib
from xml.sax.saxutils import escape, quoteattr

from .flametree import Node
from .svg_script import SCRIPT

WIDTH = 1200  # px of the frame area
ROW = 16  # px per stack level
TOP, BOTTOM, SIDE = 48, 30, 10
MIN_PX = 0.1  # narrower frames are left out (the hover of their parent still counts them)


def render(root: Node, title: str, describe, diff: bool = False) -> str:
    """The SVG text of ``root``'s tree. ``describe(node) -> str``: the hover line of a frame."""
    depth = root.max_depth() + 1
    height = TOP + depth * ROW + BOTTOM
    scale = _delta_scale(root) if diff else 0.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH + 2 * SIDE}" '
             f'height="{height}" viewBox="0 0 {WIDTH + 2 * SIDE} {height}" '
             f'data-width="{WIDTH}" onload="init()">',
             "<style>text { font: 12px monospace; fill: rgb(0,0,0); } "
             ".f:hover rect { stroke: black; stroke-width: 0.5; cursor: pointer; } "
             ".b { cursor: pointer; }</style>",
             f"<script><![CDATA[{SCRIPT}]]></script>",
             '<rect x="0" y="0" width="100%" height="100%" fill="rgb(248,248,240)"/>',
             f'<text x="{(WIDTH + 2 * SIDE) // 2}" y="20" text-anchor="middle" '
             f'style="font-size:14px">{escape(title)}</text>',
             f'<text class="b" x="{SIDE}" y="40" onclick="unzoom()">Reset zoom</text>',
             f'<text class="b" x="{WIDTH - 50}" y="40" onclick="search()">Search</text>',
             f'<text id="matched" x="{WIDTH - 160}" y="{height - 10}"> </text>',
             f'<text id="details" x="{SIDE}" y="{height - 10}"> </text>',
             '<g id="frames">']
    total = root.value or 1.0
    for node, x in _positions(root):
        w = node.value / total
        if w * WIDTH < MIN_PX:
            continue
        y = height - BOTTOM - (node.depth + 1) * ROW
        fill = _diff_colour(node.delta, scale) if diff else _colour(node)
        parts.append(_frame(node, x, w, y, fill, describe(node)))
    parts.append("</g></svg>")
    return "\n".join(parts) + "\n"


def _positions(root: Node):
    """(node, start fraction) for every node, parents first."""
    total = root.value or 1.0
    stack = [(root, 0.0)]
    while stack:
        node, x = stack.pop()
        yield node, x
        offset, placed = x, []
        for child in node.ordered():
            placed.append((child, offset))
            offset += child.value / total
        stack.extend(reversed(placed))


def _frame(node: Node, x: float, w: float, y: int, fill: str, hover: str) -> str:
    px, pw = SIDE + x * WIDTH, w * WIDTH
    fit = int((pw - 6) // 7)
    label = "" if fit < 3 else node.name if len(node.name) <= fit else node.name[:fit - 2] + ".."
    return (f'<g class="f" data-n={quoteattr(node.name)} data-v="{node.value:.6g}" '
            f'data-x="{x:.9f}" data-w="{w:.9f}" data-d="{node.depth}" data-f="{fill}">'
            f"<title>{escape(hover)}</title>"
            f'<rect x="{px:.2f}" y="{y}" width="{pw:.2f}" height="{ROW - 1}" fill="{fill}" '
            f'rx="2"/><text x="{px + 3:.2f}" y="{y + ROW - 4}"{_ink(fill)}>{escape(label)}</text>'
            "</g>")


def _ink(fill: str) -> str:
    """White labels on dark fills (the deep blues and reds of a differential graph)."""
    r, g, b = (int(v) for v in fill[4:-1].split(","))
    return ' style="fill:rgb(255,255,255)"' if 0.299 * r + 0.587 * g + 0.114 * b < 110 else ""


def kind(name: str, depth: int) -> str:
    """``thread``, ``kernel``, ``onnxruntime``, ``python`` or ``native``."""
    if depth <= 1:
        return "thread"
    if name.startswith("cuvil:"):
        return "kernel"
    if "onnxruntime" in name:
        return "onnxruntime"
    if ".py)" in name or "(<frozen" in name:
        return "python"
    return "native"


_PALETTE = {  # (base r, g, b) and how far each channel varies by name
    "thread": ((190, 190, 190), (20, 20, 20)),
    "kernel": ((60, 190, 70), (40, 40, 40)),
    "onnxruntime": ((160, 110, 220), (40, 30, 30)),
    "python": ((220, 200, 60), (30, 40, 40)),
    "native": ((225, 110, 40), (30, 60, 30)),
}


def _colour(node: Node) -> str:
    (r, g, b), (dr, dg, db) = _PALETTE[kind(node.name, node.depth)]
    h = zlib.crc32(node.name.encode())
    v = [(h >> s & 255) / 255 for s in (0, 8, 16)]
    return f"rgb({int(r + dr * v[0])},{int(g + dg * v[1])},{int(b + db * v[2])})"


def _delta_scale(root: Node) -> float:
    """The largest change of any frame below the thread level (the colour scale's end)."""
    return max((abs(n.delta) for n in root.walk() if n.depth >= 2), default=0.0) or 1.0


def _diff_colour(delta: float, scale: float) -> str:
    t = min(1.0, abs(delta) / scale)
    fade = int(round(245 * (1 - t)))
    if delta > 0:
        return f"rgb(255,{fade},{fade})"
    if delta < 0:
        return f"rgb({fade},{fade},255)"
    return "rgb(245,245,245)"
