"""Strict YAML loader for pipelines that keeps file:line:column for every field.

Top-level fields and stage fields are listed in ``PIPELINE_FIELDS`` / ``STAGE_FIELDS`` (also the
table in docs/pipeline-yaml.md); unknown keys are rejected with a "did you mean".

Only plain YAML data is accepted (`compose_strict`): explicit tags (``!!python/object``,
``!custom``, and the core ones too: ``!!float``, ``!!str``; a value's type is what it reads as),
values the core schema does not resolve to, merge keys (``<<``), nesting deeper than `MAX_DEPTH`
and integers longer than `MAX_INT_DIGITS` digits are refused with file:line:column before any
value is constructed, so no user code runs and no deep recursion happens.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..errors import Location, PipelineError
from .op import suggest
from .pipeline import Pipeline
from .stage import Degrade, PortRef, Stage

PIPELINE_FIELDS = ("pipeline", "description", "e2e_deadline_ms", "rt", "stages")
STAGE_FIELDS = ("id", "op", "params", "inputs", "tag", "deadline_ms", "on_miss", "degrade")
DEGRADE_FIELDS = ("params", "frames")
MAX_DEPTH = 64  # mappings/lists inside each other; a pipeline needs about 5
MAX_INT_DIGITS = 30  # no param needs more; Python would spend time (or refuse) beyond 4300
_CORE = "tag:yaml.org,2002:"
ALLOWED_TAGS = tuple(_CORE + name for name in ("str", "int", "float", "bool", "null", "seq",
                                               "map", "timestamp"))


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, plus YAML 1.2's exponent floats without a dot (``1e-3``), which
    YAML 1.1 reads as the string "1e-3" (a float param would then say "got string")."""


