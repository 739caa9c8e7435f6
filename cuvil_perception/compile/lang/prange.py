"""``for i in prange(n)``: a loop whose iterations run on several threads; what it means, and
how it runs uncompiled.

The iterations ``[start, stop)`` are cut into ``chunks`` (default `CHUNKS`) fixed pieces that
depend on the count and ``chunks`` only, never on the threads: chunk ``c`` is ``q + (c < r)``
iterations from ``start + c q + min(c, r)``, with ``q, r = divmod(stop - start, chunks)``. A
scalar declared before the loop and updated inside it only as ``acc op= e`` (``+ * & | ^``) or
``acc = min(acc, e)`` / ``acc = max(acc, e)`` is a *reduction*: each chunk starts from the
operation's identity (``-0.0`` for a float sum, 1, all ones, 0, +-inf or the int's extremes),
the chunks' partial results are combined in a fixed tree (neighbours first: ``(p0 op p1) op
(p2 op p3)``, an odd one carried up), and ``acc = acc op tree`` after the loop. Everything else
a prange body assigns is private to the chunk.

Uncompiled (``kernel.py_func``), a prange loop runs its chunks in order on the calling thread,
with the same partials and tree (`Rewrite`), so its float sums have the same bits as compiled on
any number of threads. `check_body` is the compiler's list of what a prange body may not do; it
holds for both modes.
"""

from __future__ import annotations

import ast
import copy

import numpy as np

