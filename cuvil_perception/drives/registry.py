"""The registry of drive formats: one line per format, and the lookup every reader of a
recording goes through (``recording.open_recording``).

Adding a format: a module with a ``format.DriveFormat`` object and its line in ``FORMATS``
(docs/drive-format.md). The format whose ``detect`` is most confident wins; on a tie, the one
listed first. The table of formats in docs/drive-format.md is ``formats_markdown()``, generated
from the formats' own declarations (``cuvil-perception ops --drive-formats``).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DriveError
from .bag.formats import MCAP, ROS1, ROSBAG2, SQLITE3
from .format import DriveFormat
from .kitti import KittiRaw

FORMATS: list[DriveFormat] = [
    KittiRaw(),  # drives/kitti.py: a folder in KITTI raw layout
    MCAP,  # drives/bag/formats.py: the four bag kinds BagDrive reads
    SQLITE3,
    ROS1,
    ROSBAG2,
]


def find_format(path: Path) -> DriveFormat | None:
    """The registered format most confident that ``path`` is one of its, or None."""
    best, best_score = None, 0.0
    for fmt in FORMATS:
        score = fmt.detect(Path(path))
        if score > best_score:
            best, best_score = fmt, score
    return best


def format_of(path: Path) -> DriveFormat:
    """``find_format``, or DriveError naming every format the path is not."""
    fmt = find_format(path)
    if fmt is None:
        titles = list(dict.fromkeys(f.title for f in FORMATS))
        raise DriveError(f"{path}: neither {' nor '.join(titles)} (judged by its first bytes)")
    return fmt


def formats_markdown() -> str:
    """The table of registered formats as Markdown, one row per ``FORMATS`` line in order:
    what it holds, ``name``, how ``detect`` recognises it, the module that defines it (a
    ``cuvil_perception`` module as its path under the package, any other as its dotted name)."""
    rows = ["| format | `name` | recognised by (`detect` confidence) | module |",
            "|---|---|---|---|"]
    for fmt in FORMATS:
        module = type(fmt).__module__
        if module.startswith("cuvil_perception."):
            module = module.removeprefix("cuvil_perception.").replace(".", "/") + ".py"
        rows.append(f"| {fmt.holds} | `{fmt.name}` | {fmt.recognised_by} | `{module}` |")
    return "\n".join(rows) + "\n"
