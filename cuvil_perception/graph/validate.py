"""Pipeline validation in layers: stage fields, params, wiring, cycles, port specs.

Each failure raises ``PipelineError`` naming file:line:column, the stage and the field.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import CuvilError, Location, PipelineError
from .op import TAGS, ParamProblem, Sink, suggest
from .plugins import OpImportError
from .registry import lookup, registered
from .stage import AUTO, MAX_DEADLINE_MS, MISS_POLICIES, Stage


def validate_stages(stages: list[Stage], base_dir: Path, e2e_deadline_ms: float | None = None,
                    e2e_loc: Location | None = None) -> list[str]:
    """Check ``stages`` (relative paths in params resolve against ``base_dir``) and the
    pipeline's ``e2e_deadline_ms`` (ms, or None; ``e2e_loc`` is where the YAML wrote it), fill
    each stage's resolved fields, and return the stage ids in execution order."""
    ids: dict[str, Stage] = {}
    for stage in stages:
        if stage.id in ids:
            first = ids[stage.id].loc("id")
            raise PipelineError(f"duplicate stage id (first defined at {first})",
                                stage.loc("id"), stage.id, "id")
        ids[stage.id] = stage
    if e2e_deadline_ms is not None:
        _check_deadline(e2e_deadline_ms, e2e_loc, None, "e2e_deadline_ms")
    for stage in stages:
        _check_fields(stage, base_dir)
        _resolve_params(stage, base_dir)
    order = _topological_order(stages, ids)
    for stage_id in order:
        _resolve_ports(ids[stage_id], ids)
    return order


def _check_deadline(value, loc, stage_id, field, auto: bool = False) -> None:
    """A positive, finite number of ms up to ``MAX_DEADLINE_MS``; ``auto`` too when allowed."""
    if auto and value == AUTO:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= MAX_DEADLINE_MS:
        hint = suggest(value.lower(), (AUTO,)) if auto and isinstance(value, str) else ""
        if auto and not hint:
            hint = " (or 'auto': measured on this machine)"
        if not auto and value == AUTO:
            hint = " (auto is for stage deadlines: e2e_deadline_ms is the frame budget, in ms)"
        limit = f" (at most {MAX_DEADLINE_MS:.0f}, an hour)" if isinstance(value, (int, float)) \
            and not isinstance(value, bool) and value > MAX_DEADLINE_MS else ""
        raise PipelineError(f"must be a positive number of milliseconds{limit}, got "
                            f"{value!r}{hint}", loc, stage_id, field)


