"""The mcap sink read back with the mcap reader (every frame, schema names, decoded values), a
file cut by kill -9 mid-write, the live Foxglove WebSocket server, and run --foxglove wiring."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap.exceptions import EndOfFile
from mcap.records import Channel, Message
from mcap.stream_reader import StreamReader
from mcap_protobuf.decoder import DecoderFactory

from cuvil_perception.cli.live_view import LIVE_STAGE, apply_foxglove
from cuvil_perception.errors import UsageError
from cuvil_perception.graph import FrameInfo, Pipeline, RunContext, load_pipeline
from cuvil_perception.ops.mcap_sink import INPUTS
from cuvil_perception.rt import RunOptions, run_pipeline

REPO = Path(__file__).resolve().parents[1]
DRIVE = REPO / "datasets" / "sample_drive"
SENSORS = ("image", "points", "P2", "R0_rect", "Tr_velo_to_cam")
T0 = 1_767_268_800_000_000_000


def _sink(tmp_path, inputs=("boxes", "scores", "labels", "detections", "objects"), **params):
    """An opened mcap sink whose ``inputs`` are fed directly by the test (params resolved and
    checked by a pipeline that wires the sink to a replay stage)."""
    p = Pipeline("t")
    drive = p.add("drive", "replay", path=str(DRIVE))
    p.add("fx", "mcap", inputs={"P2": drive.out("P2")}, **params)
    stage = p.validate().stage("fx")
    op = stage.op_cls(dict(stage.resolved_params), {n: INPUTS[n] for n in inputs})
    op.open(RunContext())
    return op


def _frame_inputs(k: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(k)
    boxes = np.column_stack([rng.uniform(5, 40, (3, 3)), np.full((3, 3), 2.0),
                             np.zeros(3)]).astype(np.float32)
    objects = np.zeros((2, 15), np.float32)
    objects[:, 0], objects[:, 1:8], objects[:, 8:12] = (0, 1), boxes[:2], (10, 20, 110, 90)
    objects[:, 14] = (3, 2)
    return {"boxes": boxes, "scores": np.float32([0.9, 0.8, 0.7]),
            "labels": np.int32([0, 1, 2]), "objects": objects,
            "detections": np.float32([[10, 20, 110, 90, 0.95, 0], [5, 5, 50, 60, 0.5, 2]])}


def _summary(path: Path):
    with open(path, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        counts = summary.statistics.channel_message_counts
        return {c.topic: (summary.schemas[c.schema_id].name, counts.get(c.id, 0))
                for c in summary.channels.values()}


def test_every_frame_with_foxglove_schemas_and_decoded_values(tmp_path):
    path = tmp_path / "out.mcap"
    op = _sink(tmp_path, path=str(path))
    for k in range(5):
        op.process(_frame_inputs(k), FrameInfo(k, T0 + k * 100_000_000))
    op.close()
    topics = _summary(path)
    assert topics == {"/cuvil/boxes": ("foxglove.SceneUpdate", 5),
                      "/cuvil/objects": ("foxglove.SceneUpdate", 5),
                      "/cuvil/camera/objects": ("foxglove.ImageAnnotations", 5),
                      "/cuvil/camera/detections": ("foxglove.ImageAnnotations", 5)}
    with open(path, "rb") as f:
        decoded = list(make_reader(f, decoder_factories=[DecoderFactory()])
                       .iter_decoded_messages(topics=["/cuvil/boxes", "/cuvil/camera/detections"]))
    boxes = [d for _, c, _, d in decoded if c.topic == "/cuvil/boxes"]
    first = boxes[0].entities[0]
    assert first.frame_id == "velo_link" and len(first.cubes) == 3
    assert first.cubes[0].pose.position.x == pytest.approx(_frame_inputs(0)["boxes"][0, 0])
    assert [t.text for t in first.texts] == ["car 0.90", "pedestrian 0.80", "cyclist 0.70"]
    detections = [d for _, c, _, d in decoded if c.topic == "/cuvil/camera/detections"][0]
    assert len(detections.points) == 2 and detections.points[0].points[2].x == 110
    assert [m.log_time for _, c, m, _ in decoded if c.topic == "/cuvil/boxes"] == \
        [T0 + k * 100_000_000 for k in range(5)]


def test_a_run_writes_sensors_transforms_and_per_stage_latency(tmp_path):
    p = Pipeline("run")
    drive = p.add("drive", "replay", path=str(DRIVE))
    p.add("fx", "mcap", inputs={k: drive.out(k) for k in SENSORS}, path=str(tmp_path / "r.mcap"))
    result = run_pipeline(p.validate(), RunOptions(workers=1, enforce_deadlines=False,
                                                   write_record=False))
    topics = _summary(tmp_path / "r.mcap")
    assert topics["/cuvil/camera/image"] == ("foxglove.CompressedImage", 8)
    assert topics["/cuvil/points"] == ("foxglove.PointCloud", 8)
    assert topics["/cuvil/camera/calibration"] == ("foxglove.CameraCalibration", 8)
    assert topics["/cuvil/tf"] == ("foxglove.FrameTransforms", 8)
    assert topics["/cuvil/latency"] == ("cuvil.FrameTimings", 8)
    with open(tmp_path / "r.mcap", "rb") as f:
        latency = [json.loads(m.data) for _, _, m in make_reader(f).iter_messages(
            topics=["/cuvil/latency"])]
    assert [m["frame"] for m in latency] == list(range(8)) and result.frames == 8
    assert set(latency[0]["stages"]) == {"drive", "fx"} and latency[0]["e2e_ms"] > 0


def test_kill_9_mid_write_leaves_every_flushed_frame_readable(tmp_path):
    path = tmp_path / "killed.mcap"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_mcap_sink import _sink, _frame_inputs, T0
        from cuvil_perception.graph import FrameInfo
        op = _sink(None, path={str(path)!r})
        for k in range(1000):
            op.process(_frame_inputs(k), FrameInfo(k, T0 + k * 100_000_000))
            print(k, flush=True)
            time.sleep(0.02)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=REPO)
    try:
        for line in proc.stdout:
            if int(line) >= 5:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert path.read_bytes()[-8:] != b"\x89MCAP0\r\n"  # never closed: no footer, no index
    frames: dict[str, set[int]] = {}
    with open(path, "rb") as f:  # the non-seeking reader, up to the first incomplete record
        reader = StreamReader(f)
        topics = {}
        with pytest.raises(EndOfFile):
            for record in reader.records:
                if isinstance(record, Channel):
                    topics[record.id] = record.topic
                if isinstance(record, Message):
                    frames.setdefault(topics[record.channel_id], set()).add(record.log_time)
    assert len(frames) == 4  # boxes, objects, detections, objects on the camera
    for topic, stamps in frames.items():  # every frame printed before the kill, each topic
        assert {T0 + k * 100_000_000 for k in range(6)} <= stamps, topic


def test_live_server_answers_a_websocket_client(tmp_path):
    from websockets.sync.client import connect

    op = _sink(tmp_path, inputs=("detections",), live="127.0.0.1:0")
    port = op._channels.server_port
    try:
        with connect(f"ws://127.0.0.1:{port}", subprotocols=["foxglove.sdk.v1"],
                     open_timeout=10) as ws:
            assert json.loads(ws.recv(timeout=10))["op"] == "serverInfo"
            inputs = {"detections": _frame_inputs(0)["detections"]}
            op.process(inputs, FrameInfo(0, T0))
            advertised = json.loads(ws.recv(timeout=10))
            assert advertised["op"] == "advertise"
            channel = advertised["channels"][0]
            assert (channel["topic"], channel["schemaName"]) == \
                ("/cuvil/camera/detections", "foxglove.ImageAnnotations")
            ws.send(json.dumps({"op": "subscribe",
                                "subscriptions": [{"id": 7, "channelId": channel["id"]}]}))
            data = None
            for k in range(1, 50):  # the subscription lands asynchronously: log until it does
                op.process(inputs, FrameInfo(k, T0 + k))
                try:
                    data = ws.recv(timeout=0.2)
                    break
                except TimeoutError:
                    continue
            assert isinstance(data, bytes) and data[0] == 1  # opcode MessageData
            subscription, log_time = struct.unpack_from("<IQ", data, 1)
            assert subscription == 7 and T0 < log_time < T0 + 50
    finally:
        op.close()


def test_run_foxglove_wires_a_live_stage_by_roles():
    p = load_pipeline(REPO / "configs" / "fusion.yaml")
    apply_foxglove(p, "127.0.0.1:0")  # its mcap stage serves live too; nothing is added
    assert p.stage("foxglove").params["live"] == "127.0.0.1:0"
    assert LIVE_STAGE not in {s.id for s in p.stages}
    p.stages = [s for s in p.stages if s.op != "mcap"]
    p.validate()
    apply_foxglove(p, "127.0.0.1:0")
    live = p.stage(LIVE_STAGE)
    assert live.params == {"live": "127.0.0.1:0"}
    assert {k: str(v) for k, v in live.inputs.items()} == {
        "image": "drive/image", "points": "drive/points", "P2": "drive/P2",
        "R0_rect": "drive/R0_rect", "Tr_velo_to_cam": "drive/Tr_velo_to_cam",
        "detections": "yolo/detections", "boxes": "pillars/boxes",
        "scores": "pillars/scores", "labels": "pillars/labels", "objects": "fusion/objects"}


def test_never_writes_over_a_file_it_did_not_make(tmp_path):
    victim = tmp_path / "notes.mcap"
    victim.write_text("precious")
    with pytest.raises(UsageError, match="exists and is not an output of cuvil-perception"):
        _sink(tmp_path, path=str(victim))
    assert victim.read_text() == "precious"


def test_deadline_decisions_and_latency_get_their_own_topics(tmp_path):
    import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
    from cuvil_perception.testing.clock import FakeClock

    p = Pipeline("deadlines")
    src = p.add("src", "test.scripted", frames=6)
    cost = p.add("cost", "test.cost", inputs={"x": src.out("value")}, cost_ms=[5.0, 50.0],
                 deadline_ms=20, on_miss="reuse_last")
    p.add("fx", "mcap", inputs={"scores": cost.out("y")}, path=str(tmp_path / "d.mcap"))
    result = run_pipeline(p.validate(), RunOptions(workers=1, clock=FakeClock(),
                                                   enforce_deadlines=True, write_record=False))
    assert result.actions == {"reuse_last": 3}
    assert _summary(tmp_path / "d.mcap") == {"/cuvil/latency": ("cuvil.FrameTimings", 6),
                                             "/cuvil/deadlines": ("cuvil.DeadlineDecisions", 3)}
    with open(tmp_path / "d.mcap", "rb") as f:
        messages = {}
        for _, channel, message in make_reader(f).iter_messages():
            messages.setdefault(channel.topic, []).append(json.loads(message.data))
    decisions = messages["/cuvil/deadlines"]
    assert [d["frame"] for d in decisions] == [1, 3, 5]
    assert decisions[0]["decisions"][0]["stage"] == "cost"
    assert decisions[0]["decisions"][0]["action"] == "reuse_last"
    latency = {m["frame"]: m["stages"]["cost"] for m in messages["/cuvil/latency"]}
    assert latency[1]["outcome"] == "miss:reuse_last" and latency[1]["ms"] == 50.0
    assert latency[0] == {**latency[0], "outcome": "ok", "ms": 5.0}


def test_run_foxglove_end_to_end_serves_while_the_run_goes(tmp_path):
    from click.testing import CliRunner

    from cuvil_perception.cli.app import cli

    (tmp_path / "p.yaml").write_text(
        "pipeline: live\nstages:\n"
        f"  - {{id: drive, op: replay, params: {{path: {DRIVE}}}}}\n"
        "  - {id: log, op: jsonl, inputs: {points: drive/points}, params: {path: o.jsonl}}\n")
    result = CliRunner().invoke(cli, ["run", str(tmp_path / "p.yaml"), "--frames", "2",
                                      "--foxglove", "127.0.0.1:0"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Foxglove live view: ws://127.0.0.1:" in result.stderr
    assert "foxglove_live" in result.stdout  # the live stage's row in the timing table
