"""``cuvil-perception bag info BAG``: what ``ros2 bag info`` shows (files, size, storage id, ROS
distro, duration, start and end, message count; per topic type, count, serialization format,
offered QoS), each topic's rate and time span, and which topics a pipeline's ``bag``/``replay``
source would use."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Column, Table

from ..errors import UsageError


def _parse_topics(values: tuple[str, ...]) -> dict[str, str]:
    from ..drives.bag import ROLES

    topics = {}
    for value in values:
        role, sep, topic = value.partition("=")
        if not sep or not role or not topic:
            raise UsageError(f"--topic {value!r}: expected STREAM=TOPIC, e.g. "
                             "points=/velodyne_points")
        if role not in ROLES:  # as the bag op's params.topics check refuses it
            raise UsageError(f"--topic {value!r}: unknown stream '{role}' (streams: "
                             f"{', '.join(ROLES)})")
        topics[role] = topic
    return topics


@click.group("bag")
def bag_group() -> None:
    """Look inside ROS bags (ROS 2 MCAP or sqlite3, ROS 1) and MCAP files."""


@bag_group.command("info")
@click.argument("bag", type=click.Path(exists=True))
@click.option("--topic", "topics", multiple=True, metavar="STREAM=TOPIC",
              help="Choose a stream's topic as params.topics would (points, image, "
                   "camera_info); repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def info_cmd(bag: str, topics: tuple[str, ...], as_json: bool) -> None:
    """What `ros2 bag info` shows of BAG (files, storage id, duration, start, end, message
    counts, serialization format, offered QoS), each topic's rate and time span (reads it once,
    front to back), and the topics a pipeline replaying it would use. Exit 2 when BAG is not a
    bag."""
    from ..drives.bag.info import bag_info
    from ..drives.bag.storage_info import qos_text
    from .run_cmd import wide_console

    info = bag_info(Path(bag), _parse_topics(topics))
    if as_json:
        click.echo(json.dumps(info.as_dict(), indent=2))
        return
    console = wide_console()
    for line in _header(info):
        console.print(line, highlight=False, soft_wrap=True)
    table = Table(Column("topic", no_wrap=True), Column("type", no_wrap=True), "count",
                  "format", "rate Hz", "first (s)", "last (s)", "used as")
    st = info.storage
    for topic in info.topics:
        first = "" if topic.first_ns is None else f"{(topic.first_ns - info.start_ns) / 1e9:.3f}"
        last = "" if topic.last_ns is None else f"{(topic.last_ns - info.start_ns) / 1e9:.3f}"
        table.add_row(topic.name, topic.msgtype, str(topic.count),
                      st.serialization.get(topic.name, "") or "?", f"{topic.rate_hz:.2f}",
                      first, last, topic.role)
    console.print(table)
    for topic in info.topics:  # below the table: a profile does not fit in a column
        qos = "latching (ROS 1)" if topic.name in st.latching else \
            qos_text(st.qos.get(topic.name, []))
        if qos:
            console.print(f"QoS offered on {topic.name}: {qos}", highlight=False,
                          soft_wrap=True)
    for note in ([st.note] if st.note else []):
        console.print(note, highlight=False, soft_wrap=True)
    if info.selection_error:
        console.print(f"a pipeline cannot replay it as is: {info.selection_error}",
                      highlight=False, soft_wrap=True)
    if info.recovered:
        console.print("no index (the file was not closed): read front to back",
                      highlight=False, soft_wrap=True)
    if info.damage:
        console.print(f"damage: {info.damage}", highlight=False, soft_wrap=True)


KIND_NOTES = {"rosbag2": "rosbag2 folder", "ros1": "ROS 1 bag v2.0", "mcap": "bare file",
              "sqlite3": "bare file"}


def _header(info) -> list[str]:
    """The lines ``ros2 bag info`` prints above its topics (times in UTC, to the ns)."""
    from ..drives.bag.info import utc_text

    st = info.storage

    def mb(size):
        return "missing" if size is None else f"{size / 1e6:.1f} MB"

    files = ", ".join(f"{name} ({mb(size)})" for name, size in st.files) or "-"
    lines = [f"[bold]{info.path}[/bold]",
             f"Files:         {files}",
             f"Bag size:      {mb(info.size_bytes)}",
             f"Storage id:    {st.storage_id} ({KIND_NOTES.get(info.kind, info.kind)})"]
    if st.ros_distro:
        lines.append(f"ROS distro:    {st.ros_distro}")
    lines.append(f"Duration:      {info.duration_ns / 1e9:.9f} s")
    for label, ns in (("Start", info.start_ns), ("End", info.end_ns)):
        if ns is not None:
            lines.append(f"{label + ':':<14} {utc_text(ns)} ({ns // 10**9}.{ns % 10**9:09d})")
    lines.append(f"Messages:      {info.message_count}")
    return lines
