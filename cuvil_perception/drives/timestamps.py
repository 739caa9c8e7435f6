"""KITTI ``timestamps.txt``: one ``YYYY-MM-DD HH:MM:SS.nnnnnnnnn`` line per frame, UTC.

Timestamps become integer nanoseconds since the Unix epoch, parsed from the text exactly (the
fraction is read as an integer, never through a float, so no rounding happens). They must fit
int64 nanoseconds (years 1970 to 2262) and strictly increase down the file: a line equal to or
earlier than the one before it is an error naming the file and both lines (a reversed,
shuffled or duplicated stream would otherwise replay in the wrong order or pair the wrong
camera image with a scan).

`longest_gap` finds a pause in a stream's stamps long enough that a paced replay would seem to
hang in it; every drive format (KITTI folders, bags) describes its own with it.
"""

from __future__ import annotations

import calendar
import re
import time
from pathlib import Path

import numpy as np

from ..errors import DriveError

_LINE = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
_NS_PER_S = 1_000_000_000
_MAX_NS = 2**63 - 1  # int64: 2262-04-11


def parse_timestamp(text: str) -> int:
    """``"2011-09-26 13:02:25.964389445"`` -> ns since the epoch (UTC). ValueError when malformed.

    The fraction may have 1 to 9 digits (``.5`` is 500 ms); it is optional.
    """
    match = _LINE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"expected 'YYYY-MM-DD HH:MM:SS.nnnnnnnnn', got {text.strip()!r}")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        raise ValueError(f"date or time out of range in {text.strip()!r}")
    if day > calendar.monthrange(year, month)[1]:
        raise ValueError(f"day out of range in {text.strip()!r}")
    fraction = match.group(7) or ""
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    ns = seconds * _NS_PER_S + nanos
    if not 0 <= ns <= _MAX_NS:
        raise ValueError(f"{text.strip()!r} is outside 1970-01-01 .. 2262-04-11 (int64 "
                         f"nanoseconds since the epoch)")
    return ns


def format_timestamp(ns: int) -> str:
    """ns since the epoch -> ``"YYYY-MM-DD HH:MM:SS.nnnnnnnnn"`` (UTC); inverse of parse."""
    seconds, nanos = divmod(int(ns), _NS_PER_S)
    tm = time.gmtime(seconds)
    return (f"{tm.tm_year:04d}-{tm.tm_mon:02d}-{tm.tm_mday:02d} "
            f"{tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d}.{nanos:09d}")


def read_timestamps(path: Path) -> list[int]:
    """All timestamps of a ``timestamps.txt`` in file order, as ns since the epoch.

    Trailing blank lines are ignored (KITTI files end with a newline); any other line that does
    not parse raises DriveError naming the file and the 1-based line number.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DriveError(f"{path}: missing timestamps file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DriveError(f"{path}: cannot read timestamps ({exc})") from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    stamps = []
    for number, line in enumerate(lines, start=1):
        try:
            stamps.append(parse_timestamp(line))
        except ValueError as exc:
            raise DriveError(f"{path}:{number}: bad timestamp: {exc}") from None
        if len(stamps) > 1 and stamps[-1] <= stamps[-2]:
            how = "repeats" if stamps[-1] == stamps[-2] else "is earlier than"
            raise DriveError(f"{path}:{number}: timestamp {line.strip()} {how} line "
                             f"{number - 1} ({lines[number - 2].strip()}); timestamps must "
                             f"strictly increase")
    return stamps


def write_timestamps(path: Path, stamps: list[int]) -> None:
    """Write ns timestamps as a KITTI ``timestamps.txt`` (one line each, trailing newline)."""
    Path(path).write_text("".join(format_timestamp(ns) + "\n" for ns in stamps),
                          encoding="utf-8")


def longest_gap(stamps_ns: np.ndarray, factor: float = 10.0,
                floor_s: float = 1.0) -> tuple[int, float, float] | None:
    """(frame before the gap, gap in s, median frame period in s) for the longest step between
    consecutive frame stamps (int64 ns), when it is longer than ``floor_s`` and ``factor``
    times the median period; else None (also for fewer than two frames)."""
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    if stamps.size < 2:
        return None
    steps = np.diff(stamps)
    worst = int(np.argmax(steps))
    gap_s, median_s = steps[worst] / 1e9, float(np.median(steps)) / 1e9
    if gap_s <= max(floor_s, factor * median_s):
        return None
    return worst, float(gap_s), median_s
