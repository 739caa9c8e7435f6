"""The fleet report as one self-contained HTML page (``OUT/report.html``) a reviewer can open.

Order: the failed drives first (what went wrong, and every retry: where it ran, why it ran
again), the nodes (a table and a chart of the drives each ran), AP pooled (table, chart per
class), mAP per drive, latency pooled (table, p50/p99 chart per stage, the histogram PNG),
e2e p99 per drive, budgets, then every drive (failed first). No network assets: charts are
inline SVG (``charts``) and one inline PNG (the pooled latency histogram per stage, drawn by
``rt.plot.histogram_image``). Everything is built from the JSON form (``export.report_dict``),
so the page and report.json always say the same thing.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from ..output_files import HTML_SIGNATURE, write_text_atomic
from .charts import hbar_svg

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;font-size:15px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 9px;
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.bad{color:#b00;font-weight:bold}.ok{color:#070}svg{display:block;margin:.3em 0 1.2em}"""


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
    parts += _failed_section(data)
    parts += _nodes_section(data)
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
           _table(["stage", "metric", "class", "AP", "GT", "det", "TP"], rows)]
    for score in pooled:
        out.append(f"<h3>AP per class: {_e(score['stage'])} {_e(score['metric'])}</h3>")
        out.append(hbar_svg([(c["class"], c["ap"], None) for c in score["classes"]], "",
                            "AP pooled over all drives (0 to 1)", score["mAP"], "mAP", 1.0))
    out.append("<h2>mean AP per drive</h2>")
    for i, score in enumerate(pooled):
        values = [(d["name"], d["scores"][i]["mAP"], None) for d in data["per_drive"]
                  if d["scores"]]
        out.append(f"<h3>{_e(score['stage'])} {_e(score['metric'])}</h3>")
        out.append(hbar_svg(values, "", "mAP per drive; dashed: pooled", score["mAP"],
                            "pooled", 1.0))
    return out


def _latency_section(data: dict, histogram_png: bytes | None) -> list[str]:
    rows = data["pooled"]["latency"]
    if not rows:
        return []
    table = [[_e(r["stage"]), _e(r["op"]), str(r["frames"]), _fmt(r["p50"]), _fmt(r["p99"]),
              _fmt(r["max"])] for r in rows]
    out = ["<h2>latency pooled over all drives (ms)</h2>",
           _table(["stage", "op", "frames", "p50", "p99", "max"], table),
           hbar_svg([(r["stage"], r["p99"], r["p50"]) for r in rows], "ms",
                    "per stage: p50 (dark) inside p99, ms")]
    if histogram_png:
        encoded = base64.b64encode(histogram_png).decode("ascii")
        out.append("<h3>distribution per stage (all frames of all drives)</h3>"
                   f"<img alt='latency histograms' src='data:image/png;base64,{encoded}'>")
    per_drive = [(d["name"], _row(d["latency"], "e2e"), None) for d in data["per_drive"]
                 if d["latency"]]
    out += ["<h3>end-to-end p99 per drive (ms)</h3>",
            hbar_svg(per_drive, "ms", "e2e p99 per drive; dashed: pooled", _row(rows, "e2e"),
                     "pooled")]
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
                     str(d["attempts"] or ""), _retries(d), _e(error.get("message", ""))])
    return ["<h2>drives (failed first)</h2>", _table(
        ["drive", "status", "frames", "s", "host:pid", "Ray node", "attempts",
         "retried after", "error"], rows)]


def _retries(drive: dict) -> str:
    """``attempt 1 on node 1a2b3c4d: DriveNotHere`` per failed attempt that ran again."""
    return "<br>".join(_e(f"attempt {r['attempt']} on {_place(r)}: {r['error']}")
                       for r in drive.get("retries", []))


def _place(where: dict) -> str:
    if where.get("node"):
        return f"node {where['node'][:8]}"
    return where.get("host") or "a lost worker"


def _failed_section(data: dict) -> list[str]:
    failed = [d for d in data["per_drive"] if d["status"] != "ok"]
    if not failed:
        return []
    rows = [[_e(d["name"]), _e((d["error"] or {}).get("type", "")),
             _e((d["error"] or {}).get("message", "")), str(d["attempts"] or ""), _retries(d)]
            for d in failed]
    return [f"<h2 class='bad'>{len(failed)} failed drive(s)</h2>",
            _table(["drive", "error", "message", "attempts", "retried after"], rows)]


def _nodes_section(data: dict) -> list[str]:
    nodes = data.get("nodes") or []
    if not nodes:
        return []
    rows = [[_e(n["node"] if not n["host"] else n["node"][:16]), _e(n["host"] or ""),
             str(n["drives"]), str(n["ok"]),
             str(n["failed"]), str(n["frames"]), _fmt(n["seconds"], 2),
             str(n["retried_elsewhere"])] for n in nodes]
    chart = hbar_svg([(n["node"] if n["node"] == n["host"] or not n["host"] else
                       f"{n['node'][:12]} ({n['host']})", float(n["drives"]), None)
                      for n in nodes], "drive(s)", "drives finished per node")
    return ["<h2>nodes</h2>", _table(["node", "host", "drives", "ok", "failed", "frames",
                                      "run s", "attempts retried elsewhere"], rows), chart]

