"""``run --metrics``: the Prometheus endpoint scraped during and after a replay of the sample
drive; its counts equal the run record's."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cuvil_perception import __version__
from cuvil_perception.cli import main
from cuvil_perception.errors import UsageError
from cuvil_perception.graph import Pipeline
from cuvil_perception.rt import RunOptions, read_record, run_pipeline
from cuvil_perception.machine_info import cpu
from cuvil_perception.rt.metrics import _Histogram, latency_buckets
from cuvil_perception.rt.metrics_server import MetricsServer, parse_address, serve_for_run


def replay_pipeline(repo_root, out) -> Pipeline:
    """Replay -> crop (a deadline every frame misses: one drop decision per frame) -> jsonl."""
    p = Pipeline("metrics")
    drive = p.add("drive", "replay", path=str(repo_root / "datasets" / "sample_drive"))
    crop = p.add("crop", "lidar.crop", inputs={"points": drive.out("points")},
                 deadline_ms=1e-6, on_miss="drop")
    p.add("out", "jsonl", inputs={"points": crop.out("points")}, path=str(out))
    return p.validate()


def scrape(url: str) -> dict:
    """{(metric sample name, sorted labels): value}."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_scrape_during_and_after_a_replay_matches_the_record(repo_root, tmp_path):
    server = MetricsServer("127.0.0.1:0")
    during = {}

    def progress(done: int, total: int) -> None:
        if done == 3:
            during.update(scrape(server.url))

    try:
        result = run_pipeline(replay_pipeline(repo_root, tmp_path / "out.jsonl"),
                              RunOptions(workers=2, monitors=(server.metrics,), progress=progress,
                                         enforce_deadlines=True,
                                         record=tmp_path / "record.json"))
        after = scrape(server.url)
    finally:
        server.close()
    record = read_record(result.record_path)
    assert during[("cuvil_frames_out_total", ())] == 3
    assert during[("cuvil_frames_in_total", ())] >= 3
    assert after[("cuvil_frames_out_total", ())] == record["frames"] == 8
    assert after[("cuvil_frames_in_total", ())] == record["frames"]
    for stage in ("drive", "crop", "out"):
        timings = [t for t in record["timings"] if t["stage"] == stage]
        key = ("cuvil_stage_latency_seconds_count", (("stage", stage), ("variant", "normal")))
        assert after.get(key, 0) == len(timings), stage
        assert during.get(key, 0) <= len(timings)
    for action, count in record["actions"].items():
        key = ("cuvil_deadline_decisions_total",
               (("kind", "deadline_miss"), ("policy", action), ("stage", "crop")))
        assert after[key] == count
    dropped = {d["frame"] for d in record["decisions"] if d["action"] == "drop"}
    assert after[("cuvil_frames_dropped_total", (("reason", "deadline_drop"),))] == \
        len(dropped) == record["actions"]["drop"] == 8
    assert after[("cuvil_frames_dropped_total", (("reason", "live_skip"),))] == \
        record["live_skipped"]
    assert after[("cuvil_compiles_after_frame0_total", ())] == \
        record["compile"]["compiles_after_frame0"] == 0
    assert after[("cuvil_e2e_latency_seconds_count", ())] == len(record["e2e"])
    assert after[("cuvil_frame_sensor_age_seconds_count", ())] == len(record["e2e"])
    assert after[("cuvil_queue_depth", (("queue", "in_flight"),))] == 0


@pytest.mark.parametrize("text, want", [("9100", ("127.0.0.1", 9100)),
                                        ("0.0.0.0:9100", ("0.0.0.0", 9100)),
                                        ("[::1]:9100", ("::1", 9100))])
def test_addresses(text, want):
    assert parse_address(text) == want


@pytest.mark.parametrize("text", ["", "abc", "host:", ":9100", "70000", "1.2.3.4:-1", "[::1]",
                                  "9100.5", "nan"])
def test_bad_addresses_are_usage_errors(text):
    with pytest.raises(UsageError, match="--metrics"):
        parse_address(text)


