"""Bag message decoding without a bag: PointCloud2 layouts, Image encodings, CameraInfo, tf."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

from cuvil_perception.drives.bag import (TfTree, compressed_to_bgr, image_to_bgr,
                                         matrix_to_quaternion, pointcloud2_to_points,
                                         points_to_pointcloud2, quaternion_to_matrix,
                                         rigid_extrinsic)
from cuvil_perception.drives.bag.pointcloud import cloud_rule
from cuvil_perception.drives.bag.tf import camera_info_calibration
from cuvil_perception.drives.bag.write import _Msgs
from cuvil_perception.errors import DriveError

T = get_typestore(Stores.ROS2_HUMBLE).types
RNG = np.random.default_rng(3)


def _header(frame="velo_link"):
    return _Msgs(ros1=False).header(1_000_000_123, frame)


def _cloud(n=50):
    points = RNG.normal(0, 10, (n, 4)).astype(np.float32)
    points[:, 3] = RNG.uniform(0, 1, n)
    return points


# -- PointCloud2 ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<f8", ">f8"])
@pytest.mark.parametrize("order", [("x", "y", "z", "intensity"), ("intensity", "z", "x", "y")])
def test_pointcloud2_field_orders_widths_and_byte_order(dtype, order):
    points = _cloud()
    columns = [{"x": 0, "y": 1, "z": 2, "intensity": 3}[name] for name in order]
    msg = points_to_pointcloud2(T, points[:, columns], _header(), fields=order, dtype=dtype)
    got, dropped = pointcloud2_to_points(msg)
    assert dropped == 0 and got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, points)  # float32 -> float64 -> float32 is exact


@pytest.mark.parametrize("dtype", ["<u1", "<u2", ">u2"])
def test_pointcloud2_integer_intensity_and_scale(dtype):
    points = _cloud()
    levels = RNG.integers(0, 256, points.shape[0])
    data = np.concatenate([points[:, :3].astype(np.float64), levels[:, None]], axis=1)
    xyz = points_to_pointcloud2(T, data[:, :3], _header(), fields=("x", "y", "z"))
    step = xyz.point_step + np.dtype(dtype).itemsize + 3  # padding after the intensity too
    packed = np.zeros((points.shape[0], step), dtype=np.uint8)
    packed[:, :12] = np.asarray(xyz.data).reshape(-1, 12)
    packed[:, 12:12 + np.dtype(dtype).itemsize] = levels.astype(dtype).view(np.uint8).reshape(
        points.shape[0], -1)
    code = {"u1": 2, "u2": 4}[np.dtype(dtype).str[1:]]
    big = np.dtype(dtype).byteorder == ">"
    if big:  # a big-endian cloud: the xyz floats must be big-endian too
        packed[:, :12] = points[:, :3].astype(">f4").view(np.uint8).reshape(-1, 12)
    fields = list(xyz.fields) + [T["sensor_msgs/msg/PointField"](name="intensity", offset=12,
                                                                datatype=code, count=1)]
    msg = T["sensor_msgs/msg/PointCloud2"](
        header=_header(), height=1, width=points.shape[0], fields=fields, is_bigendian=big,
        point_step=step, row_step=step * points.shape[0], data=packed.reshape(-1), is_dense=True)
    got, _ = pointcloud2_to_points(msg)  # by convention: uint8, and uint16 up to 255: / 255
    np.testing.assert_array_equal(got[:, :3], points[:, :3])
    np.testing.assert_array_equal(got[:, 3], levels.astype(np.float32) / np.float32(255))
    explicit = cloud_rule(msg, intensity_scale=0.5)
    got, _ = pointcloud2_to_points(msg, rule=explicit)
    np.testing.assert_array_equal(got[:, 3], levels.astype(np.float32) * np.float32(0.5))


@pytest.mark.parametrize("dtype,top,divisor,text", [
    ("<u2", 4000, 65535.0, "field 'intensity' (uint16) / 65535 (max 4000 in the first scan: the "
                           "full 16-bit range)"),
    ("<u2", 255, 255.0, "(uint16) / 255 (max 255 in the first scan: an 8-bit value"),
    ("<f8", 1.0, None, "field 'intensity' (float64) as stored (max 1 in the first scan: 0..1)"),
    ("<f4", 1.5, 255.0, "(float32) / 255 (max 1.5 in the first scan: the 0..255 convention)"),
    (">f4", 90.0, 255.0, "(float32) / 255 (max 90 in the first scan: the 0..255 convention)"),
    ("<u1", 3, 255.0, "field 'intensity' (uint8) / 255 (uint8 0..255)")])
def test_intensity_rule_by_datatype_and_first_scan_values(dtype, top, divisor, text):
    # x, y, z are stored as dtype too: small and positive (own generator: RNG's sequence
    # is the later tests')
    points = np.random.default_rng(7).uniform(1, 50, (20, 4)).astype(np.float32)
    points[:, 3] = np.linspace(0, top, 20)
    msg = points_to_pointcloud2(T, points, _header(), dtype=dtype)
    rule = cloud_rule(msg)
    assert rule.field == "intensity" and rule.divisor == divisor and text in rule.text
    got, _ = pointcloud2_to_points(msg)
    stored = points[:, 3].astype(dtype).astype(np.float32)
    expected = stored / np.float32(divisor) if divisor else stored
    np.testing.assert_array_equal(got[:, 3], expected)


def test_reflectivity_when_there_is_no_intensity_and_0_without_either():
    # x, y, z are stored as dtype too: small and positive (own generator: RNG's sequence
    # is the later tests')
    points = np.random.default_rng(7).uniform(1, 50, (10, 4)).astype(np.float32)
    points[:, 3] = np.arange(10) * 20
    msg = points_to_pointcloud2(T, points, _header(), fields=("x", "y", "z", "reflectivity"),
                                dtype="<u2")
    assert "field 'reflectivity' (uint16) / 255" in cloud_rule(msg).text
    np.testing.assert_array_equal(pointcloud2_to_points(msg)[0][:, 3],
                                  np.float32(np.arange(10) * 20) / np.float32(255))
    bare = points_to_pointcloud2(T, points[:, :3], _header(), fields=("x", "y", "z"))
    assert cloud_rule(bare).text.startswith("no intensity field (intensity/i/reflectance/"
                                            "reflectivity; fields: x, y, z): intensity 0")


def test_pointcloud2_missing_intensity_padding_and_organised_with_nan():
    points = _cloud(60)
    points[[3, 17, 40], 1] = np.nan  # missing returns in an organised cloud
    points[22, 0] = np.inf
    msg = points_to_pointcloud2(T, points[:, :3], _header(), fields=("x", "y", "z"),
                                point_step=20, height=6)
    assert msg.height == 6 and msg.width == 10 and not msg.is_dense
    got, dropped = pointcloud2_to_points(msg)
    keep = np.isfinite(points).all(axis=1)
    assert dropped == 4
    np.testing.assert_array_equal(got[:, :3], points[keep, :3])
    assert (got[:, 3] == 0).all()


def test_pointcloud2_row_padding():
    points = _cloud(12)
    msg = points_to_pointcloud2(T, points, _header(), height=3)
    rows = np.asarray(msg.data).reshape(3, -1)
    padded = np.concatenate([rows, np.full((3, 8), 7, np.uint8)], axis=1)
    msg.data, msg.row_step = padded.reshape(-1), rows.shape[1] + 8
    got, _ = pointcloud2_to_points(msg)
    np.testing.assert_array_equal(got, points)


def test_pointcloud2_errors_name_the_message():
    msg = points_to_pointcloud2(T, _cloud(4)[:, :3], _header(), fields=("x", "y", "intensity"))
    with pytest.raises(DriveError, match=r"bag.mcap: /p message 3: PointCloud2 has no field z"):
        pointcloud2_to_points(msg, "bag.mcap: /p message 3")
    msg = points_to_pointcloud2(T, _cloud(4), _header())
    msg.data = msg.data[:-1]
    with pytest.raises(DriveError, match="data has 63 bytes"):
        pointcloud2_to_points(msg)


# -- Image / CompressedImage ----------------------------------------------------------------

def _image_msg(pixels: np.ndarray, encoding: str, pad: int = 0, big: bool = False):
    height, width = pixels.shape[:2]
    rows = pixels.reshape(height, -1)
    if pixels.dtype == np.uint16:
        rows = pixels.astype(">u2" if big else "<u2").reshape(height, -1).view(np.uint8)
    rows = np.concatenate([rows, np.zeros((height, pad), np.uint8)], axis=1)
    return T["sensor_msgs/msg/Image"](header=_header("cam"), height=height, width=width,
                                      encoding=encoding, is_bigendian=big,
                                      step=rows.shape[1], data=rows.reshape(-1))


@pytest.mark.parametrize("pad", [0, 5])
def test_image_colour_and_mono_encodings(pad):
    bgr = RNG.integers(0, 256, (7, 9, 3), dtype=np.uint8)
    rgba = np.concatenate([bgr[:, :, ::-1], np.full((7, 9, 1), 200, np.uint8)], axis=2)
    cases = {"bgr8": bgr, "rgb8": bgr[:, :, ::-1], "rgba8": rgba,
             "bgra8": np.concatenate([bgr, rgba[:, :, 3:]], axis=2)}
    for encoding, pixels in cases.items():
        got = image_to_bgr(_image_msg(np.ascontiguousarray(pixels), encoding, pad))
        np.testing.assert_array_equal(got, bgr, err_msg=encoding)
    grey = bgr[:, :, 0]
    np.testing.assert_array_equal(image_to_bgr(_image_msg(grey, "mono8", pad)),
                                  np.repeat(grey[:, :, None], 3, axis=2))
    deep = RNG.integers(0, 65536, (7, 9), dtype=np.uint16)
    for big in (False, True):
        got = image_to_bgr(_image_msg(deep, "mono16", pad, big))
        np.testing.assert_array_equal(got[:, :, 1], (deep >> 8).astype(np.uint8))


@pytest.mark.parametrize("encoding,offsets", [
    ("bayer_rggb8", {"r": (0, 0), "g": (0, 1), "b": (1, 1)}),
    ("bayer_bggr8", {"b": (0, 0), "g": (0, 1), "r": (1, 1)}),
    ("bayer_gbrg8", {"g": (0, 0), "b": (0, 1), "r": (1, 0)}),
    ("bayer_grbg8", {"g": (0, 0), "r": (0, 1), "b": (1, 0)})])
def test_bayer_patterns_demosaic_to_the_right_colour(encoding, offsets):
    colour = {"b": 30, "g": 120, "r": 220}
    mosaic = np.zeros((8, 10), np.uint8)
    for name, (dy, dx) in offsets.items():
        mosaic[dy::2, dx::2] = colour[name]
        if name == "g":  # the second green of the 2x2 cell
            mosaic[1 - dy::2, 1 - dx::2] = colour["g"]
    got = image_to_bgr(_image_msg(mosaic, encoding))
    np.testing.assert_array_equal(got[2:-2, 2:-2], np.broadcast_to([30, 120, 220], (4, 6, 3)))


def test_compressed_png_exact_and_jpeg_close():
    bgr = RNG.integers(0, 256, (16, 24, 3), dtype=np.uint8)
    smooth = cv2.GaussianBlur(bgr, (7, 7), 3)
    for fmt, image, tol in (("png", bgr, 0), ("jpeg", smooth, 12)):
        ok, data = cv2.imencode("." + fmt, image, [cv2.IMWRITE_JPEG_QUALITY, 95] if
                                fmt == "jpeg" else [])
        msg = T["sensor_msgs/msg/CompressedImage"](header=_header("cam"),
                                                   format=f"bgr8; {fmt} compressed bgr8",
                                                   data=data.reshape(-1))
        got = compressed_to_bgr(msg)
        assert np.abs(got.astype(int) - image).max() <= tol, fmt


def test_image_errors_name_the_message():
    msg = _image_msg(np.zeros((4, 4), np.uint8), "yuv422")
    with pytest.raises(DriveError, match=r"x.db3: /cam message 0: image encoding 'yuv422'"):
        image_to_bgr(msg, "x.db3: /cam message 0")
    msg = _image_msg(np.zeros((4, 4, 3), np.uint8), "bgr8")
    msg.data = msg.data[:-3]
    with pytest.raises(DriveError, match="do not fit"):
        image_to_bgr(msg)
    bad = T["sensor_msgs/msg/CompressedImage"](header=_header(), format="jpeg",
                                               data=np.arange(20, dtype=np.uint8))
    with pytest.raises(DriveError, match="does not decode"):
        compressed_to_bgr(bad)
    ok, png = cv2.imencode(".png", RNG.integers(0, 256, (16, 24, 3), dtype=np.uint8))
    for data, message in ((png[:-20], "truncated PNG"), (png ^ (np.arange(png.size) == 60),
                                                         "corrupt PNG")):
        cut = T["sensor_msgs/msg/CompressedImage"](header=_header(), format="png",
                                                   data=data.reshape(-1).astype(np.uint8))
        with pytest.raises(DriveError, match=rf"x.mcap: /cam message 3: not a readable image "
                                             rf"\({message}: "):
            compressed_to_bgr(cut, "x.mcap: /cam message 3")


# -- tf and CameraInfo ------------------------------------------------------------------------

def _rigid(seed: int) -> np.ndarray:
    q = np.random.default_rng(seed).normal(size=4)
    m = np.eye(4)
    m[:3, :3] = quaternion_to_matrix(*q)
    m[:3, 3] = np.random.default_rng(seed + 1).normal(size=3)
    return m


def _tf_message(edges):
    msgs = _Msgs(ros1=False)
    transforms = []
    for parent, child, matrix in edges:
        tf = msgs.tf_static(msgs.header(0, parent), matrix[:3]).transforms[0]
        tf.child_frame_id = child
        transforms.append(tf)
    return T["tf2_msgs/msg/TFMessage"](transforms=transforms)


def test_quaternion_round_trip_and_rigid_extrinsic():
    for seed in range(20):
        m = _rigid(seed)[:3, :3]
        np.testing.assert_allclose(quaternion_to_matrix(*matrix_to_quaternion(m)), m, atol=1e-12)
    near = _rigid(5)[:3].copy()
    near[:, :3] += 1e-7  # a 7-digit calibration is orthonormal only to ~1e-7
    assert np.abs(rigid_extrinsic(near) - near).max() < 1e-6


def test_tf_chain_through_the_tree():
    base_from_lidar, base_from_cam, cam_from_optical = _rigid(1), _rigid(2), _rigid(3)
    tree = TfTree()
    tree.add(_tf_message([("base_link", "velo_link", base_from_lidar),
                          ("base_link", "cam", base_from_cam)]), "t")
    tree.add(_tf_message([("cam", "cam_optical", cam_from_optical)]), "t")
    expected = np.linalg.inv(base_from_cam @ cam_from_optical) @ base_from_lidar
    np.testing.assert_allclose(tree.lookup("cam_optical", "velo_link", "t"), expected[:3],
                               atol=1e-12)
    np.testing.assert_allclose(tree.lookup("velo_link", "cam_optical", "t"),
                               np.linalg.inv(expected)[:3], atol=1e-12)
    np.testing.assert_array_equal(tree.lookup("cam", "cam", "t"), np.eye(4)[:3])


def test_tf_direct_edge_is_exact_and_missing_chain_lists_frames():
    edge = _rigid(4)
    tree = TfTree()
    tree.add(_tf_message([("cam", "velo", edge)]), "t")
    got = tree.lookup("cam", "velo", "t")
    q = matrix_to_quaternion(edge[:3, :3])
    np.testing.assert_array_equal(got[:, :3], quaternion_to_matrix(*q))
    np.testing.assert_array_equal(got[:, 3], edge[:3, 3])
    with pytest.raises(DriveError, match=r"bag.mcap: no transform chain from 'imu' to 'cam' "
                                         r"in /tf and /tf_static \(frames: cam, velo\)"):
        tree.lookup("cam", "imu", "bag.mcap")


def test_camera_info_to_p2_r0_and_size():
    msgs = _Msgs(ros1=False)

    class Calib:
        P2 = np.arange(12, dtype=np.float64).reshape(3, 4) + 1
        R0_rect = np.eye(3) * 0.5

    info = msgs.camera_info(msgs.header(0, "cam"), Calib, (640, 480))
    p2, r0, size = camera_info_calibration(info, "x")
    np.testing.assert_array_equal(p2, Calib.P2)
    np.testing.assert_array_equal(r0, Calib.R0_rect)
    assert size == (640, 480)
    info.r = np.zeros(9)
    np.testing.assert_array_equal(camera_info_calibration(info, "x")[1], np.eye(3))
    info.p = np.zeros(12)
    with pytest.raises(DriveError, match="x: CameraInfo P is all zeros"):
        camera_info_calibration(info, "x")
    info.p = np.full(12, np.nan)
    with pytest.raises(DriveError, match="NaN or infinite"):
        camera_info_calibration(info, "x")
