"""sensor_msgs/PointCloud2 <-> float32 [N, 4] (x, y, z, intensity), the replay source's points.

Reading accepts what drivers publish: fields in any order and at any offset, ``point_step``
larger than the fields (padding), ``row_step`` larger than ``width * point_step``, big-endian
data (``is_bigendian``), organised clouds (``height > 1``: rows are concatenated in order), and
x/y/z stored as float32, float64, int8/uint8, int16/uint16 or int32/uint32. Which field is the
intensity and how it is scaled to 0..1 is an `intensity.IntensityRule` (decided once per topic
by ``BagDrive``; from the cloud itself when none is given). Rows with a NaN or infinite value,
or a coordinate beyond ``points.MAX_REACH_M``, are dropped and counted by the KITTI reader's own
`keep_measured` (organised clouds mark missing returns with NaN); reflectance is clamped by the
drive, as for a ``.bin``.
"""

from __future__ import annotations

import numpy as np

from ...errors import DriveError
from ..points import keep_measured
from .intensity import DATATYPES, IntensityRule, decide, intensity_field


def _field_dtype(msg, where: str) -> tuple[np.dtype, str | None]:
    """Structured dtype of one point (x, y, z and the intensity field), honouring offsets,
    point_step padding and byte order; and the name of the intensity field (or None)."""
    order = ">" if msg.is_bigendian else "<"
    fields = {f.name: f for f in msg.fields}
    missing = [n for n in "xyz" if n not in fields]
    if missing:
        raise DriveError(f"{where}: PointCloud2 has no field {', '.join(missing)} (fields: "
                         f"{', '.join(fields) or 'none'})")
    found = intensity_field(msg)
    intensity = None if found is None else found.name
    names, formats, offsets = [], [], []
    for name in ("x", "y", "z") + ((intensity,) if intensity else ()):
        field = fields[name]
        if field.datatype not in DATATYPES:
            raise DriveError(f"{where}: PointCloud2 field {name} has datatype "
                             f"{field.datatype}, not one of 1..8 (sensor_msgs/PointField)")
        base = np.dtype(order + DATATYPES[field.datatype])
        if field.offset + base.itemsize > msg.point_step:
            raise DriveError(f"{where}: PointCloud2 field {name} (offset {field.offset}, "
                             f"{base.itemsize} bytes) does not fit point_step {msg.point_step}")
        names.append(name)
        formats.append(base)
        offsets.append(field.offset)
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets,
                      "itemsize": msg.point_step})
    return dtype, intensity


def _cloud(msg, where: str) -> tuple[np.ndarray, str | None]:
    """The cloud's points as a structured array [height * width] (fields x, y, z and the
    intensity field, as stored) and the intensity field's name (or None)."""
    width, height = int(msg.width), int(msg.height)
    step, row_step = int(msg.point_step), int(msg.row_step)
    if step <= 0 or row_step < width * step:
        raise DriveError(f"{where}: PointCloud2 point_step {step} / row_step {row_step} do not "
                         f"hold {width} points per row")
    data = np.asarray(msg.data, dtype=np.uint8)
    if data.size < row_step * (height - 1) + width * step:
        raise DriveError(f"{where}: PointCloud2 data has {data.size} bytes, {height} rows of "
                         f"{width} points need {row_step * height}")
    dtype, intensity = _field_dtype(msg, where)
    if height * width == 0:
        return np.zeros(0, dtype=dtype), intensity
    if row_step == width * step:
        return np.frombuffer(data, dtype=dtype, count=height * width), intensity
    # row padding: take each row's points, skip the padding
    rows = np.lib.stride_tricks.as_strided(data, (height, width * step), (row_step, 1))
    return np.frombuffer(np.ascontiguousarray(rows).tobytes(), dtype=dtype), intensity


def intensity_values(msg, where: str = "PointCloud2") -> np.ndarray | None:
    """The cloud's intensity values as stored ([N], the field's dtype), None without one."""
    cloud, intensity = _cloud(msg, where)
    return None if intensity is None else cloud[intensity]


def cloud_rule(msg, where: str = "PointCloud2",
               intensity_scale: float | None = None) -> IntensityRule:
    """The intensity rule this cloud alone gives (`intensity.decide` on its own values)."""
    return decide(msg, intensity_values(msg, where), intensity_scale, where)


def pointcloud2_to_points(msg, where: str = "PointCloud2",
                          rule: IntensityRule | None = None) -> tuple[np.ndarray, int]:
    """(points float32 [N, 4] C-contiguous: x, y, z in metres in the cloud's frame, intensity
    by ``rule`` (None: `cloud_rule` of this cloud); number of rows dropped: NaN/inf or out of
    reach). ``where`` names the message in errors (file, topic, index). A cloud without the
    rule's field is an error: a topic keeps one layout."""
    cloud, intensity = _cloud(msg, where)
    if rule is None:
        rule = decide(msg, None if intensity is None else cloud[intensity], None, where)
    if rule.field is not None and rule.field not in (cloud.dtype.names or ()):
        raise DriveError(f"{where}: PointCloud2 has no field '{rule.field}', which the topic's "
                         f"first scan had (fields: {', '.join(f.name for f in msg.fields)})")
    points = np.zeros((cloud.size, 4), dtype=np.float32)
    for column, name in enumerate("xyz"):
        points[:, column] = cloud[name]
    if rule.field is not None:
        points[:, 3] = rule.apply(cloud[rule.field])
    return keep_measured(points)


def points_to_pointcloud2(types, points: np.ndarray, header, fields=("x", "y", "z", "intensity"),
                          dtype: str = "<f4", point_step: int | None = None,
                          height: int = 1):
    """A PointCloud2 message (class from the typestore ``types``) holding ``points`` [N, k]:
    the named fields in that order, each as ``dtype`` (little- or big-endian), padded to
    ``point_step`` bytes; ``height > 1`` makes an organised cloud of ``N / height`` columns."""
    base = np.dtype(dtype)
    code = {v: k for k, v in DATATYPES.items()}[base.newbyteorder("<").str[1:]]
    step = point_step or base.itemsize * len(fields)
    count = points.shape[0]
    packed = np.zeros((count, step), dtype=np.uint8)
    for column, _name in enumerate(fields):
        values = np.ascontiguousarray(points[:, column]).astype(base)
        start = column * base.itemsize
        packed[:, start:start + base.itemsize] = values.view(np.uint8).reshape(count, -1)
    point_field = types["sensor_msgs/msg/PointField"]
    msg_fields = [point_field(name=n, offset=i * base.itemsize, datatype=code, count=1)
                  for i, n in enumerate(fields)]
    width = count // height
    return types["sensor_msgs/msg/PointCloud2"](
        header=header, height=height, width=width, fields=msg_fields,
        is_bigendian=base.byteorder == ">", point_step=step, row_step=step * width,
        data=packed.reshape(-1), is_dense=bool(np.isfinite(points).all()))
