"""The output-path policy: where a command may write, checked before any work starts.

Every verb that writes (``run``, ``bench``, ``render``, ``eval``, ``compile --out``) lists what it
will write (``Claim(role, path, folder)``: sink files and folders, ``--out``, ``--record``,
``--trace``, ``--viz``, ``--plot``) and what it reads (the pipeline YAML, drive folders, model
files, ``--decisions``, budgets files), then calls ``check_outputs``. Rules, in order; the first
that refuses raises ``OutputPathError`` (exit 2) naming the path, the claim and the rule:

* ``same-output``  two outputs of one command on the same file (``--out X --record X``, two
                   ``jsonl`` sinks on one file, two names of one file: hard links);
* ``input``        an output on an input of the command, inside an input folder (a drive), or a
                   folder output that contains an input file;
* ``wrong-kind``   a file output where a folder is, or a folder output where a file is;
* ``not-ours``     an existing file or non-empty folder that is not a previous output of this
                   tool (``output_files.output_kind``), unless ``overwrite``;
* ``other-kind``   a previous output of another kind than the claim's (``eval --out`` onto a
                   run's detections JSONL, ``--trace`` onto a run record), unless ``overwrite``;
* ``not-writable`` the nearest existing folder on the way to the output cannot be written
                   (read-only folder or file system), so the run would fail at its end.

``--overwrite`` lifts ``not-ours`` and ``other-kind`` only: inputs and the command's own
outputs stay protected.

Paths are files, not names: every link is resolved, and existing files and folders are also
compared by device and inode, so a hard link to an input (a drive's scan linked elsewhere), a
folder reached through a bind mount or a symlinked parent, and two names of one output are all
seen for what they are. (A hard link is looked for only when the output has more than one
link, so a drive is walked only then.) `output_lock` then holds every output for the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import OutputPathError
from ..output_files import output_kind


@dataclass(frozen=True)
class Claim:
    """One path a command writes or reads. ``role`` says who asks for it (``--out``,
    ``stage 'out' (jsonl.path)``, ``the pipeline file``, ...); ``folder`` marks folders;
    ``kind`` what an output holds (an existing output of ours of another kind is refused)."""

    role: str
    path: Path
    folder: bool = False
    kind: str = ""  # what an output holds (`output_files.output_kind`); "" = not checked

    @property
    def resolved(self) -> Path:
        return Path(os.path.abspath(Path(self.path).expanduser())).resolve()


def check_outputs(outputs: list[Claim], inputs: list[Claim], overwrite: bool = False,
                  remedy: str = "pass --overwrite to replace it") -> None:
    """Apply the rules above; raise ``OutputPathError`` on the first refusal (``remedy``: what
    the ``not-ours`` message tells the user to do, for a verb without ``--overwrite``)."""
    _check_same_output(outputs)
    for out in outputs:
        _check_inputs(out, inputs)
    for out in outputs:
        _check_existing(out, overwrite, remedy)
        _check_writable(out)


def _check_same_output(outputs: list[Claim]) -> None:
    seen: dict[object, Claim] = {}
    for out in outputs:
        keys = [out.resolved] + [key for key in [_file_id(out.resolved)] if key is not None]
        first = next((seen[key] for key in keys if key in seen), None)
        if first is not None:
            who = first.role if first.role != out.role else "another output of the same name"
            raise OutputPathError(out.path, f"{out.role} would write where {who} also writes; "
                                  "give each output its own path", "same-output")
        seen.update((key, out) for key in keys)


def _file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of an existing path (links followed), else None."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _inside(child: Path, parent: Path) -> bool:
    """``child`` is ``parent`` or under it, by name or by (device, inode) of ``child``'s
    existing folders (a bind mount or another name of ``parent``)."""
    if child == parent or parent in child.parents:
        return True
    parent_id = _file_id(parent)
    return parent_id is not None and any(_file_id(up) == parent_id
                                         for up in (child, *child.parents) if up.exists())


def _hard_link_into(target: Path, folder: Path) -> bool:
    """``target`` (an existing file with other links) is also a file under ``folder``."""
    try:
        info = os.stat(target)
    except OSError:
        return False
    if info.st_nlink < 2 or not folder.is_dir():
        return False
    wanted = (info.st_dev, info.st_ino)
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                found = os.stat(os.path.join(root, name), follow_symlinks=False)
            except OSError:
                continue
            if (found.st_dev, found.st_ino) == wanted:
                return True
    return False


def _check_inputs(out: Claim, inputs: list[Claim]) -> None:
    target = out.resolved
    for source in inputs:
        where = source.resolved
        if source.folder:
            hit = _inside(target, where) or not out.folder and _hard_link_into(target, where)
        else:
            hit = target == where or _same_file(target, where)
        if not hit and out.folder:
            hit = _inside(where, target)
        if hit:
            raise OutputPathError(out.path, f"{out.role} would write onto {source.role} "
                                  f"({source.path}), an input of this command", "input")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)  # hard links and bind mounts
    except OSError:
        return False


def _check_existing(out: Claim, overwrite: bool, remedy: str) -> None:
    path = out.resolved
    if not os.path.lexists(path):
        return
    if out.folder and not path.is_dir():
        raise OutputPathError(out.path, f"{out.role} needs a folder, but a file is there",
                              "wrong-kind")
    if not out.folder and path.is_dir():
        raise OutputPathError(out.path, f"{out.role} needs a file, but a folder is there",
                              "wrong-kind")
    if overwrite:
        return
    kind = _kind(path)
    if kind is None:
        what = "non-empty folder" if out.folder else "file"
        raise OutputPathError(out.path, f"{out.role} would replace an existing {what} that "
                              f"cuvil-perception did not write; {remedy}", "not-ours")
    if out.kind and kind != out.kind:
        raise OutputPathError(out.path, f"{out.role} ({out.kind}) would replace a previous "
                              f"output of another kind ({kind}); {remedy}", "other-kind")


def _kind(path: Path) -> str | None:
    try:
        return output_kind(path)
    except OSError:
        return None


def _check_writable(out: Claim) -> None:
    path = out.resolved
    if os.path.lexists(path):
        folder = path if out.folder else path.parent
        if not out.folder and not os.access(path, os.W_OK):
            raise OutputPathError(out.path, f"{out.role}: the file is read-only",
                                  "not-writable")
    else:
        folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputPathError(out.path, f"{out.role}: {folder} is a file, not a folder",
                              "wrong-kind")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(out.path, f"{out.role}: folder {folder} is not writable "
                              "(read-only folder or file system)", "not-writable")
