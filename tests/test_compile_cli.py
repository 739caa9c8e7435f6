"""``cuvil-perception compile`` and ``cache info|clear`` through the real command group."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from click.testing import CliRunner

import graph_ops  # noqa: F401  (registers graphtest.* ops)
from cuvil_perception.cli.app import cli
from cuvil_perception.compile import examples as ex
from cuvil_perception.compile import registry
from cuvil_perception.graph import Op, Param, PortSpec, register


@register
class Exp(Op):
    """Test op: ``values -> exp(values)`` through the example exp kernel (width static)."""

    name = "compiletest.exp"
    params = (Param("width", int, 4),)

    def input_ports(self):
        return (PortSpec("values", "float32", (self.p["width"],)),)

    def output_ports(self):
        return (PortSpec("values", "float32", (self.p["width"],)),)

    def kernels(self):
        return [ex.EXP_MAP.with_static(n=self.p["width"]), ex.SUM.with_static(n=self.p["width"])]

    def process(self, inputs, frame):
        out = np.empty_like(inputs["values"])
        from cuvil_perception.compile import get_kernel
        get_kernel(self.kernels()[0])(inputs["values"].ctypes.data, out.ctypes.data)
        return {"values": out}


PIPELINE = """\
pipeline: compiled
stages:
  - id: src
    op: graphtest.counter
    params: {width: 8}
  - id: e
    op: compiletest.exp
    inputs: {values: src/values}
    params: {width: 8}
    deadline_ms: 5
    on_miss: degrade
    degrade:
      params: {width: 8}
      frames: 2
  - id: e2
    op: compiletest.exp
    inputs: {values: src/values}
    params: {width: 8}
  - id: out
    op: graphtest.collect
    inputs: {a: e/values, b: e2/values}
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    registry.clear_memory()
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE)
    yield path
    registry.clear_memory()


def _run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_compile_prints_a_table_then_hits(env):
    first = _run("compile", str(env))
    assert first.exit_code == 0, first.output
    assert "example.exp_map" in first.output and "n=8" in first.output
    assert "2 kernels: 0 hits, 2 compiled" in first.output  # duplicates removed
    registry.clear_memory()
    second = _run("compile", str(env))
    assert "cache hit" in second.output and "2 kernels: 2 hits, 0 compiled" in second.output
    info = _run("cache", "info")
    assert "entries: 2" in info.output and "hits:    2" in info.output
    cleared = _run("cache", "clear")
    assert "removed 2 entries" in cleared.output
    assert "entries: 0" in _run("cache", "info").output


def test_compile_for_another_architecture(env, tmp_path):
    out = tmp_path / "objs"
    result = _run("compile", str(env), "--target", "aarch64-linux-gnu", "--out", str(out))
    assert result.exit_code == 0, result.output
    objs = sorted(out.glob("*.o"))
    assert len(objs) == 2
    for obj in objs:
        assert struct.unpack_from("<H", obj.read_bytes(), 18)[0] == 183


@pytest.mark.parametrize("args,message", [
    (["--target", "aarch64-linux-gnu"], "--target needs --out DIR"),
    (["--out", "x"], "--out is only used with --target"),
    (["--target", "nope-nope", "--out", "x"], "unknown target triple 'nope-nope'"),
])
def test_compile_usage_errors(env, args, message, tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # a relative --out must not land in the repository
    result = CliRunner().invoke(cli, ["compile", str(env), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert list(cwd.iterdir()) == [], "a refused compile left files behind"


def test_compile_missing_pipeline_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(cli, ["compile", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2 and "pipeline file not found" in result.output
