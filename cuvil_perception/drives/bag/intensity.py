"""Which PointCloud2 field is a scan's intensity, and how it becomes KITTI's 0..1 reflectance.

LiDAR drivers disagree: ``velodyne_pointcloud`` and Hesai publish float32 0..255, Livox and some
Hesai drivers uint8 0..255, Ouster a uint16 ``reflectivity`` holding an 8-bit calibrated value
(beside float ``intensity``), KITTI-style converters float 0..1. The rule is decided ONCE per
topic, from the first scan that has a finite intensity value, so every frame of a replay gets
the same rule (determinism); the replay source prints it as one ``note:`` line.

The field is the first of `INTENSITY_NAMES` the cloud has (``reflectivity`` only when there is
no ``intensity``, ``i`` or ``reflectance``); a cloud with none gets 0. By the field's declared
datatype (sensor_msgs/PointField) and, where the type alone cannot tell, the first scan's
largest finite value:

==========================  ==============================================================
uint8                       / 255
uint16                      / 255 when the first scan's max <= 255 (an 8-bit value in a
                            16-bit field: Ouster's reflectivity), else / 65535
float32, float64            as stored when the first scan's max <= 1 (KITTI's 0..1), else
                            / 255 (the 0..255 convention); values still above 1 are clamped
                            and warned about by the replay source, as for a ``.bin``
int8, int16, int32, uint32  no convention: DriveError asking for ``intensity_scale``
==========================  ==============================================================

An explicit ``intensity_scale`` (the ``replay`` / ``bag`` param, ``--set
drive.intensity_scale=F``) replaces the rule for any datatype: stored value x F (a KITTI
``.bin`` is scaled the same way, see ``reader.Drive``). Division is
exact IEEE float32 division (``/ 255``, not ``* (1/255)``), so a 0..1 reflectance written as
``r * 255`` reads back as the same float32 ``r``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import DriveError

INTENSITY_NAMES = ("intensity", "i", "reflectance", "reflectivity")
# sensor_msgs/PointField datatype constants -> numpy base type
DATATYPES = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 8: "f8"}
TYPE_NAMES = {1: "int8", 2: "uint8", 3: "int16", 4: "uint16", 5: "int32", 6: "uint32",
              7: "float32", 8: "float64"}
NEEDS_VALUES = (4, 7, 8)  # datatypes whose rule depends on the first scan's values


@dataclass(frozen=True)
class IntensityRule:
    """How one topic's intensity becomes reflectance: ``field`` (None: no intensity field, 0),
    then ``value / divisor`` or ``value * factor`` (float32), and ``text`` saying why."""

    field: str | None
    divisor: float | None = None
    factor: float | None = None
    text: str = ""

    def apply(self, values: np.ndarray) -> np.ndarray:
        """float32 reflectance of ``values`` (any numeric dtype, shape [N])."""
        out = values.astype(np.float32)
        if self.divisor is not None:
            return out / np.float32(self.divisor)
        if self.factor is not None and self.factor != 1.0:
            return out * np.float32(self.factor)
        return out


def intensity_field(msg):
    """The cloud's intensity PointField (first of `INTENSITY_NAMES`), or None."""
    fields = {f.name: f for f in msg.fields}
    return next((fields[n] for n in INTENSITY_NAMES if n in fields), None)


def needs_values(msg, scale: float | None) -> bool:
    """True when this cloud's rule depends on its values (a first scan without a finite value
    does not decide it: the next scan is asked)."""
    field = intensity_field(msg)
    return scale is None and field is not None and int(field.datatype) in NEEDS_VALUES


def decide(msg, values: np.ndarray | None, scale: float | None, where: str,
           scan: str = "the first scan") -> IntensityRule:
    """The rule for the topic whose first scan (with a finite intensity) is ``msg``, named
    ``scan`` in the rule's text; ``values`` are its intensity values as stored (None or empty:
    none finite). ``scale`` is the explicit ``intensity_scale`` (None: by convention)."""
    field = intensity_field(msg)
    if field is None:
        names = ", ".join(f.name for f in msg.fields)
        return IntensityRule(None, text=f"no intensity field ({'/'.join(INTENSITY_NAMES)}; "
                                        f"fields: {names}): intensity 0")
    code = int(field.datatype)
    kind = TYPE_NAMES.get(code, f"datatype {code}")
    what = f"field '{field.name}' ({kind})"
    if scale is not None:
        return IntensityRule(field.name, factor=float(scale),
                             text=f"{what} x {scale:g} (intensity_scale)")
    finite = values[np.isfinite(values)] if values is not None and values.size else values
    top = float(finite.max()) if finite is not None and finite.size else None
    seen = f"max {top:g} in {scan}" if top is not None else "no finite value"
    if code == 2:
        return IntensityRule(field.name, divisor=255.0, text=f"{what} / 255 (uint8 0..255)")
    if code == 4:
        if top is None or top <= 255:
            return IntensityRule(field.name, divisor=255.0,
                                 text=f"{what} / 255 ({seen}: an 8-bit value in a 16-bit field)")
        return IntensityRule(field.name, divisor=65535.0,
                             text=f"{what} / 65535 ({seen}: the full 16-bit range)")
    if code in (7, 8):
        if top is None or top <= 1.0:
            return IntensityRule(field.name, text=f"{what} as stored ({seen}: 0..1)")
        return IntensityRule(field.name, divisor=255.0,
                             text=f"{what} / 255 ({seen}: the 0..255 convention)")
    raise DriveError(f"{where}: PointCloud2 {what}: no convention gives its scale (uint8, "
                     "uint16, float32 and float64 have one); set the replay stage's "
                     "intensity_scale (e.g. --set drive.intensity_scale=0.01)")