StrictLoader.add_implicit_resolver(
    _CORE + "float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def load_pipeline(path: str | Path, validate: bool = True) -> Pipeline:
    """Parse (and by default validate) a pipeline YAML file; PipelineError names file:line:col.

    Pass ``validate=False`` to apply CLI overrides (``apply_cli_sources``) before validating.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PipelineError("pipeline file not found", Location(str(path))) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineError(f"cannot read pipeline file: {exc}", Location(str(path))) from None
    pipeline = parse_pipeline(text, str(path), base_dir=path.resolve().parent)
    return pipeline.validate() if validate else pipeline


def parse_pipeline(text: str, filename: str = "<string>", base_dir: Path | None = None) -> Pipeline:
    """Build an unvalidated Pipeline from YAML text."""
    root = compose_strict(text, filename)
    reader = _Reader(filename)
    if root is None:
        raise PipelineError("the file is empty; expected a mapping with 'stages'",
                            Location(filename, 1, 1))
    top = reader.mapping(root, "the pipeline file", PIPELINE_FIELDS)
    pipeline = Pipeline(source=filename, base_dir=base_dir or Path.cwd())
    pipeline.locs = {k: reader.loc(value) for k, (_, value) in top.items()}
    if "pipeline" in top:
        pipeline.name = reader.scalar(top["pipeline"][1], str, "pipeline")
    if "description" in top:
        pipeline.description = reader.scalar(top["description"][1], str, "description")
    if "e2e_deadline_ms" in top:
        pipeline.e2e_deadline_ms = reader.plain(top["e2e_deadline_ms"][1])
    if "rt" in top:
        pipeline.rt = reader.plain(top["rt"][1])
        if not isinstance(pipeline.rt, dict):
            raise PipelineError("'rt' must be a mapping", reader.loc(top["rt"][1]), None, "rt")
    if "stages" not in top:
        raise PipelineError("missing 'stages' (a list of stages)", reader.loc(root), None,
                            "stages")
    stages_node = top["stages"][1]
    if not isinstance(stages_node, yaml.SequenceNode):
        raise PipelineError("'stages' must be a list", reader.loc(stages_node), None, "stages")
    for item in stages_node.value:
        pipeline.stages.append(_stage(reader, item))
    return pipeline


def compose_strict(text: str, filename: str, error=None) -> yaml.Node | None:
    """The YAML node tree of ``text`` if it is plain data; else raise ``error(message, loc,
    field)`` (default: `PipelineError`), ``field`` being the dotted path of the bad value.

    Checks nesting depth on the parser's event stream (the composer recurses, so a 3000-deep
    file must be refused before it) and notes where a tag is written out, then refuses those
    tags, merge keys and integer sizes on the nodes.
    """
    error = error or (lambda message, loc, field: PipelineError(message, loc, None, field))
    try:
        explicit = _check_depth(text, filename, error)
        root = yaml.compose(text, Loader=StrictLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = mark_location(filename, mark) if mark else Location(filename)
        raise error(f"YAML syntax error: {exc.problem or exc}", loc, None) from None
    except yaml.YAMLError as exc:
        raise error(f"YAML syntax error: {exc}", Location(filename), None) from None
    _check_nodes(root, filename, error, explicit)
    return root


_KIND = {yaml.ScalarEvent: yaml.ScalarNode, yaml.MappingStartEvent: yaml.MappingNode,
         yaml.SequenceStartEvent: yaml.SequenceNode}


def _check_depth(text: str, filename: str, error) -> set[tuple]:
    """Refuse nesting deeper than `MAX_DEPTH`; returns the nodes (character index of their
    start, node class) whose tag is written out in the text."""
    path: list[str] = []  # keys / indices of the open collections, for the message
    explicit: set[tuple] = set()
    for event in yaml.parse(text, Loader=StrictLoader):
        if getattr(event, "tag", None) is not None:
            explicit.add((event.start_mark.index, _KIND[type(event)]))
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(path) >= MAX_DEPTH:
                raise error(f"nesting deeper than {MAX_DEPTH} levels",
                            mark_location(filename, event.start_mark), path[0] or None)
            path.append("")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            path.pop()
        elif isinstance(event, yaml.ScalarEvent) and path and not path[-1]:
            path[-1] = event.value  # roughly the first key: enough to find the place
    return explicit


def _check_nodes(root: yaml.Node | None, filename: str, error, explicit: set[tuple]) -> None:
    stack, seen = ([(root, "")] if root is not None else []), set()
    while stack:  # iterative: aliases may share nodes, `seen` visits each once
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        loc, field = mark_location(filename, node.start_mark), path or None
        if node.tag == _CORE + "merge":
            raise error("YAML merge keys ('<<') are not supported: write the fields out", loc,
                        field)
        if node.tag not in ALLOWED_TAGS or (node.start_mark.index, type(node)) in explicit:
            raise error(f"YAML tag '{node.tag.replace(_CORE, '!!')}' is not allowed (plain "
                        f"strings, numbers, booleans, null, lists and mappings only; write "
                        f"the value without a tag)", loc, field)
        if node.tag == _CORE + "int":
            digits = sum(ch.isdigit() for ch in node.value)
            if digits > MAX_INT_DIGITS:
                raise error(f"integer of {digits} digits (at most {MAX_INT_DIGITS})", loc, field)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                stack += [(key, _join(path, name)), (value, _join(path, name))]
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, f"{path}[{i}]") for i, item in enumerate(node.value)]


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else str(name)


def mark_location(filename: str, mark) -> Location:
    """The 1-based file:line:col of a yaml Mark (a node's ``start_mark``, an event's mark)."""
    return Location(filename, mark.line + 1, mark.column + 1)


def _stage(reader: "_Reader", node: yaml.Node) -> Stage:
    fields = reader.mapping(node, "a stage", STAGE_FIELDS, _peek_id(node))
    locs = {"": reader.loc(node)}
    for key, (key_node, value_node) in fields.items():
        locs[key] = reader.loc(value_node)
    stage_id = reader.plain(fields["id"][1]) if "id" in fields else None
    if "id" not in fields:
        raise PipelineError("stage has no 'id'", locs[""], None, "id")
    if not isinstance(stage_id, str):
        raise PipelineError(f"stage id must be a string, got {stage_id!r}", locs["id"], None, "id")
    if "op" not in fields:
        raise PipelineError("stage has no 'op'", locs[""], stage_id, "op")
    stage = Stage(id=stage_id, op=reader.plain(fields["op"][1]), locs=locs)
    if "params" in fields:
        params_node = fields["params"][1]
        params = reader.submapping(params_node, stage_id, "params")
        for name, (key_node, value_node) in params.items():
            locs[f"params.{name}"] = reader.loc(value_node)
            locs[f"key:params.{name}"] = reader.loc(key_node)
        stage.params = {name: reader.plain(v) for name, (_, v) in params.items()}
    if "inputs" in fields:
        stage.inputs = _inputs(reader, fields["inputs"][1], stage_id, locs)
    if "tag" in fields:
        stage.tag = reader.plain(fields["tag"][1])
    if "deadline_ms" in fields:
        stage.deadline_ms = reader.plain(fields["deadline_ms"][1])
        if stage.deadline_ms is None:
            stage.deadline_ms = "null"
    if "on_miss" in fields:
        stage.on_miss = reader.plain(fields["on_miss"][1])
    if "degrade" in fields:
        stage.degrade = _degrade(reader, fields["degrade"][1], stage_id, locs)
    return stage


def _inputs(reader: "_Reader", node: yaml.Node, stage_id: str, locs: dict) -> dict:
    """port -> PortRef of a stage's ``inputs:`` mapping (locations recorded in ``locs``)."""
    wired = {}
    for port, (_, value_node) in reader.submapping(node, stage_id, "inputs").items():
        loc = reader.loc(value_node)
        locs[f"inputs.{port}"] = loc
        value = reader.plain(value_node)
        try:
            wired[port] = PortRef.parse(value if isinstance(value, str) else repr(value))
        except ValueError as exc:
            raise PipelineError(str(exc), loc, stage_id, f"inputs.{port}") from None
    return wired


