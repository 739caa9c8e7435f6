"""Latency budgets: the strict file format, verdicts, `bench` exit codes, plots, pytest plugin."""

from __future__ import annotations

from pathlib import Path

import cv2
import pytest
from click.testing import CliRunner

import cuvil_perception.testing.ops  # noqa: F401  (registers test.*)
from cuvil_perception.cli.app import cli
from cuvil_perception.errors import ConfigError
from cuvil_perception.graph import load_pipeline
from cuvil_perception.rt import BREACH_EXIT_CODE, bench_pipeline, load_budgets, parse_budgets

pytest_plugins = ("pytester",)

PIPELINE = """\
pipeline: tiny
stages:
  - {id: src, op: test.scripted, params: {frames: 6, n: 64}}
  - {id: work, op: test.work, inputs: {x: src/value}, params: {reps: 2}}
  - {id: out, op: test.lines, inputs: {y: work/y}, params: {path: out.jsonl}}
"""


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(PIPELINE)
    return path


def budgets_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "budgets.yaml"
    path.write_text(body)
    return path


def test_parse_absolute_relative_and_named_references(tmp_path):
    spec = parse_budgets(
        "references:\n  work_numpy: {reference_of: work}\n"
        "budgets:\n"
        "  - {stage: work, p99_ms: 5, p50_ms: 2}\n"
        "  - {stage: work, p99_ratio: 0.5, reference: work_numpy}\n"
        "  - {stage: e2e, max_ratio: 3, reference: work}\n", tmp_path / "b.yaml")
    kinds = [(b.stage, b.metric, b.kind, b.limit, b.reference) for b in spec.budgets]
    assert kinds == [("work", "p99", "ms", 5.0, None), ("work", "p50", "ms", 2.0, None),
                     ("work", "p99", "ratio", 0.5, "work_numpy"),
                     ("e2e", "max", "ratio", 3.0, "work")]
    assert spec.reference_stages() == ("work",)
    assert spec.reference_row("work_numpy") == "work@reference"
    assert spec.reference_row("work") == "work"
    assert spec.budgets[2].loc.line == 5


@pytest.mark.parametrize("body, line, needle", [
    ("budgets:\n  - {stage: a, p99_mss: 5}\n", 2, "unknown field 'p99_mss'"),
    ("budgets:\n  - {stage: a, p99_ratio: 0.2}\n", 2, "needs 'reference"),
    ("budgets:\n  - stage: a\n    p99_ms: -1\n", 3, "positive"),
    ("budgets:\n  - stage: a\n    p99_ms: fast\n", 3, "must be int or float"),
    ("budgets:\n  - stage: a\n    p99_ms: .nan\n", 3, "positive finite number, got nan"),
    ("budgets:\n  - stage: a\n    p50_ms: .inf\n", 3, "positive finite number, got inf"),
    ("budgets:\n  - stage: a\n    p50_ms: 1e400\n", 3, "positive finite number, got inf"),
    ("budgets:\n  - {stage: a}\n", 2, "has no limit"),
    ("budget:\n  - {stage: a, p99_ms: 1}\n", 1, "did you mean 'budgets'"),
    ("budgets: [\n", 2, "YAML syntax error"),
    ("references:\n  r: {stage: a}\nbudgets:\n  - {stage: a, p99_ms: 1}\n", 2, "unknown field"),
])
def test_bad_budget_files_name_file_line_and_field(tmp_path, body, line, needle):
    path = budgets_file(tmp_path, body)
    with pytest.raises(ConfigError) as caught:
        load_budgets(path)
    message = str(caught.value)
    assert needle in message and f"{path}:{line}:" in message


def test_budget_checked_against_the_pipeline(tmp_path, tiny):
    pipeline = load_pipeline(tiny)
    spec = parse_budgets("budgets:\n  - {stage: wrok, p99_ms: 1}\n", tmp_path / "b.yaml")
    with pytest.raises(ConfigError, match=r"b.yaml:2:.*no stage 'wrok'.*did you mean 'work'"):
        spec.check_pipeline(pipeline)
    spec = parse_budgets("references: {r: {reference_of: out}}\n"
                         "budgets:\n  - {stage: work, p99_ratio: 1, reference: r}\n",
                         tmp_path / "b.yaml")
    with pytest.raises(ConfigError, match="has no reference_process"):
        spec.check_pipeline(pipeline)


