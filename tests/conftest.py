"""Shared fixtures: where the real test data lives, and an isolated kernel cache per session."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture()
def sample_drive() -> Path:
    """The labelled sample drive bundled in datasets/ (skips when it is absent)."""
    drive = REPO / "datasets" / "sample_drive"
    if not (drive / "labels").is_dir():
        pytest.skip("no bundled labelled sample drive")
    return drive


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the repository; tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real test data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def kitti_frames(shared_data) -> list[Path]:
    frames = sorted((shared_data / "kitti_velodyne").glob("*.bin"))
    if not frames:
        pytest.skip("no KITTI frames in ../shared/data/kitti_velodyne")
    return frames


@pytest.fixture(autouse=True, scope="session")
def _session_cache_dir(tmp_path_factory):
    """Keep the tests' compiled kernels out of the user's cache (one warm cache per test run)."""
    import os

    previous = os.environ.get("CUVIL_CACHE_DIR")
    os.environ["CUVIL_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernel-cache"))
    yield
    if previous is None:
        os.environ.pop("CUVIL_CACHE_DIR", None)
    else:
        os.environ["CUVIL_CACHE_DIR"] = previous


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """An empty kernel-cache directory for this test, and no memoised kernels."""
    from cuvil_perception.compile import registry

    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUVIL_NO_DISK_CACHE", raising=False)
    registry.clear_memory()
    yield tmp_path / "cache"
    registry.clear_memory()
