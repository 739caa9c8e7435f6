"""sensor_msgs/Image and CompressedImage -> uint8 [H, W, 3] BGR (the replay source's image).

Raw encodings: ``bgr8``, ``rgb8``, ``bgra8``, ``rgba8``, ``mono8``, ``mono16`` (the high byte is
kept: value >> 8), ``8UC1``/``8UC3`` (as mono8/bgr8), and the Bayer mosaics ``bayer_rggb8``,
``bayer_bggr8``, ``bayer_gbrg8``, ``bayer_grbg8`` demosaiced by OpenCV. Rows may be padded
(``step`` > width x bytes per pixel); 16-bit data honours ``is_bigendian``. Compressed images
(``format`` containing jpeg/jpg/png, as image_transport writes it) are decoded by OpenCV.
"""

from __future__ import annotations

import cv2
import numpy as np

from ...errors import DriveError
from ..images import check_png_chunks

# OpenCV names a Bayer pattern by the second row's first two pixels, ROS by the first row's
# (the mapping cv_bridge documents): ROS rggb is OpenCV's BG pattern, and so on.
BAYER_CODES = {"bayer_rggb8": cv2.COLOR_BayerBG2BGR, "bayer_bggr8": cv2.COLOR_BayerRG2BGR,
               "bayer_gbrg8": cv2.COLOR_BayerGR2BGR, "bayer_grbg8": cv2.COLOR_BayerGB2BGR}
# encoding -> (channels, bytes per channel)
LAYOUTS = {"bgr8": (3, 1), "rgb8": (3, 1), "bgra8": (4, 1), "rgba8": (4, 1), "mono8": (1, 1),
           "8UC1": (1, 1), "8UC3": (3, 1), "mono16": (1, 2), "16UC1": (1, 2),
           **{name: (1, 1) for name in BAYER_CODES}}
RAW_ENCODINGS = tuple(LAYOUTS)


def _pixels(msg, channels: int, size: int, where: str) -> np.ndarray:
    """The image's pixels as [H, W, channels] of uint8 or uint16 (native order), rows unpadded."""
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    row = width * channels * size
    data = np.asarray(msg.data, dtype=np.uint8)
    if height <= 0 or width <= 0:
        raise DriveError(f"{where}: image is {width}x{height}")
    if step < row or data.size < step * (height - 1) + row:
        raise DriveError(f"{where}: image data has {data.size} bytes with step {step}; "
                         f"{height} rows of {row} bytes ({msg.encoding}) do not fit")
    rows = np.lib.stride_tricks.as_strided(data, (height, row), (step, 1))
    if size == 1:
        return np.ascontiguousarray(rows).reshape(height, width, channels)
    order = ">" if msg.is_bigendian else "<"
    values = np.frombuffer(np.ascontiguousarray(rows).tobytes(), dtype=order + "u2")
    return values.astype(np.uint16).reshape(height, width, channels)


def image_to_bgr(msg, where: str = "Image") -> np.ndarray:
    """A sensor_msgs/Image as C-contiguous uint8 [H, W, 3] BGR."""
    encoding = str(msg.encoding)
    if encoding not in LAYOUTS:
        raise DriveError(f"{where}: image encoding '{encoding}' is not supported (supported: "
                         f"{', '.join(RAW_ENCODINGS)})")
    channels, size = LAYOUTS[encoding]
    pixels = _pixels(msg, channels, size, where)
    if size == 2:
        grey = (pixels[:, :, 0] >> 8).astype(np.uint8)
        return cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR)
    if encoding in BAYER_CODES:
        return cv2.cvtColor(pixels[:, :, 0], BAYER_CODES[encoding])
    convert = {"rgb8": cv2.COLOR_RGB2BGR, "bgra8": cv2.COLOR_BGRA2BGR,
               "rgba8": cv2.COLOR_RGBA2BGR, "mono8": cv2.COLOR_GRAY2BGR,
               "8UC1": cv2.COLOR_GRAY2BGR}.get(encoding)
    if convert is None:
        return pixels
    source = pixels[:, :, 0] if channels == 1 else pixels
    return np.ascontiguousarray(cv2.cvtColor(source, convert))


def compressed_to_bgr(msg, where: str = "CompressedImage") -> np.ndarray:
    """A sensor_msgs/CompressedImage (JPEG or PNG) as uint8 [H, W, 3] BGR."""
    fmt = str(msg.format).lower()
    if not any(k in fmt for k in ("jpeg", "jpg", "png")):
        raise DriveError(f"{where}: compressed image format '{msg.format}' is not supported "
                         "(jpeg or png)")
    data = np.asarray(msg.data, dtype=np.uint8)
    check_png_chunks(where, data)  # one error line, not libpng's own on stderr first
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise DriveError(f"{where}: compressed image ({msg.format}, {data.size} bytes) does "
                         "not decode")
    return image


def bgr_to_image(types, image: np.ndarray, header, encoding: str = "bgr8"):
    """A sensor_msgs/Image holding a BGR uint8 [H, W, 3] image as ``bgr8`` or ``rgb8``."""
    if encoding not in ("bgr8", "rgb8"):
        raise ValueError(f"bgr_to_image writes bgr8 or rgb8, not {encoding}")
    pixels = image if encoding == "bgr8" else cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    height, width = image.shape[:2]
    return types["sensor_msgs/msg/Image"](
        header=header, height=height, width=width, encoding=encoding, is_bigendian=0,
        step=width * 3, data=np.ascontiguousarray(pixels).reshape(-1))


def bgr_to_compressed(types, image: np.ndarray, header, fmt: str = "png"):
    """A sensor_msgs/CompressedImage holding ``image`` as PNG (lossless) or JPEG."""
    ok, data = cv2.imencode("." + fmt, image)
    if not ok:
        raise DriveError(f"OpenCV cannot encode a {image.shape} image as {fmt}")
    return types["sensor_msgs/msg/CompressedImage"](header=header, format=fmt,
                                                    data=data.reshape(-1))