CHUNKS = 64  # chunks of a prange loop unless it says `chunks=`
MAX_CHUNKS = 4096
REDUCE_OPS = {ast.Add: "+", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


def prange(*bounds, chunks: int = CHUNKS) -> range:
    """``for i in prange(n)`` / ``prange(start, stop)``: a parallel loop in a kernel (see the
    module docstring). Called directly (outside a kernel's function) it is ``range``."""
    return range(*bounds)


def chunk_bounds(start: int, stop: int, chunks: int) -> list[tuple[int, int]]:
    """The ``[lo, hi)`` of each of the ``chunks`` chunks of ``range(start, stop)``."""
    q, r = divmod(max(int(stop) - int(start), 0), chunks)
    out = []
    for c in range(chunks):
        lo = int(start) + c * q + min(c, r)
        out.append((lo, lo + q + (c < r)))
    return out


def identity(op: str, like):
    """The value a chunk's partial of ``op`` starts from, of the type of ``like`` (the
    reduction variable before the loop)."""
    kind = np.asarray(like).dtype
    if isinstance(like, (bool, np.bool_)):
        kind = np.dtype(np.int64)
    if kind.kind == "f":
        value = {"+": -0.0, "*": 1.0, "min": np.inf, "max": -np.inf}[op]
    else:
        info = np.iinfo(np.int64 if isinstance(like, int) else kind)
        value = {"+": 0, "*": 1, "&": -1, "|": 0, "^": 0, "min": info.max, "max": info.min}[op]
    return type(like)(value) if isinstance(like, np.generic) else (
        float(value) if kind.kind == "f" else int(value))


def combine(op: str, a, b):
    """``a op b`` as the compiled reduction does it (``min``: ``b if b < a else a``)."""
    if op == "min":
        return b if b < a else a
    if op == "max":
        return b if b > a else a
    return {"+": lambda: a + b, "*": lambda: a * b, "&": lambda: a & b, "|": lambda: a | b,
            "^": lambda: a ^ b}[op]()


def tree(op: str, parts: list):
    """The partials combined neighbours first, level by level (an odd last one carried up)."""
    parts = list(parts)
    while len(parts) > 1:
        parts = [combine(op, parts[k], parts[k + 1]) if k + 1 < len(parts) else parts[k]
                 for k in range(0, len(parts), 2)]
    return parts[0]


def finish(op: str, before, parts: list):
    """The reduction variable after the loop: ``before op tree(parts)``."""
    return combine(op, before, tree(op, parts))


# -- what a body may do (both modes) ------------------------------------------------------------
def reduction_of(stmt: ast.stmt) -> tuple[str, str, ast.expr] | None:
    """(name, op, the operand expression) when ``stmt`` has a reduction's form: ``acc op= e``
    or ``acc = min(acc, e)`` / ``max``; else None."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) \
            and type(stmt.op) in REDUCE_OPS:
        return stmt.target.id, REDUCE_OPS[type(stmt.op)], stmt.value
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call) \
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in ("min", "max") \
            and len(stmt.value.args) == 2 and not stmt.value.keywords \
            and isinstance(stmt.value.args[0], ast.Name) \
            and stmt.value.args[0].id == stmt.targets[0].id:
        return stmt.targets[0].id, stmt.value.func.id, stmt.value.args[1]
    return None


def check_body(loop: ast.For, outer: set) -> tuple[dict, list]:
    """({reduction name: op}, [(node, message, instead)] problems) of the prange loop ``loop``,
    whose enclosing scope binds ``outer`` before it. Problems: ``return``; ``break`` out of the
    prange loop itself; a nested prange; an outer name assigned other than as one reduction,
    or read outside its reduction statements."""
    found: dict = {}
    problems: list = []
    reads: list = []
    skip: set = set()  # the `acc` of `acc = min(acc, e)`: the reduction's own read
    for node, depth in _walk(loop.body, 0):
        if id(node) in skip:
            continue
        red = reduction_of(node) if isinstance(node, ast.stmt) else None
        if red is not None and red[0] in outer:
            name, op, _ = red
            if found.setdefault(name, (op, node))[0] != op:
                problems.append((node, f"'{name}' is reduced with `{found[name][0]}` at line "
                                 f"{found[name][1].lineno} and `{op}` here", "one operation "
                                 "per reduction variable"))
            if isinstance(node, ast.Assign):
                skip.add(id(node.value.args[0]))
            continue
        problems += _problems(node, depth, loop, outer)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.append(node)
    for node in reads:
        if node.id in found:
            problems.append((node, f"'{node.id}' is a reduction of this prange loop (line "
                             f"{found[node.id][1].lineno}) and is read here: inside the loop "
                             "each chunk holds only its part", "read it after the loop"))
    return {name: op for name, (op, _) in found.items()}, problems


def _problems(node: ast.AST, depth: int, loop: ast.For, outer: set) -> list:
    """What `check_body` refuses in ``node`` (at ``depth`` loops below the prange loop), other
    than the uses of a reduction."""
    out = []
    if isinstance(node, ast.Return):
        out.append((node, "`return` inside a prange loop: the chunks run at once, on several "
                    "threads", "a flag or a reduction, and return after the loop"))
    elif isinstance(node, ast.Break) and depth == 0:
        out.append((node, "`break` out of a prange loop: the chunks run at once, so which "
                    "iterations ran before it would depend on the threads",
                    "`continue`, or a `range` loop"))
    elif isinstance(node, ast.For) and _is_prange(node):
        out.append((node, "a prange loop inside a prange loop: only the outermost one runs "
                    "in parallel", "`range` for the inner loop"))
    for target in _stored_names(node):
        if target.id in outer and target.id != _target_name(loop):
            out.append((node, f"'{target.id}' is assigned before the prange loop and assigned "
                        "here: each chunk would assign its own copy, and its value after the "
                        "loop would depend on the chunking", f"a new name inside the loop, or "
                        f"a reduction (`{target.id} += ...`, `{target.id} = min({target.id}, "
                        "...)`)"))
    return out


def _walk(body: list, depth: int):
    """(node, loop depth below the prange loop) for every node of ``body``."""
    for stmt in body:
        yield stmt, depth
        inner = depth + isinstance(stmt, (ast.For, ast.While))
        for field, value in ast.iter_fields(stmt):
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, ast.stmt):
                    yield from _walk([item], inner if field in ("body", "orelse") else depth)
                elif isinstance(item, ast.AST):
                    for sub in ast.walk(item):
                        yield sub, depth


def _stored_names(node: ast.AST) -> list:
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
        targets = [node.target]
    return [n for t in targets for n in ast.walk(t)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def _target_name(loop: ast.For) -> str | None:
    return loop.target.id if isinstance(loop.target, ast.Name) else None


def _is_prange(node: ast.For) -> bool:
    it = node.iter
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "prange"


# -- uncompiled ---------------------------------------------------------------------------------
def keep(parts: list, value) -> None:
    """``parts.append(value)`` (a closure hook: the rebuilt function names no attribute, which
    would read as a module-level constant of the kernel)."""
    parts.append(value)


#: names the rebuilt function's closure binds (`slices.value_slices`), and their values
HOOKS = {"__cuvil_prange_chunks__": chunk_bounds, "__cuvil_prange_identity__": identity,
         "__cuvil_prange_finish__": finish, "__cuvil_prange_range__": range,
         "__cuvil_prange_keep__": keep}


class Rewrite(ast.NodeTransformer):
    """Each prange loop of a kernel's function as its chunks in order (see the module
    docstring): ``for lo, hi in chunk_bounds(...)``, each reduction into a partial, then
    ``acc = finish(op, acc, partials)``."""

    def __init__(self, tree: ast.FunctionDef):
        self.tree = tree
        self.found = False
        self.count = 0

    def visit_For(self, node: ast.For):
        self.generic_visit(node)
        if not _is_prange(node):
            return node
        self.found = True
        outer = {a.arg for a in self.tree.args.args + self.tree.args.kwonlyargs} | {
            t.id for n in ast.walk(self.tree) if getattr(n, "lineno", 1 << 30) < node.lineno
            for t in _stored_names(n)}
        reductions, _ = check_body(node, outer)
        self.count += 1
        tag = f"__cuvil_p{self.count}"
        before = [ast.Assign([_name(f"{n}{tag}parts", ast.Store())], ast.List([], ast.Load()))
                  for n in reductions]
        after = [ast.Assign([_name(n, ast.Store())], _hook("finish", ast.Constant(op), _name(n),
                                                           _name(f"{n}{tag}parts")))
                 for n, op in reductions.items()]
        out = before + [_chunked(node, reductions, tag)] + after
        for new in out:
            ast.copy_location(new, node)
            ast.fix_missing_locations(new)
        return out


def _chunked(node: ast.For, reductions: dict, tag: str) -> ast.For:
    """``for lo, hi in chunk_bounds(...)``: each reduction's partial from its identity, the
    body over ``range(lo, hi)`` on the partials, each partial kept."""
    bounds = node.iter.args if len(node.iter.args) > 1 else [ast.Constant(0)] + node.iter.args
    chunks = next((k.value for k in node.iter.keywords if k.arg == "chunks"),
                  ast.Constant(CHUNKS))
    rename = _Rename({n: f"{n}{tag}" for n in reductions})
    body = [rename.visit(copy.deepcopy(s)) for s in node.body]
    inner = ast.For(node.target, _hook("range", _name(f"{tag}lo"), _name(f"{tag}hi")), body, [])
    starts = [ast.Assign([_name(f"{n}{tag}", ast.Store())],
                         _hook("identity", ast.Constant(op), _name(n)))
              for n, op in reductions.items()]
    keeps = [ast.Expr(_hook("keep", _name(f"{n}{tag}parts"), _name(f"{n}{tag}")))
             for n in reductions]
    bounds_of = ast.Tuple([_name(f"{tag}lo", ast.Store()), _name(f"{tag}hi", ast.Store())],
                          ast.Store())
    return ast.For(bounds_of, _hook("chunks", *bounds[:2], chunks), starts + [inner] + keeps, [])


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict):
        self.names = names

    def visit_Name(self, node: ast.Name):
        if node.id in self.names:
            node.id = self.names[node.id]
        return node


def _name(name: str, ctx=None) -> ast.Name:
    return ast.Name(name, ctx or ast.Load())


def _hook(fn: str, *args) -> ast.Call:
    return ast.Call(_name(f"__cuvil_prange_{fn}__"), list(args), [])


__all__ = ["CHUNKS", "HOOKS", "chunk_bounds", "check_body", "combine", "finish", "identity",
           "prange", "reduction_of", "tree"]
