"""``cuvil-perception cache info|clear``: the on-disk native-kernel cache."""

from __future__ import annotations

import click

from ..compile import cache_clear, cache_info


@click.group("cache")
def cache_group() -> None:
    """Inspect or empty the native-kernel cache."""


@cache_group.command("info")
def info_cmd() -> None:
    """Directory, number of entries, total size, and hits/misses recorded."""
    info = cache_info()
    click.echo(f"dir:     {info['dir']}")
    click.echo(f"entries: {info['entries']}")
    click.echo(f"size:    {info['bytes'] / 1024:.1f} KiB")
    click.echo(f"hits:    {info['hits']}")
    click.echo(f"misses:  {info['misses']}")


@cache_group.command("clear")
def clear_cmd() -> None:
    """Delete every cached object file."""
    removed = cache_clear()
    click.echo(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {cache_info()['dir']}")
