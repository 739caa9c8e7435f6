"""``cuvil-perception ops --markdown``: the op reference as Markdown (docs/ops.md is its output).

The same declarations as the ``ops`` tables (``Param`` with its type, default, allowed values
and unit; ``PortSpec`` with dtype and static shape), so the page cannot drift from the code:
tests/test_docs.py regenerates it and compares.
"""

from __future__ import annotations

from ..graph import registered
from .op_reference import describe_ports, first_line, show_default

HEADER = """# Op reference

Every op a pipeline can use, generated from the ops' own declarations by
`cuvil-perception ops --markdown > docs/ops.md` (the test suite checks it is current). A value
outside `allowed` is refused when the pipeline is loaded (see
[pipeline-yaml.md](pipeline-yaml.md#param-values)); output shapes are those of the default params.
"""


def ops_markdown() -> str:
    """The whole reference page (every registered op except the ``test.*`` doubles)."""
    parts = [HEADER]
    for name, cls in registered().items():
        if name.startswith("test.") or not cls.__module__.startswith("cuvil_perception."):
            continue
        parts.append(f"\n## `{name}`\n\nDefault tag `{cls.tag}`. {_cell(first_line(cls))}\n")
        if cls.params:
            parts.append("\n| param | type | default | allowed | meaning |\n|---|---|---|---|---|")
            for p in cls.params:
                parts.append(f"| `{p.name}` | {p.type_name()} | `{show_default(p)}` | "
                             f"{_cell(p.constraint()) or '-'} | {_cell(p.doc)} |")
        inputs, outputs, variadic = describe_ports(cls)
        for title, ports in (("input", inputs), ("output", outputs)):
            if title == "input" and variadic:
                parts.append("\nInputs: any name, any array (every input is written).")
            elif ports:
                parts.append(f"\n| {title} | dtype and shape | meaning |\n|---|---|---|")
                parts.extend(f"| `{s.name}` | `{s.describe()}` | {_cell(s.doc)} |" for s in ports)
    return "\n".join(parts) + "\n"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")
