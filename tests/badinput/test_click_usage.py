"""Bad-input catalogue, the command line itself: click's own usage errors (an unknown option or
verb, a value outside an option's type or range, a missing argument) are one line too.

click prints the usage, a hint and the error on three lines; the CLI prints ``error: WHAT (see
'COMMAND --help')`` and exits 2, like every other usage error. Nothing here writes a file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ._runner import REPO, assert_one_line_error, cli

FUSION = str(REPO / "configs" / "fusion.yaml")
DRIVE = str(REPO / "datasets" / "sample_drive")
HUGE = str(10**30)

# (arguments, fragments the one error line must hold)
ROWS = {
    "top-unknown-option": (["--bogus"], ["No such option '--bogus'", "'cuvil-perception --help'"]),
    "unknown-verb": (["frobnicate"], ["No such command 'frobnicate'"]),
    "nested-unknown-verb": (["cache", "frobnicate"], ["'frobnicate'", "cuvil-perception cache"]),
    "missing-argument": (["run"], ["Missing argument 'PIPELINE'", "'cuvil-perception run --help'"]),
    "missing-drives": (["fleet", "run", FUSION], ["Missing argument 'DRIVES...'"]),
    "unknown-option": (["run", FUSION, "--bogus"], ["No such option '--bogus'"]),
    "int-zero": (["fleet", "run", FUSION, DRIVE, "--workers", "0"], ["'--workers'", "0"]),
    "int-huge": (["make-drive", "x", "--frames", HUGE], ["'--frames'", HUGE]),
    "int-empty": (["make-drive", "x", "--frames", ""], ["'--frames'"]),
    "int-wrong-type": (["make-drive", "x", "--frames", "two"], ["'--frames'", "'two'"]),
    "int-fraction": (["make-drive", "x", "--seed", "1.5"], ["'--seed'", "'1.5'"]),
    "int-negative-seed": (["make-drive", "x", "--seed", "-1"], ["'--seed'", "-1"]),
    "float-huge-resolution": (["render", "x.jsonl", "--out", "v", "--resolution", "1e9"],
                              ["'--resolution'", "1000000000.0"]),
    "float-nan": (["run", FUSION, "--rate", "nan"], ["'--rate'", "nan"]),
    "float-inf": (["run", FUSION, "--rate", "inf"], ["'--rate'", "inf"]),
    "float-negative": (["run", FUSION, "--rate", "-1"], ["'--rate'", "-1"]),
    "float-wrong-type": (["fleet", "eval", FUSION, DRIVE, "--iou", "half"], ["'--iou'", "half"]),
    "choice": (["convert", DRIVE, "x.mcap", "--format", "hdf5"], ["'--format'", "'hdf5'"]),
    "flag-with-value": (["run", FUSION, "--enforce-deadlines=yes"], ["--enforce-deadlines"]),
}


@pytest.mark.parametrize(("args", "fragments"), list(ROWS.values()), ids=list(ROWS))
def test_click_usage_errors_are_one_line_exit_2(tmp_path, args, fragments):
    assert_one_line_error(cli(*args, cwd=tmp_path), *fragments)
    assert not list(Path(tmp_path).iterdir())


@pytest.mark.parametrize("group", [[], ["fleet"], ["cache"], ["bag"], ["rt"]])
def test_a_group_called_alone_still_prints_its_help(group):
    result = cli(*group)
    shown = result.stdout + result.stderr  # click 8.2+: on stderr, exit 2
    assert shown.startswith("Usage: cuvil-perception") and "Commands:" in shown
