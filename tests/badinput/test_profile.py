"""Bad-input catalogue, ``profile``: a missing pipeline or B file, ``--vs-set`` values the YAML
would refuse (NaN, inf, huge, wrong type, unknown param), ``--hz`` and ``--repeat`` out of
bounds or of the wrong type, an unknown ``--profiler``, no ``--out``, and ``--out`` onto an
input or a file that is not ours. Each is one line, exit 2, nothing written."""

from __future__ import annotations

import pytest

from ._runner import assert_one_line_error, assert_unchanged, cli, snapshot
from .test_set_option import PILLARS

# (profile arguments after p.yaml, fragments of the one error line)
ROWS = [
    (["--out", "o", "--vs", "missing.yaml"], ["missing.yaml", "not found"]),
    (["--out", "o", "--vs-set", "detect.score_threshold=.nan"],
     ["B (--vs / --vs-set)", "detect.score_threshold"]),
    (["--out", "o", "--vs-set", "detect.score_threshold=.inf"], ["B (--vs", "score_threshold"]),
    (["--out", "o", "--vs-set", "detect.max_pillars=1e300"], ["B (--vs", "detect.max_pillars"]),
    (["--out", "o", "--vs-set", "detect.max_pillars=many"], ["B (--vs", "detect.max_pillars"]),
    (["--out", "o", "--vs-set", "detect.nope=1"], ["B (--vs", "no param 'nope'"]),
    (["--out", "o", "--vs-set", "detct.sparse=false"], ["B (--vs", "detct"]),
    (["--out", "o", "--set", "detect.max_pillars=.nan"], ["detect.max_pillars"]),
    (["--out", "o", "--hz", "0"], ["--hz", "0"]),
    (["--out", "o", "--hz", "-5"], ["--hz"]),
    (["--out", "o", "--hz", "nan"], ["--hz"]),
    (["--out", "o", "--hz", "1e300"], ["--hz"]),
    (["--out", "o", "--hz", "100000"], ["--hz"]),
    (["--out", "o", "--hz", ""], ["--hz"]),
    (["--out", "o", "--repeat", "0"], ["--repeat", "0"]),
    (["--out", "o", "--repeat", "inf"], ["--repeat"]),
    (["--out", "o", "--profiler", "gprof"], ["--profiler", "gprof"]),
    ([], ["--out"]),
    (["--out", "p.yaml"], ["--out", "p.yaml"]),
    (["--out", "notes.txt"], ["--out", "notes.txt"]),
]


@pytest.mark.parametrize(("args", "fragments"), ROWS, ids=[" ".join(r[0]) or "none"
                                                             for r in ROWS])
def test_profile_bad_input(tmp_path, args, fragments):
    (tmp_path / "p.yaml").write_text(PILLARS)
    (tmp_path / "notes.txt").write_text("mine\n")
    before = snapshot(tmp_path)
    result = cli("profile", "p.yaml", *args, cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    assert_unchanged(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "p.yaml"]


def test_profile_missing_pipeline(tmp_path):
    result = cli("profile", "nope.yaml", "--out", "o", cwd=tmp_path)
    assert_one_line_error(result, "nope.yaml")
    assert list(tmp_path.iterdir()) == []
