"""``run --metrics``: the Prometheus endpoint scraped during and after a replay of the sample
drive; its counts equal the run record's."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cuvil_perception.cli import main
from cuvil_perception.errors import UsageError
from cuvil_perception.graph import Pipeline
from cuvil_perception.rt import RunOptions, read_record, run_pipeline
from cuvil_perception.rt.metrics_server import MetricsServer, parse_address


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
                              RunOptions(workers=2, monitor=server.metrics, progress=progress,
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
