"""ROS bags and MCAP files as drives: rosbag2 (MCAP or sqlite3 storage) and ROS 1 bags are read
and written without a ROS installation (``backend`` says why through ``rosbags``).

``BagDrive`` reads a bag as the frames a KITTI-raw folder gives (PointCloud2, Image or
CompressedImage, CameraInfo, tf); ``write_bag`` converts a KITTI-raw drive into a bag;
``bag_info`` summarises one; ``recording_kind`` tells a bag from a drive folder by content.
"""

from .backend import BagFile, Damage, TopicInfo
from .detect import BAG_KINDS, is_bag, recording_kind
from .drive import STAMP_SOURCES, BagDrive, BagStream, bag_image_size
from .image import compressed_to_bgr, image_to_bgr
from .intensity import INTENSITY_NAMES, IntensityRule
from .pointcloud import cloud_rule, pointcloud2_to_points, points_to_pointcloud2
from .tf import TfTree, matrix_to_quaternion, quaternion_to_matrix, rigid_extrinsic
from .topics import ROLE_TYPES, ROLES, select_topics
from .write import FORMATS, IMAGE_ENCODINGS, BagSummary, format_for, write_bag

__all__ = ["BAG_KINDS", "BagDrive", "BagFile", "BagStream", "BagSummary", "Damage", "FORMATS",
           "IMAGE_ENCODINGS", "INTENSITY_NAMES", "IntensityRule", "ROLES", "ROLE_TYPES",
           "STAMP_SOURCES", "TfTree", "TopicInfo", "bag_image_size", "cloud_rule",
           "compressed_to_bgr", "format_for", "image_to_bgr", "is_bag",
           "matrix_to_quaternion", "pointcloud2_to_points", "points_to_pointcloud2",
           "quaternion_to_matrix", "recording_kind", "rigid_extrinsic", "select_topics",
           "write_bag"]
