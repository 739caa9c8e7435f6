"""Bad-input catalogue, params: rows generated from every op's param declarations.

For every numeric param (int, float, or a list of them) of every op the package registers, a
pipeline with that one bad value goes through ``cuvil-perception inspect``: NaN, +-inf, a huge
value, an empty value, a wrong type and a value just outside the declared range must each exit 2
with one line naming the pipeline file:line, the stage and ``params.NAME``. A new param gets its
rows without anyone writing them; a numeric param without a declared range fails
`test_every_numeric_param_declares_its_range`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cuvil_perception.testing.ops  # noqa: F401  (registers the public test ops: rows too)
from cuvil_perception.graph import Range, registered
from cuvil_perception.graph.params import REQUIRED

from ._runner import REPO, assert_one_line_error, assert_unchanged, cli, snapshot

HUGE_INT = 10**24
HUGE_FLOAT = "1.0e+300"  # with a dot: YAML 1.1 reads 1e300 as a string


def _ops() -> dict:
    """Ops of the package itself (tests/ may register throw-away ops of their own)."""
    return {name: cls for name, cls in registered().items()
            if cls.__module__.startswith("cuvil_perception.")}


def _numeric(cls) -> list:
    return [param for param in cls.params if param.numeric]


def _below(param) -> str | None:
    """A YAML value just below the declared range (None when unbounded below)."""
    low = param.range.low if param.range is not None else None
    if low is None:
        return None
    kind = param.item_type if param.type is list else param.type
    if param.range.low_open:
        value = low
    else:
        value = low - 1 if kind is int else low - max(abs(low), 1.0) * 1e-3
    return repr(value)


def _bad_values(param) -> dict[str, str]:
    """kind -> YAML text of a bad value for ``param``."""
    is_list = param.type is list
    kind = param.item_type if is_list else param.type
    count = max(param.length or 1, param.min_items, 1)
    huge = str(HUGE_INT) if kind is int else HUGE_FLOAT

    def fill(item: str) -> str:
        return "[" + ", ".join([item] * count) + "]" if is_list else item

    values = {"nan": fill(".nan"), "inf": fill(".inf"), "-inf": fill("-.inf"),
              "huge": fill(huge), "wrong-type": fill('"abc"'),
              "empty": "[]" if is_list else '""'}
    if is_list and not (param.length or param.min_items):
        del values["empty"]  # an empty list is a valid value of this param
    below = _below(param)
    if below is not None:
        values["below-range"] = fill(below)
    if is_list:
        values["scalar-for-list"] = "1"
    return values


def _rows() -> list:
    rows = []
    for op_name, cls in _ops().items():
        for param in _numeric(cls):
            for kind, text in _bad_values(param).items():
                rows.append(pytest.param(op_name, param.name, text,
                                         id=f"{op_name}.{param.name}-{kind}"))
    return rows


def _required_params(cls, skip: str) -> list[str]:
    """YAML lines giving each required param (other than ``skip``) a harmless value."""
    lines = []
    for param in cls.params:
        if param.default is REQUIRED and param.name != skip:
            value = param.choices[0] if param.choices else "placeholder.onnx"
            lines.append(f"      {param.name}: {value}")
    return lines


@pytest.mark.parametrize(("op_name", "param_name", "value"), _rows())
def test_bad_numeric_param_is_one_line_exit_2(tmp_path, op_name, param_name, value):
    cls = _ops()[op_name]
    text = "\n".join(["pipeline: badparam", "stages:", "  - id: probe", f"    op: {op_name}",
                      "    params:", *_required_params(cls, param_name),
                      f"      {param_name}: {value}", ""])
    path = tmp_path / "p.yaml"
    path.write_text(text)
    line = text.splitlines().index(f"      {param_name}: {value}") + 1
    before = snapshot(tmp_path)
    result = cli("inspect", str(path))
    assert_one_line_error(result, f"{path}:{line}:", "stage 'probe'",
                          f"field 'params.{param_name}'")
    assert_unchanged(before)
    assert sorted(tmp_path.iterdir()) == [path]  # nothing new either


def _path_rows() -> list:
    return [pytest.param(op_name, param.name, value, id=f"{op_name}.{param.name}-{kind}")
            for op_name, cls in _ops().items() for param in cls.params if param.type is Path
            for kind, value in (("empty", '""'), ("blank", '"  "'))]


@pytest.mark.parametrize(("op_name", "param_name", "value"), _path_rows())
def test_empty_path_param_is_one_line_exit_2(tmp_path, op_name, param_name, value):
    """An empty path would name the YAML's own folder: refused where it is written."""
    test_bad_numeric_param_is_one_line_exit_2(tmp_path, op_name, param_name, value)