def test_cli_bad_metrics_address_exits_2(repo_root, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", str(repo_root / "configs" / "demo.yaml"), "--frames", "1", "--metrics",
              "localhost:http"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--metrics 'localhost:http'" in err and "Traceback" not in err


def test_port_in_use_is_a_usage_error():
    first = MetricsServer("127.0.0.1:0")
    try:
        with pytest.raises(UsageError, match="cannot listen"):
            MetricsServer(f"127.0.0.1:{first.port}")
    finally:
        first.close()


# --- from the first scrape to the linger, and what a scrape says about itself ----------------

PROMTOOL = shutil.which("promtool")
DASHBOARD = Path(__file__).resolve().parents[1] / "docs" / "grafana-dashboard.json"


def scrape_text(url: str) -> str:
    return urllib.request.urlopen(url, timeout=5).read().decode()


def run_state(samples: dict) -> str:
    states = [dict(labels)["state"] for (name, labels), value in samples.items()
              if name == "cuvil_run_state" and value == 1]
    assert len(states) == 1, states
    return states[0]


def promtool_accepts(text: str) -> None:
    """``promtool check metrics`` (Debian's prometheus package) finds no problem in a scrape."""
    if PROMTOOL is None:
        return
    done = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), \
        (done.stdout, done.stderr)


@pytest.fixture(scope="module")
def scrapes(repo_root, tmp_path_factory) -> dict:
    """Scrape texts of one replay: before the run (starting), at frame 3 (running), after it
    (finished), keyed by state."""
    tmp = tmp_path_factory.mktemp("scrapes")
    server = MetricsServer("127.0.0.1:0", "metrics")
    texts = {"starting": scrape_text(server.url)}

    def progress(done: int, total: int) -> None:
        if done == 3:
            texts["running"] = scrape_text(server.url)

    try:
        run_pipeline(replay_pipeline(repo_root, tmp / "out.jsonl"),
                     RunOptions(workers=2, monitors=(server.metrics,), progress=progress,
                                enforce_deadlines=True))
        texts["finished"] = scrape_text(server.url)
    finally:
        server.close()
    return texts


@pytest.mark.parametrize("state", ["starting", "running", "finished"])
def test_every_scrape_names_its_state_build_and_process(scrapes, state):
    text = scrapes[state]
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert run_state(samples) == state
    (build,) = [dict(labels) for name, labels in samples if name == "cuvil_build_info"]
    assert build == {"version": __version__, "pipeline": "metrics", "cpu": cpu().model,
                     "isa": cpu().isa}
    names = {name for name, _ in samples}
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
            "python_info"} <= names
    assert ("cuvil_frames_out_total" in names) == (state != "starting")
    promtool_accepts(text)


def test_every_metric_has_the_type_its_values_behave_as(scrapes):
    types = {f.name: f.type for f in text_string_to_metric_families(scrapes["finished"])}
    want = {"cuvil_frames_in": "counter", "cuvil_frames_out": "counter",
            "cuvil_frames_dropped": "counter", "cuvil_deadline_decisions": "counter",
            "cuvil_compiles_after_frame0": "counter", "process_cpu_seconds": "counter",
            "cuvil_stage_latency_seconds": "histogram", "cuvil_e2e_latency_seconds": "histogram",
            "cuvil_frame_sensor_age_seconds": "histogram", "cuvil_queue_depth": "gauge",
            "cuvil_run_state": "gauge", "cuvil_build_info": "gauge"}
    assert {name: types.get(name) for name in want} == want
    cuvil = {name for name in types if name.startswith("cuvil_")}
    assert cuvil == {name for name in want if name.startswith("cuvil_")}, "a new metric: type it"


@pytest.mark.parametrize("budget_ms, top", [(None, 10.0), (100.0, 10.0), (2500.0, 25.0),
                                            (5000.0, 50.0), (2600.0, 50.0)])
def test_buckets_reach_ten_times_the_e2e_budget(budget_ms, top):
    buckets = latency_buckets(budget_ms)
    assert buckets[0] == 0.0001 and buckets[-1] == top
    assert list(buckets) == sorted(set(buckets))


