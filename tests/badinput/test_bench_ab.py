"""Bad-input catalogue, ``bench A --vs B`` (the A/B board): a missing B file, ``--vs-model`` on
an unknown stage, a stage without a model, a model that is not bundled, a malformed STAGE=MODEL,
a ``--vs-set`` value the YAML would refuse, ``--repeat`` out of bounds, ``--budgets`` together
with an A/B option (refused: budgets check one pipeline) and neither. Each is one line, exit 2,
nothing written."""

from __future__ import annotations

import pytest

from ._runner import assert_one_line_error, assert_unchanged, cli, snapshot
from .test_set_option import PILLARS

# (bench arguments after p.yaml, fragments of the one error line)
ROWS = [
    (["--vs", "missing.yaml"], ["missing.yaml", "not found"]),
    (["--vs", "."], ["--vs"]),
    (["--vs-model", "detct=builtin:pointpillars_cuvil_demo.int8.onnx"],
     ["--vs-model detct", "no stage 'detct'", "did you mean 'detect'?"]),
    (["--vs-model", "log=builtin:pointpillars_cuvil_demo.int8.onnx"],
     ["--vs-model log", "takes no model"]),
    (["--vs-model", "detect=builtin:nope.onnx"],
     ["B (--vs / --vs-set / --vs-model)", "detect.model", "no bundled model 'nope.onnx'"]),
    (["--vs-model", "detect=missing.onnx"], ["B (--vs", "missing.onnx", "no such file"]),
    (["--vs-model", "detect"], ["--vs-model 'detect'", "expected STAGE=MODEL"]),
    (["--vs-model", "detect="], ["expected STAGE=MODEL"]),
    (["--vs-model", "=x.onnx"], ["expected STAGE=MODEL"]),
    (["--vs-model", ""], ["expected STAGE=MODEL"]),
    (["--vs-set", "detect.score_threshold=.nan"], ["B (--vs", "detect.score_threshold"]),
    (["--vs-set", "detect.score_threshold=.inf"], ["B (--vs", "detect.score_threshold"]),
    (["--vs-set", "detect.max_pillars=1e300"], ["B (--vs", "detect.max_pillars"]),
    (["--vs-set", "detect.max_pillars=many"], ["B (--vs", "detect.max_pillars"]),
    (["--vs-set", "detect.nope=1"], ["B (--vs", "no param 'nope'"]),
    (["--vs-set", "detect.sparse=false", "--repeat", "0"], ["--repeat", "0"]),
    (["--vs-set", "detect.sparse=false", "--repeat", "-1"], ["--repeat"]),
    (["--vs-set", "detect.sparse=false", "--repeat", "nan"], ["--repeat"]),
    (["--vs-set", "detect.sparse=false", "--repeat", "1e300"], ["--repeat"]),
    (["--vs-set", "detect.sparse=false", "--repeat", ""], ["--repeat"]),
    (["--vs", "p.yaml", "--budgets", "b.yaml"], ["--budgets checks one pipeline", "--vs"]),
    ([], ["bench needs --budgets", "--vs"]),
]


@pytest.mark.parametrize(("args", "fragments"), ROWS, ids=[" ".join(r[0]) or "none"
                                                             for r in ROWS])
def test_bench_ab_bad_input(tmp_path, args, fragments):
    (tmp_path / "p.yaml").write_text(PILLARS)
    (tmp_path / "b.yaml").write_text("budgets:\n  - {stage: detect, p99_ms: 1000}\n")
    before = snapshot(tmp_path)
    result = cli("bench", "p.yaml", "--frames", "1", *args, cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    assert_unchanged(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.yaml", "p.yaml"]


def test_bench_ab_plot_refuses_to_overwrite_an_input(tmp_path):
    (tmp_path / "p.yaml").write_text(PILLARS)
    (tmp_path / "b.yaml").write_text(PILLARS)
    result = cli("bench", "p.yaml", "--vs", "b.yaml", "--plot", "b.yaml", cwd=tmp_path)
    assert_one_line_error(result, "--plot")
    assert (tmp_path / "b.yaml").read_text() == PILLARS
