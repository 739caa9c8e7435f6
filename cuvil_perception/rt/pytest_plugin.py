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
  arguments;
* with ``--cuvil-budgets``, one more test item, ``cuvil-budgets[FILE]``, run after every other
  test: when no test called the fixture with that file, it benches the file's ``pipeline:`` itself
  and fails on a breach, so the session fails even if no test uses the fixture (a file without
  ``pipeline:`` then fails the item: nothing would check its budgets).

Imports of the executor are deferred to the fixture call so that loading the plugin costs nothing
in suites that never use it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_CHECKED = pytest.StashKey[bool]()  # the fixture checked the --cuvil-budgets file this session


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
        from .budgets import load_budgets

        source = budgets if budgets is not None else option
        if source is None:
            pytest.skip("no latency budgets: pass --cuvil-budgets BUDGETS.yaml or budgets=...")
        spec = load_budgets(Path(source))
        if budgets is None:
            request.config.stash[_CHECKED] = True
        return _bench_and_check(spec, pipeline if pipeline is not None else spec.pipeline,
                                replay=replay if replay is not None else spec.replay,
                                frames=frames if frames is not None else spec.frames,
                                **bench_options)

    return check


def _bench_and_check(spec, pipeline, **bench_options):
    from .bench import bench_pipeline

    report = bench_pipeline(pipeline, spec, **bench_options)
    if not report.passed:
        pytest.fail("latency budget breached:\n" + report.text(), pytrace=False)
    return report


class BudgetsItem(pytest.Item):
    """``cuvil-budgets[FILE]``: the session-level check of the ``--cuvil-budgets`` file."""

    def runtest(self) -> None:
        from .budgets import load_budgets

        if self.config.stash.get(_CHECKED, False):
            return  # a test already ran the fixture on this file (and failed on a breach)
        source = Path(self.config.getoption("--cuvil-budgets"))
        spec = load_budgets(source)
        if spec.pipeline is None:
            pytest.fail(f"{source}: names no 'pipeline:' and no test called the cuvil_budget "
                        "fixture, so nothing checked these budgets", pytrace=False)
        _bench_and_check(spec, spec.pipeline, replay=spec.replay, frames=spec.frames)

    def repr_failure(self, excinfo):
        from ..errors import CuvilError

        if isinstance(excinfo.value, CuvilError):
            return f"error: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, self.name


def pytest_collection_modifyitems(session, config, items) -> None:
    option = config.getoption("--cuvil-budgets", None)
    if option is not None:
        items.append(BudgetsItem.from_parent(session, name=f"cuvil-budgets[{option}]"))
