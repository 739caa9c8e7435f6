"""Bad-input catalogue, op modules named in YAML (``op: package.module:Class``): importing one
runs its code, in every verb that reads the pipeline. A module whose code raises or calls
``sys.exit`` while importing fails ``run``, ``inspect`` and ``compile`` with exit 2 and one
line naming the module and the stage, never a silent exit 0 or a traceback."""

from __future__ import annotations

import pytest

import cuvil_perception.testing.ops  # noqa: F401  (registers test.scripted)

from ._runner import assert_one_line_error, cli

BODIES = {
    "exit-0": ("import sys\nsys.exit(0)\n", "sys.exit(0)"),
    "exit-3": ("import sys\nsys.exit(3)\n", "sys.exit(3)"),
    "exit-message": ("raise SystemExit('bye')\n", "sys.exit('bye')"),
    "raises": ("raise RuntimeError('boom at import')\n", "RuntimeError: boom at import"),
    "keyerror": ("{}['missing']\n", "KeyError"),
    "missing-dependency": ("import no_such_dependency_xyz\n", "no_such_dependency_xyz"),
}


@pytest.mark.parametrize("verb", [["run", "--frames", "1"], ["inspect"], ["compile"]],
                         ids=["run", "inspect", "compile"])
@pytest.mark.parametrize("row", list(BODIES), ids=list(BODIES))
def test_a_module_that_exits_or_raises_while_importing(tmp_path, row, verb):
    body, fragment = BODIES[row]
    module = f"user_module_{row.replace('-', '_')}_{verb[0]}"
    (tmp_path / f"{module}.py").write_text(body)
    (tmp_path / "p.yaml").write_text(
        "stages:\n  - {id: src, op: test.scripted, params: {n: 8}}\n"
        f"  - {{id: mine, op: '{module}:Mine', inputs: {{x: src/value}}}}\n")
    result = cli(verb[0], str(tmp_path / "p.yaml"), *verb[1:])
    assert_one_line_error(result, "p.yaml:3", "stage 'mine'", module, fragment)
