"""Every float option of every verb refuses NaN and infinities (``--rate nan`` is a usage error).

click's ``FLOAT`` and ``FloatRange`` accept ``nan`` (no comparison with NaN fails) and ``inf``;
`require_finite` wraps each such parameter type of a command tree once, so options added later
are covered without anyone remembering to.
"""

from __future__ import annotations

import math

import click


class FiniteFloat(click.ParamType):
    """A float option type that converts with ``inner`` and then refuses NaN and +-inf."""

    def __init__(self, inner: click.ParamType):
        self.inner = inner
        self.name = inner.name

    def convert(self, value, param, ctx):
        number = self.inner.convert(value, param, ctx)
        if isinstance(number, float) and not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number

    def get_metavar(self, *args, **kwargs):
        return self.inner.get_metavar(*args, **kwargs)

    def to_info_dict(self) -> dict:
        return self.inner.to_info_dict()

    def __repr__(self) -> str:
        return repr(self.inner)


def require_finite(command: click.Command) -> None:
    """Wrap every float-typed parameter of ``command`` and its subcommands (idempotent)."""
    for param in command.params:
        kind = param.type
        if isinstance(kind, (click.types.FloatParamType, click.FloatRange)):
            param.type = FiniteFloat(kind)
    for sub in getattr(command, "commands", {}).values():
        require_finite(sub)
