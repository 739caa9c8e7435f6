"""The JavaScript inside a flame graph SVG: click a frame to zoom to it (its ancestors stay as
full-width bars, click one or "Reset zoom" to go back), hover for its figures, "Search" for a
regular expression (matches turn magenta, the share they cover is shown). No outside file."""

SCRIPT = r"""
var frames, details, matched, W = 0, X0 = 10;
function attr(g, k) { return g.getAttribute(k); }
function init() {
  frames = document.getElementById("frames").children;
  details = document.getElementById("details");
  matched = document.getElementById("matched");
  W = +document.documentElement.getAttribute("data-width");
  for (var i = 0; i < frames.length; i++) {
    var g = frames[i];
    g.onmouseover = function () { details.textContent = this.firstElementChild.textContent; };
    g.onmouseout = function () { details.textContent = " "; };
    g.onclick = function () { zoom(this); };
  }
}
function place(g, x, w) {
  var r = g.querySelector("rect"), t = g.querySelector("text");
  if (w < 0.1) { g.style.display = "none"; return; }
  g.style.display = "";
  r.setAttribute("x", X0 + x); r.setAttribute("width", w);
  t.setAttribute("x", X0 + x + 3);
  var name = attr(g, "data-n"), fit = Math.floor((w - 6) / 7);
  t.textContent = fit < 3 ? "" : (name.length <= fit ? name : name.slice(0, fit - 2) + "..");
}
function zoom(z) {
  var zx = +attr(z, "data-x"), zw = +attr(z, "data-w"), zd = +attr(z, "data-d");
  for (var i = 0; i < frames.length; i++) {
    var g = frames[i], x = +attr(g, "data-x"), w = +attr(g, "data-w"), d = +attr(g, "data-d");
    if (d < zd) {
      var covers = x <= zx + 1e-12 && x + w >= zx + zw - 1e-12;
      if (covers) place(g, 0, W); else g.style.display = "none";
    } else if (x >= zx - 1e-12 && x + w <= zx + zw + 1e-12) {
      place(g, (x - zx) / zw * W, w / zw * W);
    } else g.style.display = "none";
  }
}
function unzoom() { zoom(frames[0]); }
function search() {
  var text = prompt("Search frames (regular expression):", "");
  if (text === null) return;
  var re = new RegExp(text), spans = [];
  for (var i = 0; i < frames.length; i++) {
    var g = frames[i], r = g.querySelector("rect");
    if (text !== "" && re.test(attr(g, "data-n"))) {
      r.setAttribute("fill", "rgb(230,0,230)");
      spans.push([+attr(g, "data-x"), +attr(g, "data-x") + +attr(g, "data-w")]);
    } else r.setAttribute("fill", attr(g, "data-f"));
  }
  spans.sort(function (a, b) { return a[0] - b[0]; });
  var covered = 0, end = -1;
  for (var j = 0; j < spans.length; j++) {
    var s = Math.max(spans[j][0], end);
    if (spans[j][1] > s) { covered += spans[j][1] - s; end = spans[j][1]; }
  }
  matched.textContent = text === "" ? " " : "Matched: " + (100 * covered).toFixed(1) + "%";
}
"""