def _peek_id(node: yaml.Node) -> str | None:
    """The stage's id before its fields are checked, so an unknown field can name its stage."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "id" \
                    and isinstance(value, yaml.ScalarNode):
                return value.value
    return None


def _degrade(reader: "_Reader", node: yaml.Node, stage_id: str, locs: dict) -> Degrade:
    fields = reader.mapping(node, f"stage '{stage_id}' degrade", DEGRADE_FIELDS, stage_id)
    degrade = Degrade(params={})
    if "params" in fields:
        params = reader.submapping(fields["params"][1], stage_id, "degrade.params")
        for name, (_, value_node) in params.items():
            locs[f"degrade.params.{name}"] = reader.loc(value_node)
        degrade.params = {name: reader.plain(v) for name, (_, v) in params.items()}
    if "frames" in fields:
        locs["degrade.frames"] = reader.loc(fields["frames"][1])
        degrade.frames = reader.plain(fields["frames"][1])
    return degrade


class _Reader:
    def __init__(self, filename: str):
        self.filename = filename

    def loc(self, node: yaml.Node) -> Location:
        return mark_location(self.filename, node.start_mark)

    def mapping(self, node: yaml.Node, what: str, allowed: tuple[str, ...],
                stage: str | None = None) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            kind = "a list" if isinstance(node, yaml.SequenceNode) else "a scalar"
            raise PipelineError(f"{what} must be a mapping, found {kind}", self.loc(node), stage)
        out = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key not in allowed:
                raise PipelineError(f"unknown field '{key}' in {what}{suggest(str(key), allowed)}"
                                    f" (allowed: {', '.join(allowed)})", self.loc(key_node),
                                    stage, str(key))
            if key in out:
                raise PipelineError(f"field '{key}' appears twice", self.loc(key_node), stage, key)
            out[key] = (key_node, value_node)
        return out

    def submapping(self, node: yaml.Node, stage: str, field: str):
        if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
            return {}
        if not isinstance(node, yaml.MappingNode):
            raise PipelineError(f"'{field}' must be a mapping", self.loc(node), stage, field)
        out = {}
        for key_node, value_node in node.value:
            key = str(self.plain(key_node))
            if key in out:
                raise PipelineError(f"'{key}' appears twice", self.loc(key_node), stage,
                                    f"{field}.{key}")
            out[key] = (key_node, value_node)
        return out

    def plain(self, node: yaml.Node) -> Any:
        try:  # construct one node's Python value with the safe rules
            return StrictLoader("").construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:  # e.g. a 13th month
            problem = getattr(exc, "problem", None) or str(exc)
            raise PipelineError(f"cannot read this value: {problem}", self.loc(node)) from None

    def scalar(self, node: yaml.Node, kind: type, field: str) -> Any:
        value = self.plain(node)
        if not isinstance(value, kind):
            raise PipelineError(f"must be a {kind.__name__}, got {value!r}", self.loc(node), None,
                                field)
        return value
