"""``cuvil-perception bag info BAG``: topics, types, counts, rates, time span, and which topics a
pipeline's ``bag``/``replay`` source would use."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

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
    """Topics, types, counts, rates and time span of BAG (reads it once, front to back), and
    the topics a pipeline replaying it would use. Exit 2 when BAG is not a bag."""
    from ..drives.bag.info import bag_info
    from .run_cmd import wide_console

    info = bag_info(Path(bag), _parse_topics(topics))
    if as_json:
        click.echo(json.dumps(info.as_dict(), indent=2))
        return
    console = wide_console()
    span = ((info.end_ns - info.start_ns) / 1e9) if info.start_ns is not None else 0.0
    console.print(f"[bold]{info.path}[/bold]: {info.kind}, {info.size_bytes / 1e6:.1f} MB, "
                  f"{span:.3f} s", highlight=False, soft_wrap=True)
    table = Table("topic", "type", "count", "rate Hz", "first (s)", "last (s)", "used as")
    for topic in info.topics:
        first = "" if topic.first_ns is None else f"{(topic.first_ns - info.start_ns) / 1e9:.3f}"
        last = "" if topic.last_ns is None else f"{(topic.last_ns - info.start_ns) / 1e9:.3f}"
        table.add_row(topic.name, topic.msgtype, str(topic.count), f"{topic.rate_hz:.2f}",
                      first, last, topic.role)
    console.print(table)
    if info.selection_error:
        console.print(f"a pipeline cannot replay it as is: {info.selection_error}",
                      highlight=False, soft_wrap=True)
    if info.recovered:
        console.print("no index (the file was not closed): read front to back",
                      highlight=False, soft_wrap=True)
    if info.damage:
        console.print(f"damage: {info.damage}", highlight=False, soft_wrap=True)