def _check_fields(stage: Stage, base_dir=None) -> None:
    if not isinstance(stage.id, str) or not stage.id or "/" in stage.id:
        raise PipelineError(f"stage id must be a non-empty string without '/', got {stage.id!r}",
                            stage.loc("id"), None, "id")
    try:
        cls = lookup(stage.op, base_dir) if isinstance(stage.op, str) else None
    except OpImportError as exc:
        raise PipelineError(f"op '{stage.op}': {exc}", stage.loc("op"), stage.id, "op") from None
    if cls is None:
        hint = suggest(str(stage.op), registered()) or (
            "; `cuvil-perception ops` lists the registered ops (an op of another package "
            "is registered while that package is installed)")
        raise PipelineError(f"unknown op '{stage.op}'{hint}", stage.loc("op"), stage.id, "op")
    stage.op_cls = cls
    if stage.tag is not None and stage.tag not in TAGS:
        raise PipelineError(f"unknown tag '{stage.tag}', expected one of: {', '.join(TAGS)}"
                            f"{suggest(str(stage.tag), TAGS)}", stage.loc("tag"), stage.id, "tag")
    if stage.deadline_ms is not None:
        _check_deadline(stage.deadline_ms, stage.loc("deadline_ms"), stage.id, "deadline_ms",
                        auto=True)
    if stage.auto_deadline and not getattr(cls, "measures_warmup", False):
        raise PipelineError(f"deadline_ms 'auto' needs an op that times its warm-up passes, and "
                            f"op '{stage.op}' runs none; give the deadline in milliseconds",
                            stage.loc("deadline_ms"), stage.id, "deadline_ms")
    if stage.on_miss not in MISS_POLICIES:
        raise PipelineError(f"unknown on_miss '{stage.on_miss}', expected one of: "
                            f"{', '.join(MISS_POLICIES)}"
                            f"{suggest(str(stage.on_miss), MISS_POLICIES)}",
                            stage.loc("on_miss"), stage.id, "on_miss")
    # an on_miss written (YAML) or not the default (Python) acts only on a deadline_ms miss
    if ("on_miss" in stage.locs or stage.on_miss != "drop") and stage.deadline_ms is None:
        raise PipelineError(f"on_miss '{stage.on_miss}' without a 'deadline_ms': a stage with "
                            "no deadline never misses one; give deadline_ms or remove on_miss",
                            stage.loc("on_miss"), stage.id, "on_miss")
    if stage.on_miss == "degrade" and stage.degrade is None:
        raise PipelineError("on_miss 'degrade' needs a 'degrade:' block with the cheaper params",
                            stage.loc("on_miss"), stage.id, "on_miss")
    if stage.degrade is not None and (not isinstance(stage.degrade.frames, int)
                                      or stage.degrade.frames < 1):
        raise PipelineError(f"degrade frames must be a positive integer, got "
                            f"{stage.degrade.frames!r}", stage.loc("degrade.frames"), stage.id,
                            "degrade.frames")


def _fill(stage: Stage, base_dir: Path, given: dict, prefix: str) -> dict:
    declared = {param.name: param for param in stage.op_cls.params}
    resolved = {}
    for name, value in given.items():
        if name not in declared:
            known = ", ".join(declared) or "none"
            raise PipelineError(f"unknown param '{name}' for op '{stage.op}'"
                                f"{suggest(name, declared)} (params: {known})",
                                stage.locs.get(f"key:{prefix}{name}")
                                or stage.loc(f"{prefix}{name}"), stage.id, f"{prefix}{name}")
        try:
            resolved[name] = declared[name].coerce(value, base_dir)
        except ValueError as exc:
            raise PipelineError(str(exc), stage.loc(f"{prefix}{name}"), stage.id,
                                f"{prefix}{name}") from None
    for name, param in declared.items():
        if name not in resolved:
            if param.required:
                raise PipelineError(f"missing required param '{name}' ({param.type_name()}) "
                                    f"for op '{stage.op}'", stage.loc("params"), stage.id,
                                    f"{prefix}{name}")
            resolved[name] = param.default
    return resolved


def _resolve_params(stage: Stage, base_dir: Path) -> None:
    if not isinstance(stage.params, dict):
        raise PipelineError("params must be a mapping", stage.loc("params"), stage.id, "params")
    stage.resolved_params = _fill(stage, base_dir, stage.params, "params.")
    stage.degrade_params = None
    if stage.degrade is not None:
        merged = dict(stage.params)
        merged.update(stage.degrade.params)
        stage.degrade_params = _fill(stage, base_dir, merged, "degrade.params.")


def _topological_order(stages: list[Stage], ids: dict[str, Stage]) -> list[str]:
    for stage in stages:
        for port, ref in stage.inputs.items():
            if ref.stage not in ids:
                raise PipelineError(f"input '{port}' is wired to '{ref}', but there is no stage "
                                    f"'{ref.stage}'{suggest(ref.stage, ids)}",
                                    stage.loc(f"inputs.{port}"), stage.id, f"inputs.{port}")
    # Kahn's algorithm, ties broken by declaration order so the order is deterministic.
    position = {s.id: i for i, s in enumerate(stages)}
    indegree = {s.id: len({r.stage for r in s.inputs.values()}) for s in stages}
    users: dict[str, list[str]] = {s.id: [] for s in stages}
    for s in stages:
        for upstream in {r.stage for r in s.inputs.values()}:
            users[upstream].append(s.id)
    ready = sorted((i for i, d in indegree.items() if d == 0), key=position.get)
    order = []
    while ready:
        current = ready.pop(0)
        order.append(current)
        for user in users[current]:
            indegree[user] -= 1
            if indegree[user] == 0:
                ready.append(user)
                ready.sort(key=position.get)
    if len(order) != len(stages):
        stuck = [s for s in stages if s.id not in order]
        cycle = _find_cycle(stuck)
        first = ids[cycle[0]]
        raise PipelineError(f"cycle: {' -> '.join(cycle + cycle[:1])}", first.loc("inputs"),
                            first.id, "inputs")
    return order


