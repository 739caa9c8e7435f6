"""The fleet report as one self-contained HTML page (``OUT/report.html``) a reviewer can open.

No network assets: plots are inline SVG (per-drive AP bars, per-drive p99 bars) and one inline
PNG (the pooled latency histogram per stage, drawn by ``rt.plot.histogram_image``).
Everything is built from the JSON form (``export.report_dict``), so the page and report.json
always say the same thing.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from ..output_files import HTML_SIGNATURE, write_text_atomic

_BAR_W, _BAR_GAP, _PLOT_H = 18, 4, 160
_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.bad{color:#b00;font-weight:bold}.ok{color:#070}svg text{font-size:10px}"""


def write_html(path: Path, data: dict, histogram_png: bytes | None) -> Path:
    """Write the page for ``data`` (a ``report_dict``); ``histogram_png``: encoded PNG bytes."""
    drives = data["drives"]
    parts = [f"{HTML_SIGNATURE}<html><head><meta charset='utf-8'><title>fleet {_e(data['mode'])}"
             f" — {_e(data['pipeline'])}</title><style>{_STYLE}</style></head><body>",
             f"<h1>fleet {_e(data['mode'])}: {_e(data['pipeline'])}</h1>",
             f"<p>{drives['total']} drive(s): {drives['ok']} ok, "
             f"<span class='{'bad' if drives['failed'] else 'ok'}'>{drives['failed']} failed"
             f"</span>, {drives['unfinished']} not run, {drives['resumed']} resumed · exit code "
             f"{data['exit_code']} · {_e(data['backend'])}</p>"]
    parts += _scores_section(data)
    parts += _latency_section(data, histogram_png)
    parts += _budgets_section(data)
    parts += _drives_section(data)
    parts.append("</body></html>")
    return write_text_atomic(path, "\n".join(parts) + "\n")


def _e(value) -> str:
    return html.escape(str(value))


def _fmt(value, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _scores_section(data: dict) -> list[str]:
    pooled = data["pooled"]["scores"]
    if not pooled:
        return []
    rows = [[_e(s["stage"]), _e(s["metric"]), _e(c["class"]), _fmt(c["ap"]), str(c["num_gt"]),
             str(c["num_det"]), str(c["tp"])] for s in pooled for c in s["classes"]]
    out = ["<h2>AP pooled over all drives</h2>",
           _table(["stage", "metric", "class", "AP", "GT", "det", "TP"], rows),
           "<h2>mean AP per drive</h2>"]
    for i, score in enumerate(pooled):
        values = [(d["name"], d["scores"][i]["mAP"]) for d in data["per_drive"] if d["scores"]]
        out.append(f"<h3>{_e(score['stage'])} {_e(score['metric'])}</h3>")
        out.append(bar_svg(values, 1.0, score["mAP"], "mAP"))
    return out


def _latency_section(data: dict, histogram_png: bytes | None) -> list[str]:
    rows = data["pooled"]["latency"]
    if not rows:
        return []
    table = [[_e(r["stage"]), _e(r["op"]), str(r["frames"]), _fmt(r["p50"]), _fmt(r["p99"]),
              _fmt(r["max"])] for r in rows]
    out = ["<h2>latency pooled over all drives (ms)</h2>",
           _table(["stage", "op", "frames", "p50", "p99", "max"], table)]
    if histogram_png:
        encoded = base64.b64encode(histogram_png).decode("ascii")
        out.append("<h3>distribution per stage (all frames of all drives)</h3>"
                   f"<img alt='latency histograms' src='data:image/png;base64,{encoded}'>")
    per_drive = [(d["name"], _row(d["latency"], "e2e")) for d in data["per_drive"]
                 if d["latency"]]
    top = max([v for _, v in per_drive if v is not None] + [1e-9])
    out += ["<h3>end-to-end p99 per drive (ms)</h3>",
            bar_svg(per_drive, top * 1.1, _row(rows, "e2e"), "ms")]
    return out


def _row(rows: list[dict], stage: str):
    for row in rows:
        if row["stage"] == stage:
            return row["p99"]
    return None


def _budgets_section(data: dict) -> list[str]:
    if not data["pooled"]["budgets"]:
        return []
    rows = [[_e(v["stage"]), _fmt(v["p50_ms"]), _fmt(v["p99_ms"]), _e(v["budget"]),
             _verdict(v["passed"])] for v in data["pooled"]["budgets"]]
    out = ["<h2>budgets on the pooled latencies</h2>",
           _table(["stage", "p50 ms", "p99 ms", "budget", "verdict"], rows),
           "<h2>worst drives per budget</h2>"]
    for worst in data["worst"]:
        rows = [[_e(d["name"]), _fmt(d["value"]), _verdict(d["passed"])] for d in worst["drives"]]
        out.append(f"<h3>{_e(worst['budget'])}: {worst['breaches']} drive(s) breach</h3>")
        out.append(_table(["drive", "measured", "verdict"], rows))
    return out


def _verdict(passed: bool) -> str:
    return "<span class='ok'>pass</span>" if passed else "<span class='bad'>BREACH</span>"


def _drives_section(data: dict) -> list[str]:
    rows = []
    for d in data["per_drive"]:
        where = d["where"] or {}
        status = _e(d["status"]) if d["status"] == "ok" else f"<span class='bad'>{_e(d['status'])}"\
            "</span>"
        error = d["error"] or {}
        rows.append([_e(d["name"]), status, str(d["frames"] or 0), _fmt(d["seconds"], 2),
                     _e(f"{where.get('host')}:{where.get('pid')}"), _e(where.get("node") or ""),
                     str(d["attempts"] or ""), _e(error.get("message", ""))])
    return ["<h2>drives</h2>", _table(["drive", "status", "frames", "s", "host:pid", "Ray node",
                                       "attempts", "error"], rows)]


def bar_svg(values: list[tuple[str, float | None]], top: float, line: float | None,
            unit: str) -> str:
    """A bar per (label, value) scaled to ``top``; ``line``: a dashed reference (pooled)."""
    width = max(200, len(values) * (_BAR_W + _BAR_GAP) + 60)
    height = _PLOT_H + 70
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'>"]
    scale = _PLOT_H / top if top > 0 else 0.0
    for i, (label, value) in enumerate(values):
        x = 40 + i * (_BAR_W + _BAR_GAP)
        h = 0.0 if value is None else max(0.0, value) * scale
        parts.append(f"<rect x='{x}' y='{10 + _PLOT_H - h:.1f}' width='{_BAR_W}' "
                     f"height='{h:.1f}' fill='#1f77b4'><title>{_e(label)}: "
                     f"{_fmt(value)} {unit}</title></rect>")
        parts.append(f"<text transform='translate({x + 12},{_PLOT_H + 16}) rotate(60)'>"
                     f"{_e(label[:16])}</text>")
    if line is not None:
        y = 10 + _PLOT_H - line * scale
        parts.append(f"<line x1='36' x2='{width}' y1='{y:.1f}' y2='{y:.1f}' stroke='#d62728' "
                     f"stroke-dasharray='4 3'/><text x='0' y='{y + 3:.1f}' fill='#d62728'>"
                     f"{_fmt(line, 2)}</text>")
    parts.append(f"<line x1='38' x2='38' y1='10' y2='{10 + _PLOT_H}' stroke='#000'/>"
                 f"<text x='0' y='14'>{_fmt(top, 2)}</text></svg>")
    return "".join(parts)
