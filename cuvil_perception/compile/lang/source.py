"""A kernel's source: its AST with positions in the original file, and errors pointing there."""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from dataclasses import dataclass
from typing import Callable

from ...errors import KernelSourceError, Location


@dataclass
class Source:
    """The parsed ``def`` of one Python function: ``tree`` (ast.FunctionDef), the file and the
    line offset so node positions are those of the file; ``digest`` hashes the text."""

    fn: Callable
    tree: ast.FunctionDef
    file: str
    text: str

    @classmethod
    def of(cls, fn: Callable) -> "Source":
        try:
            lines, first = inspect.getsourcelines(fn)
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
        return cls(fn, defs[0], file, text)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:24]

    def where(self, node: ast.AST | None) -> Location:
        line = getattr(node, "lineno", self.tree.lineno)
        col = getattr(node, "col_offset", 0) + 1
        return Location(self.file, line, col)


def fail(src: Source, node: ast.AST | None, message: str, instead: str | None = None):
    """Raise `KernelSourceError` at ``node``: ``file:line:col: message; write ... instead``."""
    text = f"{message}; write {instead} instead" if instead else message
    raise KernelSourceError(f"in kernel {src.fn.__name__}: {text}", src.where(node))
