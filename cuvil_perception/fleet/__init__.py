"""Fleet replay: run, evaluate or budget-check a pipeline over many recorded drives.

::

    from cuvil_perception.fleet import discover, make_job, job_hash, LocalPool, run_fleet
    drives = discover(["drives/drive_*"])
    job, pipeline, spec = make_job("eval", "configs/fusion.yaml", drives, None, workers=1)
    ...

Each drive runs exactly as its single-drive verb runs it (``task``), on a pool of processes on
this machine (``local``) or as one task per drive on Ray (``ray_backend``, optional extra
``fleet``); the driver loop (``runner``) writes one results row per drive as it finishes
(``results``, resumable), and ``report`` / ``export`` / ``html`` pool the rows into the fleet
report (AP over every drive's detections, latency over every drive's frames, budgets).
Modules: ``drives`` (what DRIVES arguments mean, fingerprints), ``plan`` (checks before the run,
the pipeline hash), ``node_prewarm`` (once per node), ``latency`` (compact samples).
"""

from .drives import DriveRef, discover, fingerprint
from .export import report_dict, write_json
from .html import write_html
from .local import LocalPool, default_processes
from .plan import job_hash, make_job
from .report import FAILED_EXIT_CODE, DriveResult, FleetReport, build_report
from .results import RESULTS_NAME, ResultsFile, read_results
from .runner import FleetRun, run_fleet
from .task import MODES, DriveTask, FleetJob, execute

__all__ = [
    "DriveRef", "DriveResult", "DriveTask", "FAILED_EXIT_CODE", "FleetJob", "FleetReport",
    "FleetRun", "LocalPool", "MODES", "RESULTS_NAME", "ResultsFile", "build_report",
    "default_processes", "discover", "execute", "fingerprint", "job_hash", "make_job",
    "read_results", "report_dict", "run_fleet", "write_html", "write_json",
]
