"""The live view (``run --foxglove``, the mcap sink's ``live``) checked by clients we did not
write the server for: a client written here from the public spec (github.com/foxglove/ws-protocol
docs/spec.md) on the ``websockets`` package, under both subprotocol names, and Foxglove's own npm
client (``@foxglove/ws-protocol`` on Node, tests/foxglove_client/) connected before a real run.
Both must receive every frame, frame 0 included; a late joiner gets the latest calibration and
transforms at once."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from mcap.reader import make_reader
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from cuvil_perception.graph import FrameInfo, Pipeline, RunContext
from cuvil_perception.ops.mcap_sink import INPUTS

REPO = Path(__file__).resolve().parents[1]
DRIVE = REPO / "datasets" / "sample_drive"
NODE_CLIENT = Path(__file__).resolve().parent / "foxglove_client"
T0 = 1_767_268_800_000_000_000
STEP = 100_000_000
FRAMES = 6
WIRED = ("detections", "P2", "R0_rect", "Tr_velo_to_cam")
TOPICS = {"/cuvil/camera/detections": "foxglove.ImageAnnotations",
          "/cuvil/camera/calibration": "foxglove.CameraCalibration",
          "/cuvil/tf": "foxglove.FrameTransforms"}


def _live_sink():
    """An opened mcap sink serving live on a free port, fed directly by the test."""
    p = Pipeline("t")
    drive = p.add("drive", "replay", path=str(DRIVE))
    p.add("fx", "mcap", inputs={"P2": drive.out("P2")}, live="127.0.0.1:0")
    stage = p.validate().stage("fx")
    op = stage.op_cls(dict(stage.resolved_params), {n: INPUTS[n] for n in WIRED})
    op.open(RunContext())
    return op, op._channels.server


def _inputs(k: int) -> dict[str, np.ndarray]:
    p2 = np.zeros((3, 4))
    p2[:, :3] = np.eye(3) * (700.0 + k)
    rows = [[10, 20, 110, 90, 0.9, 0], [5, 5, 50, 60, 0.5, 2]][:1 + k % 2]
    return {"detections": np.float32(rows), "P2": p2, "R0_rect": np.eye(3),
            "Tr_velo_to_cam": np.eye(3, 4)}


def _handshake(ws) -> dict[int, dict]:
    """serverInfo then advertise, as the spec orders them; channel id -> channel."""
    info = json.loads(ws.recv(timeout=10))
    assert info["op"] == "serverInfo" and info["capabilities"] == []
    advertise = json.loads(ws.recv(timeout=10))
    assert advertise["op"] == "advertise"
    return {c["id"]: c for c in advertise["channels"]}


def _subscribe(ws, channels: dict[int, dict], first_id: int = 100) -> dict[int, dict]:
    subs = {first_id + i: c for i, c in enumerate(channels.values())}
    ws.send(json.dumps({"op": "subscribe", "subscriptions": [
        {"id": sub, "channelId": c["id"]} for sub, c in subs.items()]}))
    return subs


def _message_data(raw: bytes) -> tuple[int, int, bytes]:
    """Binary Message Data: opcode 0x01, subscription id u32 LE, log time u64 LE, payload."""
    assert isinstance(raw, bytes) and raw[0] == 1, raw[:1]
    sub, log_ns = struct.unpack_from("<IQ", raw, 1)
    return sub, log_ns, raw[13:]


def _decoder(channel: dict):
    """The protobuf class the advertised schema (base64 FileDescriptorSet) defines."""
    import base64

    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel["schema"]))
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(channel["schemaName"]))


@pytest.mark.parametrize("subprotocol", ["foxglove.websocket.v1", "foxglove.sdk.v1"])
def test_a_spec_client_there_before_frame0_gets_every_frame(subprotocol):
    op, server = _live_sink()
    try:
        with connect(f"ws://127.0.0.1:{server.port}", subprotocols=[subprotocol],
                     open_timeout=10) as ws:
            assert ws.subprotocol == subprotocol
            channels = _handshake(ws)  # every channel, before any frame was logged
            assert {c["topic"]: c["schemaName"] for c in channels.values()} == TOPICS
            assert {c["encoding"] for c in channels.values()} == {"protobuf"}
            subs = _subscribe(ws, channels)
            assert server.wait_for_subscriber(10)
            for k in range(FRAMES):
                op.process(_inputs(k), FrameInfo(k, T0 + k * STEP))
            op.close()  # sends what is queued, then closes the connection
            got: dict[str, list] = {}
            try:
                while True:
                    sub, log_ns, payload = _message_data(ws.recv(timeout=10))
                    got.setdefault(subs[sub]["topic"], []).append((log_ns, payload))
            except ConnectionClosed:
                pass
        stamps = [T0 + k * STEP for k in range(FRAMES)]
        assert {t: [ns for ns, _ in m] for t, m in got.items()} == {t: stamps for t in TOPICS}
        annotations = _decoder(next(c for c in channels.values()
                                    if c["topic"] == "/cuvil/camera/detections"))
        counts = [len(annotations.FromString(p).points) for _, p in
                  got["/cuvil/camera/detections"]]
        assert counts == [1 + k % 2 for k in range(FRAMES)]  # one rectangle per detection
    finally:
        op.close()


def test_a_late_joiner_gets_the_latest_calibration_and_transforms_at_once():
    op, server = _live_sink()
    try:
        for k in range(3):
            op.process(_inputs(k), FrameInfo(k, T0 + k * STEP))
        with connect(f"ws://127.0.0.1:{server.port}", subprotocols=["foxglove.websocket.v1"],
                     open_timeout=10) as ws:
            channels = _handshake(ws)
            subs = _subscribe(ws, channels)
            latched = {}
            for _ in range(2):  # before any new frame: calibration and tf, as of frame 2
                sub, log_ns, payload = _message_data(ws.recv(timeout=10))
                latched[subs[sub]["topic"]] = (log_ns, payload)
            assert {t: ns for t, (ns, _) in latched.items()} == {
                "/cuvil/camera/calibration": T0 + 2 * STEP, "/cuvil/tf": T0 + 2 * STEP}
            calibration = _decoder(next(c for c in channels.values()
                                        if c["topic"] == "/cuvil/camera/calibration"))
            assert calibration.FromString(latched["/cuvil/camera/calibration"][1]).K[0] == 702
            with pytest.raises(TimeoutError):  # detections are not latched
                ws.recv(timeout=0.3)
            op.process(_inputs(3), FrameInfo(3, T0 + 3 * STEP))
            fresh = sorted(subs[_message_data(ws.recv(timeout=10))[0]]["topic"]
                           for _ in range(3))
            assert fresh == sorted(TOPICS)
    finally:
        op.close()


def test_other_subprotocols_are_refused_and_bad_subscriptions_answered_with_a_status():
    op, server = _live_sink()
    try:
        with pytest.raises(InvalidStatus) as refused:
            connect(f"ws://127.0.0.1:{server.port}", subprotocols=["foxglove.websocket.v2"],
                    open_timeout=10)
        assert refused.value.response.status_code == 400
        with connect(f"ws://127.0.0.1:{server.port}", subprotocols=["foxglove.sdk.v1"],
                     open_timeout=10) as ws:
            channels = _handshake(ws)
            first = next(iter(channels))
            ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                {"id": 1, "channelId": first}, {"id": 1, "channelId": first},
                {"id": 2, "channelId": 999}]}))
            ws.send(json.dumps({"op": "getParameters", "parameterNames": []}))
            statuses = [json.loads(ws.recv(timeout=10)) for _ in range(3)]
            assert [(s["op"], s["level"]) for s in statuses] == [("status", 2)] * 2 + \
                [("status", 1)]
            assert "in use" in statuses[0]["message"] and "999" in statuses[1]["message"]
            assert "getParameters" in statuses[2]["message"]
    finally:
        op.close()


@pytest.fixture(scope="session")
def node_client() -> Path:
    """tests/foxglove_client with its npm packages, as its package-lock.json pins them (``make
    node-client`` installs them; done here once when missing: CI reaches the npm registry)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("needs Node.js and npm (the independent client is Foxglove's npm package)")
    if not (NODE_CLIENT / "node_modules" / "@foxglove" / "ws-protocol").is_dir():
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_CLIENT,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"npm install in {NODE_CLIENT} failed:\n{done.stderr}"
    return NODE_CLIENT


