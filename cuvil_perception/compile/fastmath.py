"""Fast-math flags: the flags a kernel's IR carries, checked against the flags it declares.

A kernel declares the flags its own float instructions carry (`KernelSpec.fastmath`; the kernel
language puts them on every float operation of the kernel body). A shared IR helper that puts
flags of its own on the instructions it emits declares them when it is called, with
`note_helper` (`irutil.vexp`, hence ``kmath.exp`` / ``kmath.sigmoid`` on f32: ``contract`` in
the polynomial). After a kernel is rendered, `check` collects the flags present on every float
instruction and call of the module and requires

    emitted  ⊆  kernel's declared flags  ∪  flags declared by the helpers it called

(``fast`` stands for all seven flags, on either side). Anything else is a `FastMathError`
naming the kernel, the flag and the first instruction carrying it: a flag changes results, so
it must be a decision written down where the kernel is declared, never a side effect.
The check runs in `render`, the one path every kernel's IR goes through (host, cross, library).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from llvmlite import ir

from ..errors import FastMathError

#: The flags ``fast`` implies (LLVM LangRef, "Fast-Math Flags").
ALL_FLAGS = frozenset({"nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"})

# ir.Module -> {helper name: declared flags}, filled while the module is being generated.
_helpers: "weakref.WeakKeyDictionary[ir.Module, dict[str, frozenset]]" = \
    weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class FastMathUse:
    """What one rendered kernel declares and carries. ``helpers``: (helper, flags) pairs of the
    helpers it called, sorted; ``emitted``: the flags found on its instructions, sorted."""

    kernel: tuple[str, ...]
    helpers: tuple[tuple[str, tuple[str, ...]], ...]
    emitted: tuple[str, ...]

    def declared(self) -> frozenset:
        """The union the check allows: the kernel's flags and its helpers' (``fast`` expanded)."""
        flags = set(expand(self.kernel))
        for _, helper_flags in self.helpers:
            flags |= expand(helper_flags)
        return frozenset(flags)

    def describe(self) -> str:
        """e.g. ``none (helpers: irutil.vexp contract)`` for headers and manifests."""
        own = ", ".join(self.kernel) or "none"
        if not self.helpers:
            return own
        used = "; ".join(f"{name} {', '.join(flags)}" for name, flags in self.helpers)
        return f"{own} (helpers: {used})"


def expand(flags) -> frozenset:
    """``flags`` as a set with ``fast`` replaced by the seven flags it implies."""
    flags = frozenset(flags)
    return (flags - {"fast"}) | ALL_FLAGS if "fast" in flags else flags


def note_helper(module: ir.Module, helper: str, flags: tuple[str, ...]) -> None:
    """Record that a helper declaring ``flags`` emitted code into ``module`` (call it from the
    helper, once per call; cheap)."""
    _helpers.setdefault(module, {})[helper] = frozenset(flags)


def emitted(module: ir.Module) -> dict[str, str]:
    """Fast-math flag -> the opcode of the first instruction carrying it, over every function
    defined in ``module`` (``fast`` is reported as itself)."""
    found: dict[str, str] = {}
    for fn in module.functions:
        for block in fn.blocks:
            for instr in block.instructions:
                flags = list(getattr(instr, "flags", ())) + list(getattr(instr, "fastmath", ()))
                for flag in flags:
                    if flag == "fast" or flag in ALL_FLAGS:
                        found.setdefault(flag, instr.opname)
    return found


def check(name: str, declared: tuple[str, ...], module: ir.Module) -> FastMathUse:
    """Raise `FastMathError` if ``module`` (kernel ``name``, declaring ``declared``) carries a
    flag that neither the kernel nor a helper it called declares; else return the `FastMathUse`."""
    found = emitted(module)
    helpers = tuple(sorted((h, tuple(sorted(f))) for h, f in _helpers.get(module, {}).items()))
    use = FastMathUse(tuple(sorted(declared)), helpers, tuple(sorted(found)))
    allowed = use.declared()
    for flag, opname in sorted(found.items()):
        if not expand({flag}) <= allowed:
            used = "; ".join(f"{h} declares {', '.join(f) or 'none'}" for h, f in helpers)
            raise FastMathError(
                f"kernel {name}: its IR carries the fast-math flag '{flag}' (first on "
                f"`{opname}`), which the kernel does not declare (fastmath="
                f"{tuple(sorted(declared))}) nor any helper it calls ({used or 'no helpers'}); "
                f"add '{flag}' to the kernel's fastmath, or stop emitting it")
    return use
