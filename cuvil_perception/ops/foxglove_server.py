"""The live view's WebSocket server: the Foxglove WebSocket protocol v1 as the public spec
(github.com/foxglove/ws-protocol, ``docs/spec.md``) writes it, under both subprotocol names,
``foxglove.websocket.v1`` (the spec; the npm ``@foxglove/ws-protocol`` client, Lichtblick,
Foxglove Studio before the SDK) and ``foxglove.sdk.v1`` (foxglove-sdk servers and the current
Foxglove app), which name the same messages.

Why not foxglove-sdk's own server: the SDK (0.30) accepts only ``foxglove.sdk.v1`` (a constant
in its handshake, HTTP 400 for any other offer, no option to add one), and it cannot hand one
subscriber the latest calibration (a client's sink id is not exposed). A proxy rewriting the
handshake in front of it would be two servers and a byte splice betting that both names stay
one protocol; this is one server with the subset a viewer of our channels needs. The SDK still
writes the MCAP file (``mcap_channels``); the WebSocket framing is the ``websockets`` package's.

Served: ``serverInfo`` (no optional capabilities), ``advertise`` of every channel as soon as a
client connects (the channels exist from the sink's open(), so a client there before the run
gets frame 0), ``subscribe`` / ``unsubscribe`` (a reused subscription id or an unknown channel
gets an error ``status``, as the spec allows), and binary Message Data: opcode 0x01, subscription
id (uint32 LE), log time (uint64 LE, ns), payload. Latched channels (calibration, transforms:
nothing 3D draws without them) send their latest message to a new subscriber at once, so a late
joiner sees the scene. Requests for capabilities not offered get a warning ``status``.

Slow clients never hold up the run: publish() only queues; each client has a sender thread and
a queue of ``QUEUE`` messages, and when it is full the oldest data message is dropped (counted,
and the client told once by a warning ``status``). close() lets each sender finish its queue
(up to ``DRAIN_S``) so a viewer gets the run's last frames.
"""

from __future__ import annotations

import json
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass

from ..os_threads import name_this_thread

SUBPROTOCOLS = ("foxglove.websocket.v1", "foxglove.sdk.v1")
OP_MESSAGE_DATA = 0x01
QUEUE = 1024  # messages buffered per client (foxglove-sdk's default backlog)
DRAIN_S = 2.0  # how long close() lets a client's queue drain
WARNING, ERROR = 1, 2  # status levels


@dataclass(frozen=True)
class LiveChannel:
    """One advertised channel. ``schema``: base64 FileDescriptorSet (protobuf) or JSON text
    (jsonschema), as the spec's Advertise message carries it."""

    id: int
    topic: str
    encoding: str
    schema_name: str
    schema_encoding: str
    schema: str

    def advert(self) -> dict:
        return {"id": self.id, "topic": self.topic, "encoding": self.encoding,
                "schemaName": self.schema_name, "schema": self.schema,
                "schemaEncoding": self.schema_encoding}


class _Client:
    """One connection: its subscriptions and its outgoing queue (guarded by the server lock
    for subscriptions, by ``cond`` for the queue)."""

    def __init__(self, conn, number: int):
        self.conn, self.number = conn, number
        self.subs: dict[int, int] = {}  # subscription id -> channel id
        self.cond = threading.Condition()
        self.queue: deque[tuple[bool, bytes | str]] = deque()  # (is data, message)
        self.closing = self.warned = False
        self.dropped = 0
        self.sender = threading.Thread(target=self.send_loop, daemon=True,
                                       name=f"cuvil-fox-tx{number}")

    def push(self, message: bytes | str, data: bool = True) -> None:
        with self.cond:
            if len(self.queue) >= QUEUE and not self._drop_oldest_data():
                return  # all control (a client that sends requests and never reads replies)
            self.queue.append((data, message))
            self.cond.notify_all()

    def _drop_oldest_data(self) -> bool:
        for i, (is_data, _) in enumerate(self.queue):
            if is_data:
                del self.queue[i]
                self.dropped += 1
                if not self.warned:
                    self.warned = True
                    self.queue.append((False, _status(WARNING, "client too slow: dropping the "
                                                      "oldest queued messages")))
                return True
        return False

    def send_loop(self) -> None:
        name_this_thread(f"cuvil-fox-tx{self.number}")
        while True:
            with self.cond:
                while not self.queue and not self.closing:
                    self.cond.wait()
                if not self.queue:
                    return
                _, message = self.queue.popleft()
                self.cond.notify_all()
            try:
                self.conn.send(message)
            except Exception:  # the connection closed under us: nothing left to deliver
                return


