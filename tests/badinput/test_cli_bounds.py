"""Bad-input catalogue, CLI numbers and names with no natural bound: a replay rate of 1e-300
(the pacing arithmetic overflowed), a 5,000-character library prefix (the file system refused
the name half-way through writing the library), an output name longer than a file system
takes. Each is one line, exit 2, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._runner import REPO, assert_one_line_error, cli, replay_work

@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("bounds")
    replay_work(work, 2, seed=14)
    return work


@pytest.mark.parametrize("rate", ["1e-300", "1e-4", "5e-324", "1e300", "1001"])
def test_run_rate_out_of_range(work, rate):
    result = cli("run", str(work / "p.yaml"), "--replay", str(work / "drive"), "--rate", rate,
                 "--out", str(work / f"r{rate}.jsonl"), cwd=work)
    assert_one_line_error(result, "--rate", "from 0.001 to 1000")
    assert not (work / f"r{rate}.jsonl").exists()


@pytest.mark.parametrize("rate", ["0", "0.001", "1000"])
def test_run_rate_at_the_bounds_runs(work, rate):
    result = cli("run", str(work / "p.yaml"), "--replay", str(work / "drive"), "--frames", "1",
                 "--rate", rate, "--out", str(work / "ok.jsonl"), "--no-shed", cwd=work)
    assert result.code == 0, result.stderr


@pytest.mark.parametrize("prefix", ["p" * 5000, "p" * 65])
def test_library_prefix_too_long_writes_nothing(tmp_path, prefix):
    out = tmp_path / "lib"
    result = cli("compile", str(REPO / "configs" / "lidar_pillars.yaml"), "--target",
                 "x86_64-linux-gnu", "--library", str(out), "--prefix", prefix)
    assert_one_line_error(result, "--prefix", f"{len(prefix)} characters", "at most 64")
    assert not out.exists()


def test_an_output_name_longer_than_the_file_system_takes(work):
    name = "n" * 300 + ".jsonl"
    result = cli("run", str(work / "p.yaml"), "--replay", str(work / "drive"), "--out",
                 str(work / name), cwd=work)
    assert_one_line_error(result, "file name too long")
    assert not any(len(p.name) > 255 for p in work.iterdir())


@pytest.mark.parametrize("linger", ["nan", "inf", "-inf", "-1", "601", "1e300", "", "soon"])
def test_run_metrics_linger_out_of_range(work, linger):
    result = cli("run", str(work / "p.yaml"), "--replay", str(work / "drive"), "--metrics",
                 "127.0.0.1:0", "--metrics-linger", linger, "--out",
                 str(work / f"linger{linger}.jsonl"), cwd=work)
    assert_one_line_error(result, "--metrics-linger")
    assert not (work / f"linger{linger}.jsonl").exists()


@pytest.mark.parametrize("linger", ["0", "0.05"])
def test_run_metrics_linger_in_range_runs(work, linger):
    result = cli("run", str(work / "p.yaml"), "--replay", str(work / "drive"), "--frames", "1",
                 "--metrics", "127.0.0.1:0", "--metrics-linger", linger, "--out",
                 str(work / "linger_ok.jsonl"), "--no-shed", cwd=work)
    assert result.code == 0, result.stderr
    assert ("--metrics-linger" in result.stderr) == (linger != "0")


@pytest.mark.parametrize("url", ["", "127.0.0.1:4318", "grpc://127.0.0.1:4317", "http://",
                                 "http://127.0.0.1:99999", "http://127.0.0.1:0",
                                 "http://h:4318/?q=1", "nan", "http://" + "h" * 3000])
def test_run_otlp_endpoint_malformed(work, url):
    result = cli("run", str(work / "p.yaml"), "--replay", str(work / "drive"), "--otlp", url,
                 "--out", str(work / "otlp.jsonl"), cwd=work)
    assert_one_line_error(result, "--otlp")
    assert not (work / "otlp.jsonl").exists()
