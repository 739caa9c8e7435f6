"""The flame graph's script run under Node.js on a stand-in DOM built from a real SVG: a click
zooms the frame to the full width (its callers full width below it, everything else hidden),
Search reports the share the matches cover. Skipped where Node.js is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from cuvil_perception.profile import parse_folded
from cuvil_perception.profile.flamegraph import SIDE, WIDTH, render
from cuvil_perception.profile.flametree import build
from cuvil_perception.profile.output import describe
from cuvil_perception.profile.svg_script import SCRIPT

from test_profile_render import FOLDED, frames_of

NODE = shutil.which("node")
HARNESS = r"""
const vm = require("vm");
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
function part() {
  return {attrs: {}, textContent: "",
          setAttribute(k, v) { this.attrs[k] = v; }, getAttribute(k) { return this.attrs[k]; }};
}
function element(attrs) {
  const own = Object.assign({}, attrs), rect = part(), text = part();
  return {style: {display: ""}, firstElementChild: {textContent: own["data-n"]}, rect, text,
          getAttribute(k) { return own[k]; },
          querySelector(s) { return s === "rect" ? rect : text; }};
}
const boxes = input.frames.map(element), spots = {};
function byId(id) {
  return id === "frames" ? {children: boxes} : (spots[id] = spots[id] || {textContent: ""});
}
global.document = {documentElement: {getAttribute: () => String(input.width)},
                   getElementById: byId};
global.prompt = () => input.query;
vm.runInThisContext(input.script);
init();
zoom(boxes[input.zoom]);
const placed = boxes.map(g => ({shown: g.style.display !== "none", x: +g.rect.attrs.x,
                                w: +g.rect.attrs.width}));
search();
console.log(JSON.stringify({placed, matched: spots.matched.textContent}));
"""


@pytest.mark.skipif(NODE is None, reason="Node.js not installed")
def test_click_zooms_and_search_reports_the_matched_share():
    stacks = parse_folded(FOLDED)
    drawn = frames_of(render(build(stacks.counts), "t", describe(stacks)))
    target = next(i for i, f in enumerate(drawn) if f["path"][-1].startswith("PillarsDetect"))
    attrs = [{"data-n": f["path"][-1], "data-x": repr(f["x"]), "data-w": repr(f["w"]),
              "data-d": str(len(f["path"]) - 1)} for f in drawn]
    payload = {"frames": attrs, "width": WIDTH, "zoom": target, "query": "pillarize|onnx",
               "script": SCRIPT}
    done = subprocess.run([NODE, "-e", HARNESS], input=json.dumps(payload), text=True,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    zoomed = drawn[target]["path"]
    for frame, placed in zip(drawn, out["placed"]):
        path = frame["path"]
        inside = path[:len(zoomed)] == zoomed
        caller = zoomed[:len(path)] == path
        assert placed["shown"] == (inside or caller), path
        if caller:  # the zoomed frame and its callers: full width
            assert placed["x"] == SIDE and placed["w"] == pytest.approx(WIDTH), path
        elif inside:
            assert SIDE <= placed["x"] and placed["x"] + placed["w"] <= SIDE + WIDTH + 1e-6
    # pillarize 7 + ONNX Runtime 20 of 40 samples
    assert out["matched"] == "Matched: 67.5%"