def _find_cycle(stuck: list[Stage]) -> list[str]:
    by_id = {s.id: s for s in stuck}
    start = stuck[0].id
    path, seen = [start], {start}
    while True:
        nxt = next(r.stage for r in by_id[path[-1]].inputs.values() if r.stage in by_id)
        if nxt in seen:
            return path[path.index(nxt):]
        path.append(nxt)
        seen.add(nxt)


def _resolve_ports(stage: Stage, ids: dict[str, Stage]) -> None:
    cls = stage.op_cls
    if issubclass(cls, Sink) and not stage.inputs:  # a wiring error: after every param check
        raise PipelineError(f"sink op '{stage.op}' has no inputs, so it would write nothing; "
                            "wire the ports to write under 'inputs:'", stage.loc("inputs"),
                            stage.id, "inputs")
    connected = {}
    for port, ref in stage.inputs.items():
        upstream = ids[ref.stage]
        if ref.port not in upstream.output_specs:
            known = ", ".join(upstream.output_specs) or "none"
            raise PipelineError(f"input '{port}' is wired to '{ref}', but stage '{ref.stage}' "
                                f"has no output '{ref.port}'"
                                f"{suggest(ref.port, upstream.output_specs)}"
                                f" (outputs: {known})", stage.loc(f"inputs.{port}"), stage.id,
                                f"inputs.{port}")
        connected[port] = upstream.output_specs[ref.port]
    op = cls(dict(stage.resolved_params), connected)
    try:
        op.check()
        if stage.degrade_params is not None:
            cls(dict(stage.degrade_params), connected).check()
    except ParamProblem as exc:
        raise PipelineError(exc.reason, stage.loc(f"params.{exc.param}"), stage.id,
                            f"params.{exc.param}") from None
    except CuvilError:
        raise
    except Exception as exc:  # a bug in a user op's check(), set off by a param value
        raise PipelineError(f"op {cls.__module__}:{cls.__qualname__}: check() raised "
                            f"{type(exc).__name__}: {exc} (a bad value should raise "
                            f"ParamProblem(name, reason))", stage.loc("params"), stage.id,
                            "params") from exc
    declared = {spec.name: spec for spec in op.input_ports()}
    if not cls.variadic_inputs:
        for port in stage.inputs:
            if port not in declared:
                known = ", ".join(declared) or "none"
                raise PipelineError(f"op '{stage.op}' has no input '{port}'"
                                    f"{suggest(port, declared)} (inputs: {known})",
                                    stage.loc(f"inputs.{port}"), stage.id, f"inputs.{port}")
        for port in declared:
            if port not in stage.inputs:
                raise PipelineError(f"input '{port}' of op '{stage.op}' is not wired",
                                    stage.loc("inputs"), stage.id, f"inputs.{port}")
    for port, spec in connected.items():
        want = declared.get(port)
        if want is None:
            continue
        problem = spec.mismatch(want)
        if problem:
            raise PipelineError(f"'{stage.inputs[port]}' cannot feed input '{port}': {problem}",
                                stage.loc(f"inputs.{port}"), stage.id, f"inputs.{port}")
    stage.input_specs = connected
    stage.output_specs = {spec.name: spec for spec in op.output_ports()}