def test_verdicts_absolute_and_relative(tmp_path, tiny):
    spec = parse_budgets("references: {numpy: {reference_of: work}}\nbudgets:\n"
                         "  - {stage: work, p99_ms: 10000}\n"
                         "  - {stage: work, p50_ratio: 1000, reference: numpy}\n"
                         "  - {stage: e2e, p99_ms: 0.000001}\n", tmp_path / "b.yaml")
    report = bench_pipeline(tiny, spec, repeat=2, workers=1)
    assert [v.passed for v in report.verdicts] == [True, True, False]
    assert not report.passed
    assert report.report.row("work").frames == 12  # two clean runs pooled
    assert not report.report.has("work@reference")  # references stay out of the clean runs
    assert report.reference_report.row("work@reference").frames == 12
    assert len(report.runs) == 4
    ratio = report.verdicts[1]
    reference_p50 = report.reference_report.row("work@reference").p50
    assert ratio.allowed_ms == pytest.approx(1000 * reference_p50)
    assert "BREACH" in report.text() and "e2e" in report.text()


def test_bench_cli_pass_and_breach_exit_codes_and_plots(tmp_path, tiny):
    runner = CliRunner()
    ok = budgets_file(tmp_path, "budgets:\n  - {stage: work, p99_ms: 10000}\n")
    result = runner.invoke(cli, ["bench", str(tiny), "--budgets", str(ok), "--plot",
                                 str(tmp_path / "plots")])
    assert result.exit_code == 0, result.output
    assert "pass" in result.output and "all budgets hold" in result.output
    for name in ("latency_histogram.png", "timeline.png"):
        image = cv2.imread(str(tmp_path / "plots" / name))
        assert image is not None and image.shape[0] > 100 and image.std() > 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("budgets:\n  - {stage: work, p99_ms: 0.000001}\n")
    result = runner.invoke(cli, ["bench", str(tiny), "--budgets", str(bad), "--repeat", "2"])
    assert result.exit_code == BREACH_EXIT_CODE == 1
    assert "BREACH" in result.output


def test_bench_cli_usage_errors_exit_2(tmp_path, tiny):
    runner = CliRunner()
    wrong = budgets_file(tmp_path, "budgets:\n  - {stage: nope, p99_ms: 1}\n")
    result = runner.invoke(cli, ["bench", str(tiny), "--budgets", str(wrong)])
    assert result.exit_code == 2 and "no stage 'nope'" in result.output
    result = runner.invoke(cli, ["bench", str(tiny), "--budgets", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2 and "cannot read budgets file" in result.output


def test_pytest_plugin_option_and_fixture(pytester, tmp_path, tiny):
    passing = budgets_file(tmp_path, f"pipeline: {tiny}\nframes: 3\nbudgets:\n"
                                     "  - {stage: work, p99_ms: 10000}\n")
    breaching = tmp_path / "breach.yaml"
    breaching.write_text(f"pipeline: {tiny}\nbudgets:\n  - {{stage: e2e, p99_ms: 0.000001}}\n")
    pytester.makepyfile(test_user="""
        import cuvil_perception.testing.ops

        def test_latency(cuvil_budget):
            report = cuvil_budget()
            assert report.passed and report.report.row("work").frames == 3
    """)
    assert pytester.runpytest_inprocess("--cuvil-budgets", str(passing)).ret == 0
    failed = pytester.runpytest_inprocess("--cuvil-budgets", str(breaching))
    assert failed.ret == 1
    failed.stdout.fnmatch_lines(["*latency budget breached*", "*e2e*BREACH*"])
    skipped = pytester.runpytest_inprocess()
    skipped.assert_outcomes(skipped=1)


def test_pytest_budgets_fail_the_session_without_any_fixture_call(pytester, tmp_path, tiny):
    breaching = tmp_path / "breach.yaml"
    breaching.write_text(f"pipeline: {tiny}\nframes: 2\nbudgets:\n"
                         "  - {stage: e2e, p99_ms: 0.000001}\n")
    holding = tmp_path / "hold.yaml"
    holding.write_text(f"pipeline: {tiny}\nframes: 2\nbudgets:\n  - {{stage: e2e, p99_ms: 1000000}}\n")
    nameless = tmp_path / "nameless.yaml"
    nameless.write_text("budgets:\n  - {stage: e2e, p99_ms: 1000000}\n")
    pytester.makepyfile(test_other="import cuvil_perception.testing.ops\n\n"
                                   "def test_unrelated():\n    assert True\n")
    failed = pytester.runpytest_inprocess("--cuvil-budgets", str(breaching))
    assert failed.ret == 1
    failed.assert_outcomes(passed=1, failed=1)
    failed.stdout.fnmatch_lines(["*latency budget breached*", "*e2e*BREACH*"])
    assert pytester.runpytest_inprocess("--cuvil-budgets", str(holding)).ret == 0
    unchecked = pytester.runpytest_inprocess("--cuvil-budgets", str(nameless))
    assert unchecked.ret == 1
    unchecked.stdout.fnmatch_lines(["*names no 'pipeline:'*nothing checked these budgets*"])