class LiveServer:
    """Serves ``channels`` at ``host:port`` (port 0: any free one, see ``port``) on its own
    threads; ``publish`` is called from the sink's thread."""

    def __init__(self, host: str, port: int, channels: dict[str, LiveChannel],
                 latched: tuple[str, ...] = (), name: str = "cuvil-perception"):
        from websockets.sync.server import serve

        self.channels = channels
        self._by_id = {c.id: c for c in channels.values()}
        self._latched = {channels[k].id for k in latched if k in channels}
        self._latest: dict[int, tuple[int, bytes]] = {}  # channel id -> (log ns, payload)
        self._clients: list[_Client] = []
        self._lock = threading.Condition()
        self._info = json.dumps({"op": "serverInfo", "name": name, "capabilities": [],
                                 "sessionId": str(time.time_ns())})
        self._accepted = 0
        # no permessage-deflate: the payloads are JPEG / protobuf, and deflating them would cost
        # the sender threads CPU the pipeline needs
        self._server = serve(self._handle, host, port, subprotocols=list(SUBPROTOCOLS),
                             compression=None, max_size=1 << 20,
                             close_timeout=1)
        self.port = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="cuvil-fox-srv", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        name_this_thread("cuvil-fox-srv")
        self._server.serve_forever()

    def _handle(self, conn) -> None:
        with self._lock:
            self._accepted += 1
            client = _Client(conn, self._accepted)
        name_this_thread(f"cuvil-fox-rx{client.number}")
        client.push(self._info, data=False)
        client.push(json.dumps({"op": "advertise",
                                "channels": [c.advert() for c in self._by_id.values()]}),
                    data=False)
        with self._lock:
            self._clients.append(client)
        client.sender.start()
        try:
            for raw in conn:
                self._on_request(client, raw)
        except Exception:  # a dropped connection ends its handler; the run goes on
            pass
        finally:
            with self._lock:
                self._clients.remove(client)
            with client.cond:
                client.closing = True
                client.queue.clear()
                client.cond.notify_all()

    def _on_request(self, client: _Client, raw) -> None:
        try:
            request = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            request = None
        op = request.get("op") if isinstance(request, dict) else None
        if op == "subscribe":
            self._subscribe(client, request.get("subscriptions"))
        elif op == "unsubscribe":
            with self._lock:
                for sub in _list(request.get("subscriptionIds")):
                    client.subs.pop(sub, None)
        else:
            what = op if isinstance(op, str) else "a binary or non-JSON message"
            client.push(_status(WARNING, f"not supported by this server: {what} (it offers "
                                "no optional capabilities)"), data=False)

    def _subscribe(self, client: _Client, subscriptions) -> None:
        with self._lock:
            for entry in _list(subscriptions):
                sub = entry.get("id") if isinstance(entry, dict) else None
                channel = entry.get("channelId") if isinstance(entry, dict) else None
                if not isinstance(sub, int) or channel not in self._by_id:
                    client.push(_status(ERROR, f"subscribe: no channel {channel!r} (or no "
                                        f"integer id) in {entry!r}"), data=False)
                elif sub in client.subs:
                    client.push(_status(ERROR, f"subscribe: subscription id {sub} is in use"),
                                data=False)
                else:
                    client.subs[sub] = channel
                    if channel in self._latest:
                        client.push(_message_data(sub, *self._latest[channel]))
            self._lock.notify_all()

    def publish(self, key: str, payload: bytes, log_ns: int) -> None:
        """Send ``payload`` (the encoded message) on channel ``key`` to its subscribers."""
        channel = self.channels[key].id
        with self._lock:
            if channel in self._latched:
                self._latest[channel] = (int(log_ns), payload)
            for client in self._clients:
                for sub, subscribed in client.subs.items():
                    if subscribed == channel:
                        client.push(_message_data(sub, int(log_ns), payload))

    def wait_for_subscriber(self, timeout_s: float) -> bool:
        """Wait until some client has a subscription (at most ``timeout_s``); True if one has."""
        def subscribed() -> bool:
            return any(c.subs for c in self._clients)

        with self._lock:
            return self._lock.wait_for(subscribed, timeout=timeout_s)

    def dropped(self) -> int:
        """Data messages dropped so far for clients that read too slowly."""
        with self._lock:
            return sum(c.dropped for c in self._clients)

    def close(self) -> None:
        """Let each client's sender send its queue (all within ``DRAIN_S``), then close every
        connection (code 1001, going away) and the listening socket."""
        with self._lock:
            clients = list(self._clients)
        deadline = time.monotonic() + DRAIN_S
        for client in clients:
            with client.cond:
                client.closing = True
                client.cond.notify_all()
            client.sender.join(timeout=max(0.0, deadline - time.monotonic()))
        self._server.shutdown()
        self._thread.join(timeout=DRAIN_S)


def _message_data(sub: int, log_ns: int, payload: bytes) -> bytes:
    return struct.pack("<BIQ", OP_MESSAGE_DATA, sub, log_ns) + payload


def _status(level: int, message: str) -> str:
    return json.dumps({"op": "status", "level": level, "message": message})


def _list(value) -> list:
    return value if isinstance(value, list) else []
