"""A kernel's source: its AST with positions in the original file, and errors pointing there.

The text is the one Python compiled: `remember` (called when ``@kernel`` and ``@inline``
decorate a function, i.e. at import) keeps the lines of the function's file and has its digest
taken then. A kernel's file edited while the process runs (before the kernel's first call)
would otherwise be read anew: the kernel compiled from the new text at the old line numbers
(another function, or half of one), unlike ``py_func``, and the disk cache filed that code
under the new file's digest, where the next process - which imports the new text - loads it.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import linecache
import os
import re
import textwrap
from dataclasses import dataclass
from typing import Callable

from ...errors import KernelSourceError, Location
from ..source_digests import file_digest

_TEXTS: dict = {}  # code object -> the lines of its file when it was decorated
_DEF = re.compile(r"^(\s*def\s)|(\s*async\s+def\s)|^(\s*@)")  # as inspect.findsource


def remember(fn: Callable) -> None:
    """Keep the text of ``fn``'s file as it is now, and have the file's digest taken now (a
    notebook cell has lines but no file: its lines only)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    linecache.checkcache(code.co_filename)
    lines = linecache.getlines(code.co_filename, fn.__globals__)
    if lines:
        _TEXTS[code] = lines
    path = os.path.realpath(code.co_filename)
    if os.path.isfile(path):
        file_digest(path)  # (memoised: the digest the kernel's identity will use)


def _remembered_lines(fn: Callable) -> tuple[list, int] | None:
    """(the def's lines, its first line number) from the remembered text, or None."""
    target = inspect.unwrap(fn)
    code = getattr(target, "__code__", None)
    lines = _TEXTS.get(code)
    if lines is None:
        return None
    first = code.co_firstlineno - 1
    while first > 0 and first < len(lines) and not _DEF.match(lines[first]):
        first -= 1
    if first >= len(lines):
        return None
    return inspect.getblock(lines[first:]), first + 1


@dataclass
class Source:
    """The parsed ``def`` of one Python function: ``tree`` (ast.FunctionDef), the file and the
    line offset so node positions are those of the file; ``digest`` hashes the text."""

    fn: Callable
    tree: ast.FunctionDef
    file: str
    text: str
    lines: tuple = ()   # the def's lines as the file has them (for an error's caret line)
    first: int = 1      # the file's line number of lines[0]

    @classmethod
    def of(cls, fn: Callable) -> "Source":
        try:
            lines, first = _remembered_lines(fn) or inspect.getsourcelines(fn)
            file = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as exc:
            raise KernelSourceError(f"kernel {fn.__qualname__}: its source is not available "
                                    f"({exc}); define kernels in a .py file") from None
        text = textwrap.dedent("".join(lines))
        module = ast.parse(text)
        ast.increment_lineno(module, first - 1)
        indent = len(lines[0]) - len(lines[0].lstrip())
        for node in ast.walk(module):  # columns of the file, not of the dedented text
            if hasattr(node, "col_offset"):
                node.col_offset += indent
        defs = [n for n in module.body if isinstance(n, ast.FunctionDef)]
        if not defs:
            raise KernelSourceError(f"kernel {fn.__qualname__}: not a plain `def` function",
                                    Location(file, first, 1))
        return cls(fn, defs[0], file, text, tuple(lines), first)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:24]

    def line_text(self, line: int) -> str | None:
        """The text of the file's ``line`` (1-based) if it is one of the def's, else None."""
        k = line - self.first
        return self.lines[k] if 0 <= k < len(self.lines) else None

    def where(self, node: ast.AST | None) -> Location:
        line = getattr(node, "lineno", self.tree.lineno)
        col = getattr(node, "col_offset", 0) + 1
        return Location(self.file, line, col)


def fail(src: Source, node: ast.AST | None, message: str, instead: str | None = None):
    """Raise `KernelSourceError` at ``node``: ``file:line:col: message; write ... instead``,
    the line and a caret under the column."""
    text = f"{message}; write {instead} instead" if instead else message
    where = src.where(node)
    raise KernelSourceError(f"in kernel {src.fn.__name__}: {text}", where,
                            src.line_text(where.line))
