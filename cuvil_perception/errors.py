"""Every error cuvil-perception raises on purpose, in one place.

Hierarchy::

    CuvilError                      base; ``exit_code`` is what the CLI exits with
    ├── UsageError (exit 2)         the user asked for something that cannot be done
    │   ├── PipelineError           a pipeline description is wrong (YAML or Python API);
    │   │                           carries file, line, column, stage and field
    │   ├── InputError              data from the outside world is unusable
    │   │   ├── DriveError          a recorded drive (missing stream, bad timestamps, bad .bin)
    │   │   ├── CameraError         a camera device or video file that cannot deliver frames
    │   │   └── ModelError          an ONNX file that does not have the expected layout
    │   ├── ConfigError             a parameter object (PillarConfig, ...) that is inconsistent
    │   │   └── BudgetFileError     a latency-budgets file is wrong (file:line:col and field)
    │   ├── ToolchainError          the C compiler / archiver a target needs is not installed
    │   ├── CacheTrustError         the kernel cache folder the user named (CUVIL_CACHE_DIR) is
    │   │                           not theirs alone (owner or mode): nothing is loaded from it
    │   └── OutputError             an output cannot be written where asked
    │       ├── OutputPathError     the output-path policy refused a path before any work started
    │       └── OutputWriteError    a write failed mid-run (disk full, I/O error); whole lines kept
    ├── CompileError                a native kernel failed to build (a bug, not a user mistake)
    │   ├── KernelSourceError       a kernel-language function uses an unsupported construct or
    │   │   (exit 2)                conflicting types (``file:line:col`` of the kernel's source):
    │   │                           a mistake in the kernel's source, fixed there (a user op's
    │   │                           kernel), so reported like a usage error
    │   └── FastMathError           a kernel's IR carries a fast-math flag that neither it nor
    │                               a helper it calls declares (names the kernel and the flag)
    ├── KernelIndexError            a bounds-checked kernel indexed outside a buffer (also an
    │                               ``IndexError``; names the buffer, the index and the line)
    └── ExecutionError              a run stopped: a stage raised, or an ``on_miss: fail`` fired
        └── DeadlineFailure         the ``fail`` miss policy stopped the run (carries the report)

User mistakes (``UsageError`` and below, and ``KernelSourceError``) are reported by the CLI as
one line on stderr and exit code 2, without a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


class CuvilError(Exception):
    """Base of all deliberate errors."""

    exit_code = 1


class UsageError(CuvilError):
    """Something the user can fix: a wrong path, option, file or parameter."""

    exit_code = 2


@dataclass(frozen=True)
class Location:
    """Where in a pipeline description something is: file, 1-based line and column."""

    file: str = "<python>"
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.column}"


class PipelineError(UsageError):
    """A pipeline description is invalid.

    The message reads ``file:line:col: stage 'id' field 'name': what is wrong``.
    """

    def __init__(self, message: str, location: Location | None = None,
                 stage: str | None = None, field: str | None = None):
        self.location = location or Location()
        self.stage = stage
        self.field = field
        self.reason = message
        where = [str(self.location)]
        if stage is not None:
            where.append(f"stage '{stage}'")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(": ".join(where) + f": {message}")


class InputError(UsageError):
    """Unusable input data; the message names the file or device and what is wrong."""


class DriveError(InputError):
    """A recorded drive cannot be read (layout, timestamps, point files, calibration)."""


class CameraError(InputError):
    """A camera or video source cannot be opened or delivers no frames."""


class ModelError(InputError):
    """A model file does not match the layout an op expects; names the node when it can."""


class ConfigError(UsageError):
    """A configuration object is inconsistent (empty range, voxel size not dividing it, ...).

    ``field`` names the configuration field the problem is about (``"nms_post"``), or is None;
    an op maps it to its own param instead of guessing from the message.
    """

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class BudgetFileError(ConfigError):
    """A budgets file is wrong; the message starts with ``file:line:col: field 'x':``."""

    def __init__(self, message: str, loc: Location, field_name: str | None = None):
        where = f"{loc}: field '{field_name}'" if field_name else str(loc)
        super().__init__(f"{where}: {message}")
        self.location = loc


class OutputError(UsageError):
    """An output file or folder cannot be written; the message starts with its path."""

    def __init__(self, path, message: str):
        self.path = str(path)
        super().__init__(f"{path}: {message}")


class OutputPathError(OutputError):
    """The output-path policy (``rt.output_policy``) refused a path; ``rule`` names which rule:
    ``input``, ``same-output``, ``not-ours``, ``not-writable``, ``wrong-kind``, ``other-kind`` or
    ``busy`` (another run holds its lock)."""

    def __init__(self, path, message: str, rule: str):
        self.rule = rule
        super().__init__(path, f"{message} (output-path rule '{rule}')")


class OutputWriteError(OutputError):
    """Writing an output failed during the run (disk full, file-size limit, I/O error). What was
    written before stays whole (complete JSONL lines, complete files, no temporary files)."""


class ToolchainError(UsageError):
    """A system tool (cross C compiler, archiver, emulator) is missing; names the apt package."""


class CacheTrustError(UsageError):
    """The kernel cache folder the user named is owned by someone else or writable by others
    (and cannot be tightened); names the folder and the fix (``compile.cache_trust``)."""


class CompileError(CuvilError):
    """A native kernel failed to generate, verify or compile. Names the kernel."""


class KernelSourceError(CompileError):
    """A ``@kernel`` function cannot be compiled: ``file:line:col: what; write ... instead``,
    then (given ``source_line``, the text of that line) the line and a caret under the column,
    as Triton prints them::

        kernels.py:12:9: in kernel k: name 'foo' is not defined; write ... instead
            x = foo + 1
                ^

    Exit code 2: like a `PipelineError`, it names the line to fix, and the source it names is
    the kernel author's (a user op's kernel); our own kernels are compiled by the test suite, so
    it never reaches a user from them. It stays a `CompileError` for code catching those."""

    exit_code = 2

    def __init__(self, message: str, location: Location | None = None,
                 source_line: str | None = None):
        text = f"{location}: {message}" if location is not None else message
        if source_line is not None and source_line.strip() and location is not None:
            text += "\n" + source_caret(source_line, location.column)
        super().__init__(text)
        self.location = location


def source_caret(line: str, column: int) -> str:
    """``line`` without its indentation, indented four spaces, and a caret under its 1-based
    ``column`` (a UTF-8 byte column, as `ast` counts; shown in characters)."""
    body = line.rstrip()
    indent = len(body) - len(body.lstrip())
    chars = len(body.encode("utf-8")[:max(column - 1, 0)].decode("utf-8", "ignore"))
    return f"    {body.lstrip()}\n    {' ' * max(chars - indent, 0)}^"


class FastMathError(CompileError):
    """A kernel's IR carries a fast-math flag its declaration does not allow (see
    `compile.fastmath`): names the kernel, the flag and the first instruction carrying it."""


class KernelIndexError(CuvilError, IndexError):
    """A bounds-checked kernel build (``debug=True`` or ``CUVIL_KERNEL_DEBUG=1``) read or wrote
    outside a buffer: ``file:line:col: index i out of range for axis k of 'buf' (extent n)``."""


class ExecutionError(CuvilError):
    """A run stopped because a stage failed."""


class DeadlineFailure(ExecutionError):
    """An ``on_miss: fail`` policy stopped the run; ``report`` holds what happened."""

    def __init__(self, message: str, report: dict | None = None):
        super().__init__(message)
        self.report = report or {}
