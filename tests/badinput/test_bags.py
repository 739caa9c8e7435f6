"""Bad-input catalogue, ROS bags / MCAP / Foxglove: the ``bag`` source's and the ``mcap`` sink's
params (NaN, inf, huge, empty, wrong type), files that are not bags, and the ``bag``,
``convert``, ``make-drive --format`` and ``run --foxglove`` verbs: one clear error, exit 2,
nothing that existed before changed."""

from __future__ import annotations

import pytest

from cuvil_perception.drives.recording import open_recording
from cuvil_perception.errors import DriveError, PipelineError
from cuvil_perception.graph import Pipeline

from ._runner import REPO, assert_one_line_error, assert_unchanged, cli, snapshot

NAN, INF = float("nan"), float("inf")

ROWS = [
    ("intensity_scale", NAN, "must be a finite number"),
    ("intensity_scale", INF, "must be a finite number"),
    ("intensity_scale", -1.0, "must be in (0, 1e+06]"),
    ("intensity_scale", 0.0, "must be in (0, 1e+06]"),
    ("intensity_scale", 1e300, "must be in (0, 1e+06]"),
    ("intensity_scale", "x", "must be a number"),
    ("intensity_scale", "auto", "must be a number"),  # null (the default) is the convention
    ("intensity_scale", "/255", "must be a number"),
    ("intensity_scale", [1.0], "must be a number"),
    ("intensity_scale", True, "must be a number"),
    ("stamp", "wall", "must be one of 'header', 'log'"),
    ("stamp", "", "must be one of 'header', 'log'"),
    ("stamp", 1, "must be a string"),
    ("topics", ["/velodyne_points"], "must be a mapping"),
    ("topics", "points", "must be a mapping"),
    ("topics", {"lidar": "/velodyne_points"}, "unknown stream 'lidar'"),
    ("topics", {"points": ""}, "topics.points must be a topic name"),
    ("topics", {"points": 5}, "topics.points must be a topic name"),
    ("topics", {"image": None}, "topics.image must be a topic name"),
    ("sync_tolerance_ms", NAN, "must be a finite number (ms)"),
    ("sync_tolerance_ms", INF, "must be a finite number (ms)"),
    ("sync_tolerance_ms", -5.0, "must be in [0, 10000] ms"),
    ("loop", "yes", "must be a boolean"),
]


# ``intensity_scale`` is a ``replay`` param too (``--replay BAG`` on a shipped config)
PARAM_ROWS = [("bag", *row) for row in ROWS] + \
    [("replay", *row) for row in ROWS if row[0] == "intensity_scale"]


@pytest.mark.parametrize("op,param,value,message", PARAM_ROWS)
def test_bag_params_are_checked_when_the_pipeline_is_built(op, param, value, message):
    p = Pipeline("bad")
    p.add("drive", op, **{param: value})
    with pytest.raises(PipelineError) as info:
        p.validate()
    assert f"stage 'drive': field 'params.{param}'" in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize("content", [b"", b"\x00" * 100, b"#ROSBAG V1.2\n", b"SQLite"])
def test_files_that_are_not_bags_or_drives(tmp_path, content):
    path = tmp_path / "drive.mcap"
    path.write_bytes(content)
    with pytest.raises(DriveError, match=rf"{path}: neither a drive folder .* nor a ROS bag"):
        open_recording(path, 50.0)


