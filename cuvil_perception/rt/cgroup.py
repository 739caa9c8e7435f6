"""cgroup v2 placement of the run's process (``rt: cgroup:``): a CPU quota and a CPU set.

The process moves into ``<its cgroup>/<name>`` on the cgroup v2 hierarchy, created if needed,
with ``cpu.max`` ("quota period", microseconds) and ``cpuset.cpus`` written first. Every step
needs write access the OS may deny: no cgroup2 mount, the ``cpu`` / ``cpuset`` controller not
available there (a hybrid v1/v2 machine keeps them on v1), a parent that cannot enable them for
children (cgroup v2's "no internal processes" rule: only the root, or a cgroup without
processes, may), or no permission. Each refusal is one warning naming the file and the OS
error; the run continues where it was. The cgroup is left in place after the run (removing it
needs the process out of it first).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CgroupPlan:
    """``name``: child cgroup; ``cpu_max``: (quota_us, period_us) or None (``max``) or absent;
    ``cpuset``: CPU ids or None."""

    name: str
    cpu_max: tuple[int, int] | None = None
    unlimited: bool = False
    cpuset: tuple[int, ...] | None = None

    def controllers(self) -> list[str]:
        wanted = []
        if self.cpu_max is not None or self.unlimited:
            wanted.append("cpu")
        if self.cpuset is not None:
            wanted.append("cpuset")
        return wanted

    def files(self) -> dict[str, str]:
        """What gets written into the new cgroup, in order (cgroup.procs last)."""
        out = {}
        if self.cpu_max is not None:
            out["cpu.max"] = f"{self.cpu_max[0]} {self.cpu_max[1]}"
        elif self.unlimited:
            out["cpu.max"] = "max"
        if self.cpuset is not None:
            out["cpuset.cpus"] = ",".join(str(c) for c in self.cpuset)
        return out


def cgroup2_root(mountinfo: str = "/proc/self/mountinfo") -> Path | None:
    """Mount point of the cgroup2 filesystem, or None."""
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4])
    return None


def own_cgroup(proc_cgroup: str = "/proc/self/cgroup") -> str:
    """This process's cgroup v2 path (the ``0::`` line), e.g. ``/user.slice/x.scope``."""
    try:
        for line in Path(proc_cgroup).read_text().splitlines():
            if line.startswith("0::"):
                return line[3:] or "/"
    except OSError:
        pass
    return "/"


def placement_status(root: Path | None = None, current: str | None = None) -> str:
    """Whether ``rt: cgroup`` could work here, without moving anything (``rt check``)."""
    root = root if root is not None else cgroup2_root()
    if root is None:
        return "not possible: no cgroup v2 hierarchy is mounted"
    parent = root / (current if current is not None else own_cgroup()).lstrip("/")
    try:
        available = (parent / "cgroup.controllers").read_text().split()
    except OSError as exc:
        return f"not possible: cannot read {parent / 'cgroup.controllers'} ({exc.strerror})"
    missing = [c for c in ("cpu", "cpuset") if c not in available]
    if missing:
        return f"not possible: {parent} has no {'/'.join(missing)} controller"
    if not os.access(parent, os.W_OK):
        return f"not possible: {parent} is not writable by this user"
    return f"possible under {parent} (cpu and cpuset controllers, writable)"


def place(plan: CgroupPlan, warn, root: Path | None = None, current: str | None = None) -> bool:
    """Move this process into the planned cgroup; False (after one warning) when refused."""
    root = root if root is not None else cgroup2_root()
    if root is None:
        warn("rt.cgroup: no cgroup v2 hierarchy is mounted; the process stays where it is")
        return False
    parent = root / (current if current is not None else own_cgroup()).lstrip("/")
    wanted = plan.controllers()
    try:
        available = (parent / "cgroup.controllers").read_text().split()
    except OSError as exc:
        warn(f"rt.cgroup: cannot read {parent / 'cgroup.controllers'} ({exc.strerror}); the "
             "process stays where it is")
        return False
    missing = [c for c in wanted if c not in available]
    if missing:
        warn(f"rt.cgroup: the cgroup v2 hierarchy at {parent} has no {'/'.join(missing)} "
             "controller (on a hybrid machine it stays on cgroup v1); the process stays where "
             "it is")
        return False
    return _write_steps(plan, parent, wanted, warn)


def _write_steps(plan: CgroupPlan, parent: Path, wanted: list[str], warn) -> bool:
    target = parent / plan.name
    steps = [(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))]
    steps += [(target / name, text) for name, text in plan.files().items()]
    steps.append((target / "cgroup.procs", str(os.getpid())))
    path = target
    try:
        target.mkdir(exist_ok=True)
        for path, text in steps:
            path.write_text(text + "\n")
    except OSError as exc:
        warn(f"rt.cgroup: the OS refused writing {path} ({exc.strerror or exc}); the process "
             "stays where it is")
        return False
    return True