def test_every_numeric_param_declares_its_range():
    """A bound above (range high or a static-buffer cap) so "huge" rows fail for a reason."""
    missing = [f"{name}.{param.name}" for name, cls in _ops().items() for param in _numeric(cls)
               if param.range is None or (param.range.high is None and not param.bytes_each)]
    assert not missing, f"declare range=Range(low, high) (and unit=) for: {', '.join(missing)}"


@pytest.mark.parametrize("op_name", sorted(_ops()))
def test_defaults_satisfy_their_own_declarations(op_name):
    for param in _ops()[op_name].params:
        if param.default is not REQUIRED and param.default is not None:
            param.coerce(param.default, None)


def test_the_catalogue_covers_every_numeric_param():
    covered = {(row.values[0], row.values[1]) for row in _rows()}
    expected = {(n, p.name) for n, cls in _ops().items() for p in _numeric(cls)}
    assert covered == expected and len(expected) > 20
    assert any(name.startswith("test.") for name, _ in expected)


@pytest.mark.parametrize(("param_range", "inside", "outside"), [
    (Range(0.0, 1.0), [0.0, 0.5, 1.0], [-1e-9, 1.0 + 1e-9]),
    (Range(0.0, 1.0, low_open=True, high_open=True), [1e-9, 0.5], [0.0, 1.0]),
    (Range(1), [1, 10**9], [0, -5]),
])
def test_range_bounds(param_range, inside, outside):
    assert all(param_range.contains(v) for v in inside)
    assert not any(param_range.contains(v) for v in outside)


def test_static_buffer_cap_states_the_memory(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("stages:\n  - id: pp\n    op: pillars.detect\n    params:\n"
                    "      model: m.onnx\n      max_pillars: 10000000000\n")
    line = assert_one_line_error(cli("inspect", str(path)), f"{path}:6:20",
                                 "field 'params.max_pillars'")
    assert "TiB" in line and "limit is 2 GiB" in line


@pytest.mark.parametrize("verb", ["inspect", "run"])
def test_missing_model_file_is_refused_before_anything_opens(tmp_path, verb):
    path = tmp_path / "p.yaml"
    drive = REPO / "datasets" / "sample_drive"
    path.write_text(f"stages:\n  - {{id: drive, op: replay, params: {{path: {drive}}}}}\n"
                    "  - id: pp\n    op: pillars.detect\n    inputs: {points: drive/points}\n"
                    "    params:\n      model: nowhere.onnx\n")
    before = snapshot(tmp_path)
    result = cli(verb, str(path))
    assert_one_line_error(result, f"{path}:7:14", "stage 'pp'", "field 'params.model'",
                          f"{tmp_path / 'nowhere.onnx'}: no such file")
    assert_unchanged(before)


def test_ops_shows_allowed_values_and_plain_defaults():
    result = cli("ops", "jsonl")
    assert result.code == 0 and not result.crash, result
    assert "PosixPath" not in result.stdout and "run.jsonl" in result.stdout
    assert "allowed" in result.stdout and "[0, 4611686018427387904]" in result.stdout
    pillars = cli("ops", "pillars.detect").stdout
    assert "at most 2,618,882" in pillars and "[0, 1]" in pillars
