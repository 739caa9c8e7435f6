"""pytest plugin ``cuvil_budgets``: latency budgets inside a user's own test suite.

Installed through the ``pytest11`` entry point, so it is active in every pytest session of an
environment that has cuvil-perception; it adds:

* ``--cuvil-budgets BUDGETS.yaml``: the budgets file the ``cuvil_budget`` fixture checks against;
* the ``cuvil_budget`` fixture: a function that runs a pipeline over a drive and fails the test
  (with the verdict table) when a budget is breached::

      def test_latency(cuvil_budget):
          report = cuvil_budget("configs/demo.yaml", replay="datasets/sample_drive", frames=10)
          assert report.passed            # already asserted; the report is returned for details

  ``budgets=`` overrides the command-line file; without either the test is skipped. A budgets file
  may name ``pipeline:`` / ``replay:`` / ``frames:`` itself, then ``cuvil_budget()`` needs no
  arguments.

Imports of the executor are deferred to the fixture call so that loading the plugin costs nothing
in suites that never use it.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("cuvil", "cuvil-perception latency budgets")
    group.addoption("--cuvil-budgets", action="store", default=None, metavar="BUDGETS.yaml",
                    help="latency budgets file checked by the cuvil_budget fixture")


@pytest.fixture
def cuvil_budget(request):
    """A function ``(pipeline=None, replay=None, frames=None, budgets=None, repeat=1,
    workers=None)``.

    Runs the pipeline (a path or a validated ``Pipeline``; default the budgets file's
    ``pipeline:``) over ``replay`` with ``rate 0`` and no deadline enforcement (``bench``'s
    rules), applies the budgets and calls ``pytest.fail`` with the table on a breach. Returns the
    ``rt.BudgetReport``.
    """
    option = request.config.getoption("--cuvil-budgets")

    def check(pipeline=None, replay=None, frames=None, budgets=None, **bench_options):
        from .bench import bench_pipeline
        from .budgets import load_budgets

        source = budgets if budgets is not None else option
        if source is None:
            pytest.skip("no latency budgets: pass --cuvil-budgets BUDGETS.yaml or budgets=...")
        spec = load_budgets(Path(source))
        report = bench_pipeline(pipeline if pipeline is not None else spec.pipeline,
                                spec, replay=replay if replay is not None else spec.replay,
                                frames=frames if frames is not None else spec.frames,
                                **bench_options)
        if not report.passed:
            pytest.fail("latency budget breached:\n" + report.text(), pytrace=False)
        return report

    return check
