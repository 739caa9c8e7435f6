"""Before any drive runs: check the pipeline and budgets once, and fix what the fleet runs.

``make_job`` reads the pipeline YAML, validates it against the first readable drive (a usage
mistake in the pipeline or the budgets file stops the fleet here, with exit code 2, instead of
failing every drive), and returns the ``FleetJob`` every drive shares. ``job_hash`` is the
*pipeline hash* of the results rows: what, besides the drive, decides a drive's results.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from .. import __version__
from ..errors import InputError, PipelineError, UsageError
from .drives import DriveRef
from .task import FleetJob, load_job_pipeline
from .transport import local_drive


def make_job(mode: str, pipeline_path: str, drives: list[DriveRef], budgets_path: str | None,
             **options):
    """``(job, validated pipeline, BudgetSpec | None)``; ``options`` are ``FleetJob`` fields."""
    from ..rt import load_budgets

    path = Path(pipeline_path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PipelineError("pipeline file not found", _loc(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineError(f"cannot read pipeline file: {exc}", _loc(path)) from None
    spec = load_budgets(budgets_path) if budgets_path else None
    job = FleetJob(mode, text, str(path), str(path.resolve().parent),
                   budgets_text=spec.path.read_text(encoding="utf-8") if spec else None,
                   budgets_source=str(spec.path) if spec else None, **options)
    pipeline = _validated(job, drives)
    # ops registered by the importing program (not built in): their modules load in workers too.
    # Ops named by import path are left out: the worker's parse resolves them again, looking in
    # the pipeline file's folder as `run` does (a plain import of their module would not).
    job = replace(job, modules=tuple(sorted({s.op_cls.__module__ for s in pipeline.ordered()
                                             if ":" not in s.op})))
    if spec is not None:
        _check_budgets(spec, pipeline, mode)
    return job, pipeline, spec


def _validated(job: FleetJob, drives: list[DriveRef]):
    """The pipeline validated with the first drive that can be opened (a drive named by URL is
    fetched for it); a drive error on every one of the first few is raised (the pipeline itself
    cannot be checked without a drive)."""
    error = None
    for drive in drives[:5]:
        try:
            with tempfile.TemporaryDirectory(prefix="cuvil-fleet-plan-") as tmp, \
                    local_drive(drive.location, Path(tmp)) as local:
                return load_job_pipeline(job, local).validate()
        except PipelineError:
            raise
        except InputError as exc:  # this drive is unreadable: its run will say so
            error = exc
        except OSError as exc:  # a URL that cannot be fetched: the same, one line
            error = UsageError(f"{drive.location}: cannot read the drive ({exc})")
    raise error


def _check_budgets(spec, pipeline, mode: str) -> None:
    spec.check_pipeline(pipeline)
    ratios = [b for b in spec.budgets if b.kind == "ratio"]
    if ratios and mode != "bench":
        raise UsageError(f"{ratios[0].loc}: ratio budgets time a reference beside its stage, "
                         f"which only 'fleet bench' does (fleet {mode} checks absolute ones)")


def job_hash(job: FleetJob, pipeline) -> str:
    """sha256 hex of the pipeline text, the package version, the options that change a
    drive's results, and the size and mtime of every file a non-sink stage reads (models)."""
    from ..graph import Sink, Source

    fields = asdict(job)
    fields.pop("modules")
    if job.mode != "bench":  # budgets only change what bench runs (the references it times)
        fields.pop("budgets_text"), fields.pop("budgets_source")
    files = {}
    for stage in pipeline.ordered():
        if stage.op_cls is None or issubclass(stage.op_cls, (Sink, Source)):
            continue  # outputs, and the drive itself (which has its own fingerprint)
        for name, value in stage.resolved_params.items():
            if isinstance(value, Path) and value.is_file():
                stat = value.stat()
                files[f"{stage.id}.{name}"] = [str(value), stat.st_size, stat.st_mtime_ns]
    text = json.dumps({"version": __version__, "job": fields, "files": files}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _loc(path: Path):
    from ..errors import Location

    return Location(str(path))
