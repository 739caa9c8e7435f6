"""The perf JIT map of a process (``/tmp/perf-<pid>.map``): the native kernels' addresses.

The kernel loader writes one ``<hexaddr> <hexsize> cuvil:<kernel name>`` line per loaded kernel
when ``CUVIL_PERF_MAP`` is on (`compile.loader.write_perf_map`); ``perf`` reads the file itself,
py-spy does not (it reports JIT code as a bare address), so `PerfMap.name` resolves those.
"""

from __future__ import annotations

import bisect
from pathlib import Path


def map_path(pid: int) -> Path:
    return Path(f"/tmp/perf-{pid}.map")


class PerfMap:
    """Address ranges -> names, from perf map text (lines that do not parse are skipped)."""

    def __init__(self, text: str = ""):
        entries = []
        for line in text.splitlines():
            parts = line.split(None, 2)
            try:
                start, size = int(parts[0], 16), int(parts[1], 16)
            except (IndexError, ValueError):
                continue
            if len(parts) == 3:
                entries.append((start, size, parts[2].strip()))
        entries.sort()
        self._starts = [e[0] for e in entries]
        self._entries = entries

    @classmethod
    def of_process(cls, pid: int) -> "PerfMap":
        """The map ``pid`` wrote (empty when it wrote none)."""
        try:
            return cls(map_path(pid).read_text(encoding="ascii", errors="replace"))
        except OSError:
            return cls()

    def __len__(self) -> int:
        return len(self._entries)

    def name(self, address: int) -> str | None:
        """The name of the range holding ``address``, or None."""
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0:
            return None
        start, size, name = self._entries[i]
        return name if address < start + size else None
