// An independent Foxglove WebSocket client for tests/test_foxglove_live.py: Foxglove's own npm
// client (@foxglove/ws-protocol, which offers the spec's subprotocol "foxglove.websocket.v1")
// on Node's `ws`. Usage: node client.mjs ws://HOST:PORT [TIMEOUT_S]
// Subscribes to every advertised channel at once and prints one JSON line "subscribed"; when
// the server closes the connection, prints one JSON line with what it received and exits 0
// (exit 1 on error or timeout, with what it had).
import wsProtocol from "@foxglove/ws-protocol"; // a CommonJS package: no named exports
import { WebSocket } from "ws";

const { FoxgloveClient } = wsProtocol;

const [url, timeoutText = "120"] = process.argv.slice(2);
const result = { subprotocol: null, serverInfo: null, channels: [], statuses: [], messages: {},
                 json: {} };
const topics = new Map();
const ws = new WebSocket(url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
const client = new FoxgloveClient({ ws });

function finish(code, error) {
  if (error) result.error = String(error);
  process.stdout.write(JSON.stringify(result) + "\n", () => process.exit(code));
}

setTimeout(() => finish(1, "timed out"), Number(timeoutText) * 1000);
client.on("open", () => { result.subprotocol = ws.protocol; });
client.on("serverInfo", (info) => { result.serverInfo = info; });
client.on("status", (status) => { result.statuses.push(status); });
client.on("advertise", (channels) => {
  for (const channel of channels) {
    result.channels.push(channel);
    const subscription = client.subscribe(channel.id);
    topics.set(subscription, channel);
    result.messages[channel.topic] = [];
  }
  process.stdout.write(JSON.stringify({ subscribed: channels.length }) + "\n");
});
client.on("message", ({ subscriptionId, timestamp, data }) => {
  const channel = topics.get(subscriptionId);
  if (channel === undefined) return finish(1, `message on unknown subscription ${subscriptionId}`);
  result.messages[channel.topic].push(timestamp.toString());
  if (channel.encoding === "json") {
    const text = new TextDecoder().decode(data);
    (result.json[channel.topic] ??= []).push(JSON.parse(text));
  }
});
client.on("error", (error) => finish(1, error?.message ?? error));
client.on("close", () => finish(0));