@pytest.mark.parametrize("args,fragment", [
    (("convert", "datasets/sample_drive", "{tmp}/o.mcap", "--format", "hdf5"), "'hdf5'"),
    (("convert", "datasets/sample_drive", "{tmp}/o.mcap", "--image", "tiff"), "'tiff'"),
    (("convert", "{tmp}", "{tmp}-o.mcap"), "missing stream folder"),
    (("convert", "datasets/sample_drive", "README.md"), "README.md: exists"),
    (("convert", "datasets/sample_drive", "{tmp}/o.bin", "--format", "mcap"), "must end in .mcap"),
    (("make-drive", "{tmp}/d", "--format", "sqlite3"), "must end in .db3"),
    (("convert", "datasets/sample_drive", "datasets/sample_drive/x.mcap"), "rule 'input'"),
    (("bag", "info", "{tmp}/none.mcap"), "does not exist"),
    (("bag", "info", "README.md"), "README.md: not a ROS bag or MCAP file"),
    (("bag", "info", "README.md", "--topic", "points"), "expected STREAM=TOPIC"),
    (("bag", "info", "README.md", "--topic", "lidar=/velodyne_points"), "unknown stream 'lidar'"),
    (("make-drive", "{tmp}/d.mcap", "--format", "zip"), "'zip'"),
    (("make-drive", "{tmp}/d.mcap", "--format", "mcap", "--frames", "0"), "--frames"),
    (("make-drive", "README.md", "--format", "mcap", "--force"), "exists"),
    (("run", "configs/fusion.yaml", "--replay", "README.md"), "neither a drive folder"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, args, fragment):
    before = snapshot(REPO / "README.md", REPO / "datasets" / "sample_drive")
    result = cli(*(a.format(tmp=tmp_path) for a in args), cwd=REPO)
    assert_one_line_error(result, fragment)
    assert_unchanged(before)
    assert not list(tmp_path.iterdir())


MCAP_ROWS = [
    ("path", None, "give a path, a live HOST:PORT, or both"),
    ("path", 5, "must be a path"),
    ("live", "", "expected HOST:PORT"),
    ("live", "localhost:99999", "port must be 0..65535"),
    ("live", "localhost:http", "port must be 0..65535"),
    ("live", 8765, "must be a string"),
    ("live_wait", NAN, "must be a finite number (s)"),
    ("live_wait", INF, "must be a finite number (s)"),
    ("live_wait", -1.0, "must be in [0, 3600] s"),
    ("live_wait", 1e300, "must be in [0, 3600] s"),
    ("live_wait", "10", "must be a number"),
    ("live_wait", None, "must be a number"),
    ("image_format", "gif", "must be one of 'jpeg', 'png', 'raw'"),
    ("jpeg_quality", 0, "must be in [1, 100]"),
    ("jpeg_quality", 101, "must be in [1, 100]"),
    ("jpeg_quality", 10**12, "must be in [1, 100]"),
    ("jpeg_quality", 50.5, "must be an integer"),
    ("jpeg_quality", NAN, "must be an integer"),
    ("compression", "gzip", "must be one of 'lz4', 'zstd', 'none'"),
    ("topic_prefix", "cuvil", "must start with '/'"),
    ("topic_prefix", "", "must start with '/'"),
    ("topic_prefix", "/a b ", "must start with '/'"),
    ("lidar_frame", "", "must be a frame id"),
    ("camera_frame", "velo_link", "must differ from lidar_frame"),
    ("class_names", [], "non-empty list"),
    ("class_names", ["car", ""], "non-empty list"),
    ("class_names", "car", "must be a list"),
    ("class_names", [1, 2], "must be a list of string"),
    ("background_frames", -1, "must be in [0, 64]"),
    ("background_frames", 65, "must be in [0, 64]"),
    ("background_frames", 10**12, "must be in [0, 64]"),
    ("background_frames", 1.5, "must be an integer"),
    ("background_frames", NAN, "must be an integer"),
    ("background_frames", float("inf"), "must be an integer"),
    ("background_frames", "2", "must be an integer"),
]


@pytest.mark.parametrize("param,value,message", MCAP_ROWS)
def test_mcap_sink_params_are_checked_when_the_pipeline_is_built(tmp_path, param, value,
                                                                 message):
    p = Pipeline("bad")
    drive = p.add("drive", "replay")
    params = {"path": str(tmp_path / "o.mcap"), param: value}
    p.add("fx", "mcap", inputs={"P2": drive.out("P2")}, **params)
    with pytest.raises(PipelineError) as info:
        p.validate()
    assert f"stage 'fx': field 'params.{param}'" in str(info.value)
    assert message in str(info.value)


def test_mcap_sink_rejects_inputs_it_cannot_draw(tmp_path):
    p = Pipeline("bad")
    drive = p.add("drive", "replay")
    p.add("fx", "mcap", inputs={"labels": drive.out("labels")}, path=str(tmp_path / "o.mcap"))
    with pytest.raises(PipelineError, match="cannot feed input 'labels'"):
        p.validate()
    p = Pipeline("bad")
    drive = p.add("drive", "replay")
    p.add("fx", "mcap", inputs={"stuff": drive.out("P2")}, path=str(tmp_path / "o.mcap"))
    with pytest.raises(PipelineError, match="op 'mcap' has no input 'stuff'"):
        p.validate()


@pytest.mark.parametrize("address", ["localhost:99999", "host:port", ":-1"])
def test_run_foxglove_bad_address_is_one_line_exit_2(address):
    result = cli("run", "configs/fusion.yaml", "--foxglove", address, "--frames", "1", cwd=REPO)
    assert_one_line_error(result, "params.live", "port must be")


@pytest.mark.parametrize("verb", ["inspect", "run"])
@pytest.mark.parametrize("value,message", [
    (".nan", "must be a finite number"), (".inf", "must be a finite number"),
    ("-1", "must be in (0, 1e+06]"), ("0", "must be in (0, 1e+06]"),
    ("1e300", "must be in (0, 1e+06]"), ("auto", "must be a number"),
    ("/255", "must be a number"), ("[1]", "must be a number")])
def test_set_intensity_scale_bad_values_are_one_line_exit_2(verb, value, message):
    before = snapshot(REPO / "configs")
    result = cli(verb, "configs/lidar_pillars.yaml", "--set", f"drive.intensity_scale={value}",
                 cwd=REPO)
    assert_one_line_error(result, "--set drive.intensity_scale", message)
    assert_unchanged(before)


def _int_intensity_bag(path, dtype: str):
    """A ROS 2 MCAP (rosbags) of 2 synchronised frames whose clouds store every field, the
    intensity included, as ``dtype``."""
    import numpy as np
    from rosbags.rosbag2 import StoragePlugin, Writer

    from cuvil_perception.drives import load_calibration
    from cuvil_perception.drives.bag import points_to_pointcloud2
    from cuvil_perception.drives.bag.image import bgr_to_image
    from cuvil_perception.drives.bag.write import _Msgs

    msgs, calib = _Msgs(ros1=False), load_calibration(REPO / "datasets" / "sample_drive")
    kinds = {"points": "sensor_msgs/msg/PointCloud2", "image": "sensor_msgs/msg/Image",
             "info": "sensor_msgs/msg/CameraInfo", "tf": "tf2_msgs/msg/TFMessage"}
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {k: writer.add_connection(f"/{k}", t, typestore=msgs.store)
                 for k, t in kinds.items()}

        def put(key, stamp, msg):
            writer.write(conns[key], stamp, msgs.serialize(msg, kinds[key]))

        tf = msgs.tf_static(msgs.header(0, "cam"), calib.Tr_velo_to_cam)
        tf.transforms[0].child_frame_id = "lidar"
        put("tf", 1, tf)
        for k in range(2):
            t = 1_000_000_000 + k * 100_000_000
            cloud = np.array([[5, 1, 0, 20], [8, -2, 0, 100]], np.float32)
            put("points", t, points_to_pointcloud2(msgs.types, cloud, msgs.header(t, "lidar"),
                                                   dtype=dtype))
            header = msgs.header(t, "cam")
            put("image", t, bgr_to_image(msgs.types, np.zeros((4, 6, 3), np.uint8), header))
            put("info", t, msgs.camera_info(header, calib, (6, 4)))
    return path


@pytest.mark.parametrize("verb", ["inspect", "run"])
@pytest.mark.parametrize("dtype,name", [("<i1", "int8"), ("<i2", "int16"), ("<i4", "int32"),
                                        ("<u4", "uint32")])
def test_intensity_types_without_a_convention_are_one_line_exit_2(tmp_path, verb, dtype, name):
    bag = _int_intensity_bag(tmp_path / "int.mcap", dtype)
    before = snapshot(bag)
    out = ("--out", str(tmp_path / "o.jsonl")) if verb == "run" else ()
    result = cli(verb, "configs/lidar_pillars.yaml", "--replay", str(bag), *out, cwd=REPO)
    assert_one_line_error(result, f"{bag}: /points message 0: PointCloud2 field 'intensity' "
                          f"({name}): no convention gives its scale",
                          "--set drive.intensity_scale=")
    assert_unchanged(before)
    assert not (tmp_path / "o.jsonl").exists()
