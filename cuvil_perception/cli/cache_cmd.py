"""``cuvil-perception cache info|clear``: the on-disk native-kernel cache."""

from __future__ import annotations

import click

from ..compile import cache_clear, cache_info
from ..rt import deadline_cache


@click.group("cache")
def cache_group() -> None:
    """Inspect or empty the native-kernel cache (and the auto deadlines kept beside it)."""


@cache_group.command("info")
def info_cmd() -> None:
    """Directory, number of entries, total size, and hits/misses recorded."""
    info = cache_info()
    click.echo(f"dir:     {info['dir']}")
    click.echo(f"entries: {info['entries']}")
    click.echo(f"size:    {info['bytes'] / 1024:.1f} KiB")
    click.echo(f"hits:    {info['hits']}")
    click.echo(f"misses:  {info['misses']}")
    click.echo(f"deadlines: {len(deadline_cache.entries())} measured pipeline(s) "
               "(deadline_ms: auto, per CPU; `rt calibrate` measures again)")


@cache_group.command("clear")
def clear_cmd() -> None:
    """Delete every cached object file and every measured auto deadline."""
    removed = cache_clear()
    click.echo(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {cache_info()['dir']}")
    deadlines = deadline_cache.clear()
    click.echo(f"removed {deadlines} measured deadline entr{'y' if deadlines == 1 else 'ies'} "
               "(the next run with deadline_ms: auto measures again)")
