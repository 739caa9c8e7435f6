"""profile's pieces on small hand-made stacks: folded text, the flame graph SVG checked against
the folded stacks it was drawn from, the differential tree and its colours, the table of
changes, speedscope JSON, perf-map naming, the two samplers' output readers, sampler choice."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from cuvil_perception.errors import UsageError
from cuvil_perception.profile import changes, diff_tree, parse_folded
from cuvil_perception.profile import samplers as choose_mod
from cuvil_perception.profile.flamegraph import render
from cuvil_perception.profile.flametree import build
from cuvil_perception.profile.frames import native_frame
from cuvil_perception.profile.output import describe, describe_diff
from cuvil_perception.profile.perf import read_script
from cuvil_perception.profile.perfmap import PerfMap
from cuvil_perception.profile.pyspy import read_raw
from cuvil_perception.profile.speedscope import to_speedscope

SVG = "{http://www.w3.org/2000/svg}"
_DETECT = "cuvil-compute_0;execute (rt/worker.py);PillarsDetect.process (ops/pillars/op.py)"
FOLDED = (f"{_DETECT};cuvil:pillars.pillarize 7\n"
          f"{_DETECT};BevRunner.network (ops/pillars/model.py);[onnxruntime_pybind11_state.so] 20\n"
          f"{_DETECT} 3\n"
          "cuvil-io-drive;Replay.read (ops/replay_camera.py) 10\n")


def frames_of(svg_text: str) -> list[dict]:
    """Each drawn frame: its attributes and its path from the root (from the depth order)."""
    root = ET.fromstring(svg_text)
    out, path = [], []
    for g in root.iter(SVG + "g"):
        if g.get("class") != "f":
            continue
        depth = int(g.get("data-d"))
        path = path[:depth] + [g.get("data-n")]
        out.append({"path": tuple(path), "value": float(g.get("data-v")),
                    "w": float(g.get("data-w")), "x": float(g.get("data-x")),
                    "fill": g.find(SVG + "rect").get("fill"),
                    "title": g.find(SVG + "title").text})
    return out


def test_folded_text_round_trips_and_bad_lines_are_named():
    stacks = parse_folded(FOLDED)
    assert stacks.total == 40
    assert parse_folded(stacks.to_folded()).counts == stacks.counts
    assert stacks.threads() == ["cuvil-compute_0", "cuvil-io-drive"]
    with pytest.raises(ValueError, match="line 2"):
        parse_folded("a;b 1\na;b\n")


def test_threads_with_equal_samples_are_ordered_by_name_whatever_order_they_came_in():
    # the speedscope file and the flame graph both list threads in this order; a re-read
    # folded file (sorted lines) must give the order the recording gave
    lines = ["cuvil-ort-point;x 2", "cuvil-io-log;y 2", "cuvil-compute_0;z 5", "main;w 2"]
    orders = {tuple(parse_folded("\n".join(lines[i:] + lines[:i]) + "\n").threads())
              for i in range(len(lines))}
    assert orders == {("cuvil-compute_0", "cuvil-io-log", "cuvil-ort-point", "main")}


def test_flame_graph_widths_are_the_folded_counts():
    stacks = parse_folded(FOLDED)
    svg = render(build(stacks.counts), "t", describe(stacks))
    drawn = frames_of(svg)
    assert drawn[0]["path"] == ("all",) and drawn[0]["value"] == 40
    for frame in drawn[1:]:
        prefix = frame["path"][1:]
        expected = sum(n for s, n in stacks.counts.items() if s[:len(prefix)] == prefix)
        assert frame["value"] == expected, frame["path"]
        assert frame["w"] == pytest.approx(expected / 40)
    assert {f["path"][-1] for f in drawn} >= {"cuvil:pillars.pillarize",
                                             "[onnxruntime_pybind11_state.so]"}
    # children start where their parent starts and lie inside it
    by_path = {f["path"]: f for f in drawn}
    for f in drawn[1:]:
        parent = by_path[f["path"][:-1]]
        assert parent["x"] - 1e-9 <= f["x"] <= f["x"] + f["w"] <= parent["x"] + parent["w"] + 1e-9


def test_differential_graph_colours_grew_red_and_shrank_blue():
    a = parse_folded("t;f;backbone 30\nt;f;pillarize 5\n", 100.0, 10)
    b = parse_folded("t;f;backbone 10\nt;f;pillarize 9\nt;f;new 1\n", 100.0, 10)
    tree = diff_tree(a, b)
    drawn = {f["path"][-1]: f for f in frames_of(render(tree, "d", describe_diff, diff=True))}
    assert drawn["backbone"]["fill"].startswith("rgb(0,0,255)")  # the largest change
    red = drawn["pillarize"]["fill"]
    assert red.startswith("rgb(255,") and red != "rgb(255,255,255)"
    assert "-20.000 ms" in drawn["backbone"]["title"]
    rows = changes(a, b)
    assert rows[0].name == "backbone" and rows[0].self_delta == pytest.approx(-20.0)
    assert [r.name for r in rows][:3] == ["backbone", "pillarize", "new"]


def test_speedscope_has_one_profile_per_thread_with_the_samples_time():
    stacks = parse_folded(FOLDED, rate_hz=200.0)
    doc = json.loads(to_speedscope(stacks, "x"))
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert [p["name"] for p in doc["profiles"]] == ["cuvil-compute_0", "cuvil-io-drive"]
    compute = doc["profiles"][0]
    assert sum(compute["weights"]) == pytest.approx(30 * 5.0)  # 30 samples of 5 ms
    assert all(0 <= i < len(names) for s in compute["samples"] for i in s)
    assert names[compute["samples"][0][-1]] in ("cuvil:pillars.pillarize", "PillarsDetect."
                                                "process (ops/pillars/op.py)",
                                                "[onnxruntime_pybind11_state.so]")


def test_native_frames_are_named_from_the_perf_map_and_the_library():
    perf_map = PerfMap("7f0000001000 100 cuvil:pillars.pillarize\nbad line\n")
    assert native_frame("0x7f0000001010 (?)", perf_map) == "cuvil:pillars.pillarize"
    assert native_frame("0x7f0000001100 (?)", perf_map) == "[unknown]"  # just past its end
    lib = "onnxruntime/capi/onnxruntime_pybind11_state.cpython-311-x86_64-linux-gnu.so"
    assert native_frame("0x7f00aa (" + lib + ")", perf_map) == "[onnxruntime_pybind11_state.so]"
    assert native_frame("PyUFunc_AddLoop (numpy/_core/_multiarray_umath.cpython-311-x86_64-"
                        "linux-gnu.so)", perf_map) == "PyUFunc_AddLoop (_multiarray_umath.so)"
    assert native_frame("PointPillars.detect (ops/pillars/model.py)", perf_map) == \
        "PointPillars.detect (ops/pillars/model.py)"


def test_py_spy_raw_output_is_read_with_our_thread_names_and_waits_dropped():
    perf_map = PerfMap("1000 100 cuvil:pillars.pfn\n")
    raw = ("thread (41): stale-name;0x7f1 (libc.so.6);Thread.run (threading.py);"
           "Pfn.__call__ (ops/pillars/native.py);0x5 (?);0x1010 (?) 4\n"
           "thread (41): stale-name;Thread.run (threading.py);Queue.get (queue.py);"
           "PyThread_acquire_lock_timed (libpython3.11.so.1.0);0x7f2 (libc.so.6) 9\n"
           "thread (43);0x7f3 (libonnxruntime.so);0x7f4 (libonnxruntime.so) 2\n")
    stacks = read_raw(raw, perf_map, {41: "cuvil-compute_0"}, 100.0)
    assert dict(stacks.counts) == {
        ("cuvil-compute_0", "Thread.run (threading.py)", "Pfn.__call__ (ops/pillars/native.py)",
         "cuvil:pillars.pfn"): 4,
        ("thread 43", "[libonnxruntime.so]"): 2}


def test_perf_script_is_read_leaf_last_with_trampoline_frames_named():
    text = ("cuvil-compute_0 4242\n"
            "\t    7f10 cuvil:pillars.pillarize+0x10 (/tmp/perf-4240.map)\n"
            "\t    5a0 py::PillarsDetect.process:/x/site-packages/cuvil_perception/ops/op.py "
            "(/tmp/perf-4240.map)\n"
            "\t    4f0 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\n"
            "python 4240\n\t    10 [unknown] ([unknown])\n")
    stacks = read_script(text, 100.0)
    assert dict(stacks.counts) == {
        ("cuvil-compute_0", "PillarsDetect.process (cuvil_perception/ops/op.py)",
         "cuvil:pillars.pillarize"): 1,
        ("python", "[unknown]"): 1}


def test_sampler_choice_says_what_to_change_and_falls_back(monkeypatch):
    settings = {"/proc/sys/kernel/yama/ptrace_scope": 2,
                "/proc/sys/kernel/perf_event_paranoid": 2}
    monkeypatch.setattr(choose_mod, "_read_int", settings.get)
    monkeypatch.setattr(choose_mod.pyspy, "executable", lambda: "/bin/py-spy")
    monkeypatch.setattr(choose_mod.perf, "executable", lambda: "/bin/perf")
    warned = []
    assert choose_mod.choose("auto", warned.append, root=True) == "py-spy"
    assert choose_mod.choose("auto", warned.append, root=False) == "perf"
    assert "kernel.yama.ptrace_scope is 2" in warned[0] and "using perf" in warned[0]
    settings["/proc/sys/kernel/perf_event_paranoid"] = 3
    with pytest.raises(UsageError, match="perf_event_paranoid is 3: perf needs 2 or less"):
        choose_mod.choose("perf", warned.append, root=False)
    settings["/proc/sys/kernel/yama/ptrace_scope"] = 1
    warned.clear()
    assert choose_mod.choose("perf", warned.append, root=False) == "py-spy"
    assert warned == ["kernel.perf_event_paranoid is 3: perf needs 2 or less (sudo sysctl "
                      "kernel.perf_event_paranoid=2); using py-spy"]


def test_the_pictures_in_docs_profiling_md_parse_and_name_the_frames():
    """docs/img/*.svg come from `make profile-pictures` (the recordings tests/test_profile.py
    makes too): they parse, and they name what the page says they show."""
    from pathlib import Path

    img = Path(__file__).resolve().parents[1] / "docs" / "img"
    one = {f["path"][-1] for f in frames_of((img / "profile_lidar_pillars.svg").read_text())}
    assert {"cuvil:pillars.pillarize", "cuvil:pillars.pfn", "cuvil-compute_0",
            "PillarsDetect.process (cuvil_perception/ops/pillars/op.py)",
            "[onnxruntime_pybind11_state.so]"} <= one
    diff = frames_of((img / "profile_dense_vs_sparse.svg").read_text())
    backbone = [f for f in diff if f["path"][-1] == "[onnxruntime_pybind11_state.so]"
                and "BevRunner.network (cuvil_perception/ops/pillars/model.py)" in f["path"]]
    # shrank: blue. A recording's tiny stacks (a 0.05 ms input check) may go either way
    blue = sum(f["w"] for f in backbone if f["fill"].endswith(",255)"))
    assert backbone and blue >= 0.95 * sum(f["w"] for f in backbone)


def test_worker_waits_and_run_setup_are_left_out():
    """A worker reading its next command, and each run's prewarm / stage open, are not frames'
    work (`session._without_idle`); the frames' own work stays."""
    from cuvil_perception.profile.session import _without_idle
    from cuvil_perception.profile.stacks import Stacks
    from cuvil_perception.profile.worker import IDLE_FRAME, RUN_FRAME, SETUP_FRAMES

    stacks = Stacks()
    stacks.add(["main", IDLE_FRAME, "read (libc.so.6)"], 50)
    stacks.add(["main", IDLE_FRAME, RUN_FRAME, SETUP_FRAMES[1], "warm_up (ops/warmup.py)"], 20)
    stacks.add(["main", IDLE_FRAME, RUN_FRAME, "_schedule (rt/scheduler.py)"], 3)
    stacks.add(["cuvil-compute_0", "execute (rt/worker.py)", "cuvil:pillars.pfn"], 7)
    assert dict(_without_idle(stacks).counts) == {
        ("main", IDLE_FRAME, RUN_FRAME, "_schedule (rt/scheduler.py)"): 3,
        ("cuvil-compute_0", "execute (rt/worker.py)", "cuvil:pillars.pfn"): 7}