def test_a_median_past_2_5_s_reads_past_2_5_s():
    """The issue's case: an e2e median of 2.54 s fell into +Inf and read as 2.5 s."""
    histogram = _Histogram(latency_buckets(None))
    for value in (2.50, 2.54, 2.58):
        histogram.observe((), value)
    (family,) = [histogram.family("x", "x", [])]
    counts = {s.labels["le"]: s.value for s in family.samples if s.name == "x_bucket"}
    assert counts["2.5"] == 1 and counts["5.0"] == 3 and counts["+Inf"] == 3


def test_the_endpoint_lingers_after_the_last_frame_and_ctrl_c_ends_it(repo_root, tmp_path):
    """serve_for_run keeps serving the final counts after the run; SIGINT ends the linger at
    once (the run itself already finished: its outputs are whole)."""
    lingering, seen, texts, notes = threading.Event(), {}, [], []
    options = RunOptions(workers=2)

    def note(message: str) -> None:
        notes.append(message)
        if "--metrics-linger" in message:
            lingering.set()

    def scrape_then_interrupt() -> None:
        lingering.wait(120)
        seen.update(scrape(url))
        texts.append(scrape_text(url))
        os.kill(os.getpid(), signal.SIGINT)

    with serve_for_run("127.0.0.1:0", note, "metrics", 300.0) as server:
        url = server.url
        watcher = threading.Thread(target=scrape_then_interrupt)
        watcher.start()
        run_pipeline(replay_pipeline(repo_root, tmp_path / "out.jsonl"),
                     replace(options, monitors=(server.metrics,)))
    watcher.join()
    assert "closed early" in notes[-1]  # the 300 s linger was cut short by the SIGINT
    assert run_state(seen) == "finished"
    assert seen[("cuvil_frames_out_total", ())] == 8
    promtool_accepts(texts[0])
    with pytest.raises(OSError):
        scrape(url)  # closed


def dashboard_queries() -> list[str]:
    """Every PromQL query of the Grafana dashboard: panel targets and the variable queries."""
    board = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for panel in board["panels"] for t in panel.get("targets", [])]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(variable["definition"])
    return queries


def metric_names(query: str) -> set[str]:
    """The metric names a PromQL query reads: identifiers that are not functions, keywords,
    label names in matchers / grouping clauses, or durations."""
    match = re.fullmatch(r"label_values\((\w+), *\w+\)", query)
    if match:
        return {match.group(1)}
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', query)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    keywords = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
    return {m.group(0) for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text)
            if m.group(0) not in keywords and not text[m.end():].lstrip().startswith("(")}


def test_every_dashboard_query_names_an_exported_metric(scrapes):
    exported = {s.name for family in text_string_to_metric_families(scrapes["finished"])
                for s in family.samples}
    queries = dashboard_queries()
    assert len(queries) >= 15
    for query in queries:
        names = metric_names(query)
        assert names and names <= exported, (query, names - exported)


def test_promtool_parses_every_dashboard_query(tmp_path):
    if PROMTOOL is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    rules = [{"record": f"cuvil:dashboard_{i}",
              "expr": q.replace("$__rate_interval", "1m").replace("$instance", ".*")}
             for i, q in enumerate(dashboard_queries()) if not q.startswith("label_values")]
    path = tmp_path / "rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ctrl_c_ends_the_linger_even_when_a_library_ignores_sigint():
    """Ray's driver and embedding applications replace the SIGINT handler: the linger's
    "Ctrl-C ends it" still holds (and the handler is given back after)."""
    notes, lingering = [], threading.Event()

    def note(message: str) -> None:
        notes.append(message)
        lingering.set() if "--metrics-linger" in message else None

    def interrupt() -> None:
        lingering.wait(60)
        os.kill(os.getpid(), signal.SIGINT)

    # A linger that Ctrl-C did not end would run its 300 s: the watchdog ends it with SIGTERM
    # after 60 s instead, and the test fails on that.
    watchdog = threading.Timer(60.0, os.kill, (os.getpid(), signal.SIGTERM))
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        watcher = threading.Thread(target=interrupt)
        watcher.start()
        watchdog.start()
        with serve_for_run("127.0.0.1:0", note, "metrics", 300.0):
            pass
        watcher.join()
        assert watchdog.is_alive(), "Ctrl-C did not end the linger (the watchdog's SIGTERM did)"
        assert "closed early" in notes[-1]
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        watchdog.cancel()
        signal.signal(signal.SIGINT, previous)