def test_foxglove_npm_client_connected_before_a_run_gets_every_frame(node_client, tmp_path):
    """A real run (replay, 4 frames) serving live with ``live_wait``; Foxglove's npm client
    connects before frame 0 and subscribes to everything; what it receives is what the run's
    MCAP file holds, topic by topic and log time by log time."""
    frames = 4
    (tmp_path / "p.yaml").write_text(
        "pipeline: live\nstages:\n"
        f"  - {{id: drive, op: replay, params: {{path: {DRIVE}}}}}\n"
        "  - id: fx\n    op: mcap\n    inputs: {image: drive/image, points: drive/points, "
        "P2: drive/P2, R0_rect: drive/R0_rect, Tr_velo_to_cam: drive/Tr_velo_to_cam}\n"
        "    params: {path: out.mcap, live: '127.0.0.1:0', live_wait: 120}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    run = subprocess.Popen([sys.executable, "-m", "cuvil_perception", "run",
                            str(tmp_path / "p.yaml"), "--frames", str(frames)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    client = None
    try:
        url = _served_url(run)
        client = subprocess.Popen(["node", "client.mjs", url, "120"], cwd=node_client,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = client.stdout.readline()  # its subscription, or its end when it failed
        assert first.startswith('{"subscribed"'), first + client.stdout.read() + \
            client.stderr.read()
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, out + err
        rest, client_err = client.communicate(timeout=60)
        assert client.returncode == 0, rest + client_err
        received = first + rest
    finally:
        for process in (run, client):
            if process is not None and process.poll() is None:
                process.kill()
    lines = received.strip().splitlines()
    assert json.loads(lines[0]) == {"subscribed": 6}  # image, cloud, calib, tf, timings
    result = json.loads(lines[-1])
    assert result["subprotocol"] == "foxglove.websocket.v1"
    assert result["serverInfo"]["name"] == "cuvil-perception"
    with open(tmp_path / "out.mcap", "rb") as f:
        written: dict[str, list[str]] = {}
        for _, channel, message in make_reader(f).iter_messages(log_time_order=False):
            written.setdefault(channel.topic, []).append(str(message.log_time))
    assert len(written["/cuvil/points"]) == frames
    assert result["messages"].pop("/cuvil/deadlines") == []  # advertised; none in this run
    assert result["messages"] == written
    assert [m["frame"] for m in result["json"]["/cuvil/latency"]] == list(range(frames))


def _served_url(run: subprocess.Popen) -> str:
    """The ``ws://`` URL from the run's "Foxglove live view:" line (stderr)."""
    seen = []
    for line in run.stderr:
        seen.append(line)
        if "Foxglove live view: ws://" in line:
            return line.split("Foxglove live view: ", 1)[1].split()[0]
    raise AssertionError("the run never printed its live view URL:\n" + "".join(seen))


def test_a_slow_client_loses_its_oldest_data_never_control_messages_and_is_told():
    """publish() never waits on a socket: a client's queue holds QUEUE messages, and when it is
    full the oldest data message goes (counted), control messages stay, one warning status."""
    from cuvil_perception.ops.foxglove_server import QUEUE, _Client

    client = _Client(conn=None, number=1)  # no sender running: nothing leaves the queue
    client.push('{"op": "serverInfo"}', data=False)
    for k in range(QUEUE + 5):
        client.push(struct.pack("<BIQ", 1, 0, k))
    kept = list(client.queue)
    assert client.dropped == 6 and len(kept) == QUEUE + 1  # + the warning status
    assert kept[0] == (False, '{"op": "serverInfo"}')
    statuses = [json.loads(m) for is_data, m in kept if not is_data][1:]
    assert [(s["op"], s["level"]) for s in statuses] == [("status", 1)]
    stamps = [struct.unpack_from("<Q", m, 5)[0] for is_data, m in kept if is_data]
    assert stamps == list(range(6, QUEUE + 5))  # the newest, in order


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_servers_threads_have_os_names():
    op, server = _live_sink()
    try:
        with connect(f"ws://127.0.0.1:{server.port}", subprotocols=["foxglove.sdk.v1"],
                     open_timeout=10) as ws:
            _handshake(ws)
            names = {(task / "comm").read_text().strip()
                     for task in Path("/proc/self/task").iterdir()}
            assert {"cuvil-fox-srv", "cuvil-fox-rx1", "cuvil-fox-tx1"} <= names, names
    finally:
        op.close()
