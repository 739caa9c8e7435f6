"""Inline SVG bar charts for the fleet's HTML report: horizontal bars with readable labels.

One row per item (a drive, a class, a stage, a node): its name on the left in full (up to 40
characters), a bar scaled to the largest value, the value written at the bar's end. Optional
per row: a second, darker bar inside the first (p50 inside p99). Optional per chart: a dashed
reference line (the pooled value). 760 px wide, 13 px text: readable without zooming.
"""

from __future__ import annotations

import html

WIDTH = 760
LABEL_W = 260  # px for the names
ROW_H = 24
TOP = 28  # room for the axis caption
VALUE_W = 150  # px after the longest bar, for its value
BAR = "#4c78a8"
INNER = "#1f3b5c"
LINE = "#d62728"


def hbar_svg(rows: list[tuple[str, float | None, float | None]], unit: str,
             caption: str = "", line: float | None = None, line_label: str = "",
             top: float | None = None) -> str:
    """``rows``: ``(label, value, inner value or None)``; ``unit`` after each value; ``top``:
    the value of a full bar (default: the largest value). A missing value draws no bar."""
    values = [v for _, v, _ in rows if v is not None] + ([line] if line is not None else [])
    top = top or max(values + [1e-12])
    span = WIDTH - LABEL_W - VALUE_W
    height = TOP + ROW_H * max(1, len(rows)) + 10
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height}' "
             "font-family='system-ui,sans-serif' font-size='13' role='img'>",
             f"<text x='{LABEL_W}' y='16' fill='#555'>{_e(caption)}</text>"]
    for i, (label, value, inner) in enumerate(rows):
        y = TOP + i * ROW_H
        parts.append(f"<text x='{LABEL_W - 8}' y='{y + 16}' text-anchor='end'>"
                     f"{_e(_short(label))}<title>{_e(label)}</title></text>")
        if value is None:
            parts.append(f"<text x='{LABEL_W + 4}' y='{y + 16}' fill='#888'>n/a</text>")
            continue
        w = max(0.0, value) / top * span
        parts.append(f"<rect x='{LABEL_W}' y='{y + 4}' width='{w:.1f}' height='{ROW_H - 8}' "
                     f"fill='{BAR}'><title>{_e(label)}: {_fmt(value)} {_e(unit)}</title></rect>")
        text = f"{_fmt(value)} {unit}"
        if inner is not None:
            wi = max(0.0, inner) / top * span
            parts.append(f"<rect x='{LABEL_W}' y='{y + 8}' width='{wi:.1f}' "
                         f"height='{ROW_H - 16}' fill='{INNER}'/>")
            text = f"{_fmt(inner)} / {text}"
        parts.append(f"<text x='{LABEL_W + w + 6:.1f}' y='{y + 16}'>{_e(text)}</text>")
    if line is not None:
        x = LABEL_W + line / top * span
        parts.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{TOP - 4}' y2='{height - 6}' "
                     f"stroke='{LINE}' stroke-dasharray='5 4' stroke-width='1.5'/>"
                     f"<text x='{x + 4:.1f}' y='{TOP - 8}' fill='{LINE}'>"
                     f"{_e(line_label)} {_fmt(line)}</text>")
    parts.append(f"<line x1='{LABEL_W}' x2='{LABEL_W}' y1='{TOP}' y2='{height - 10}' "
                 "stroke='#333'/></svg>")
    return "".join(parts)


def _short(label: str) -> str:
    return label if len(label) <= 40 else label[:18] + "…" + label[-21:]


def _fmt(value: float) -> str:
    if float(value).is_integer():
        return f"{value:.0f}"
    return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"


def _e(value) -> str:
    return html.escape(str(value))
