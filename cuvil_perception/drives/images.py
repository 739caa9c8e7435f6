"""Camera images of a drive: 8-bit PNGs read as BGR uint8 [H, W, 3] (OpenCV's channel order).

A PNG's header is checked before it is decoded: one that claims more than `MAX_PIXELS` (a
corrupt or hostile file saying 100000 x 100000) is refused with the memory it would take,
instead of the decoder trying to allocate it.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import cv2
import numpy as np

from ..errors import DriveError

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_PIXELS = 1 << 27  # 134 Mpixel (402 MB as BGR); automotive cameras are 1-8 Mpixel


def read_image(path: Path) -> np.ndarray:
    """The image at ``path`` as uint8 [H, W, 3] BGR; DriveError when it cannot be decoded."""
    check_size(path, png_size(path))
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        raise DriveError(f"{path}: cannot read image ({exc.strerror or exc})") from None
    check_png_chunks(path, data)
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise DriveError(f"{path}: not a readable image (corrupt or not a PNG)")
    return image


def check_png_chunks(path: Path, data: np.ndarray) -> None:
    """DriveError naming the byte where a PNG's chunk structure breaks: a chunk cut off (a
    truncated copy), a CRC that does not match (bit rot), no IEND. libpng would reject the same
    file, but prints its own lines on stderr first; this check (a CRC pass, ~2 % of a decode)
    keeps the error to one line. Data that is not a PNG is left to the decoder."""
    raw = memoryview(data).cast("B")
    if bytes(raw[:8]) != _PNG_MAGIC:
        return
    pos = 8
    while pos + 12 <= len(raw):
        length, kind = struct.unpack_from(">I4s", raw, pos)
        end = pos + 12 + length
        if end > len(raw):
            break
        (stored,) = struct.unpack_from(">I", raw, end - 4)
        if zlib.crc32(raw[pos + 4:end - 4]) != stored:
            raise DriveError(f"{path}: not a readable image (corrupt PNG: chunk "
                             f"{kind.decode('latin-1')!r} at byte {pos} fails its CRC)")
        if kind == b"IEND":
            return
        pos = end
    raise DriveError(f"{path}: not a readable image (truncated PNG: cut off at byte {len(raw)}, "
                     f"in the chunk at byte {pos}; no IEND)")


def check_size(path: Path, size: tuple[int, int] | None) -> None:
    """DriveError when a (width, height) header is empty or larger than ``MAX_PIXELS``."""
    if size is None:
        return
    width, height = size
    if width < 1 or height < 1 or width * height > MAX_PIXELS:
        gib = width * height * 3 / 2**30
        raise DriveError(f"{path}: PNG header says {width} x {height} pixels ({gib:.3g} GiB "
                         f"decoded); at most {MAX_PIXELS:,} pixels are read")


def png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR chunk (reads 24 bytes), or None if not a PNG."""
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError:
        return None
    if len(head) < 24 or not head.startswith(_PNG_MAGIC) or head[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)
