"""CPU quotas for "mobile-like" clients: cgroup v1 ``cpu.cfs_quota_us`` or cgroup v2 ``cpu.max``.

A quota is a share of one core (0.1 = 10 %). The child joins the group itself before it execs
(:meth:`CpuGroup.preexec`), so everything it forks (Chromium's renderers, Go threads) is limited.
Groups are named ``<prefix>...`` so :func:`cleanup_all` finds leftovers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from quicsm.errors import TestbedError
from quicsm.testbed.system import require_root

__all__ = ["PERIOD_US", "CpuGroup", "cgroup_kind", "create_group", "cleanup_all"]

PERIOD_US = 100_000
V1_ROOT = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")


def cgroup_kind() -> str:
    """``v1`` when the v1 cpu controller is mounted, ``v2`` when the unified hierarchy offers cpu."""
    if (V1_ROOT / "cpu.cfs_quota_us").exists():
        return "v1"
    controllers = V2_ROOT / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return "v2"
    raise TestbedError("no cgroup cpu controller: neither /sys/fs/cgroup/cpu (v1) nor cpu in cgroup.controllers (v2)")


@dataclass(frozen=True, slots=True)
class CpuGroup:
    """One cgroup limiting its members to ``quota`` of a core."""

    path: Path
    kind: str
    quota: float
    acct: Path | None = None
    """v1 with a separately mounted cpuacct: the twin group that counts CPU time."""

    def preexec(self) -> None:
        """Run in the child between fork and exec: move this process into the group."""
        (self.path / "cgroup.procs").write_text("0\n")
        if self.acct is not None:
            (self.acct / "cgroup.procs").write_text("0\n")

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except FileNotFoundError:
            return []

    def usage_s(self) -> float | None:
        """CPU seconds used by members so far (v1 cpuacct-style ``cpuacct.usage`` or v2 ``cpu.stat``)."""
        try:
            if self.kind == "v1":
                acct = (self.acct or self.path) / "cpuacct.usage"
                return int(acct.read_text()) / 1e9 if acct.exists() else None
            for line in (self.path / "cpu.stat").read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == "usage_usec":
                    return int(v) / 1e6
        except (OSError, ValueError):
            return None
        return None

    def remove(self) -> None:
        """Kill what is left inside, then remove the directory (retrying while tasks exit)."""
        remove_group(self.path)
        if self.acct is not None:
            remove_group(self.acct)


def create_group(name: str, quota: float) -> CpuGroup:
    """Create ``name`` with ``quota`` (0 < quota <= number of cores) and return it."""
    require_root("a CPU quota")
    cores = os.cpu_count() or 1
    if not (0.0 < quota <= cores):
        raise TestbedError(f"cpu quota {quota}: must be a share of a core in (0, {cores}]")
    kind = cgroup_kind()
    quota_us = max(1000, int(quota * PERIOD_US))
    acct: Path | None = None
    if kind == "v1":
        path = V1_ROOT / name
        path.mkdir(exist_ok=True)
        (path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
        (path / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")
        acct_root = Path("/sys/fs/cgroup/cpuacct")
        if acct_root.is_dir() and not (V1_ROOT / "cpuacct.usage").exists():
            acct = acct_root / name
            acct.mkdir(exist_ok=True)
    else:
        sub = V2_ROOT / "cgroup.subtree_control"
        if "cpu" not in sub.read_text().split():
            sub.write_text("+cpu\n")
        path = V2_ROOT / name
        path.mkdir(exist_ok=True)
        (path / "cpu.max").write_text(f"{quota_us} {PERIOD_US}\n")
    return CpuGroup(path=path, kind=kind, quota=quota, acct=acct)


def remove_group(path: Path) -> None:
    for _ in range(50):
        if not path.exists():
            return
        try:
            pids = [int(x) for x in (path / "cgroup.procs").read_text().split()]
        except OSError:
            pids = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.05)
    raise TestbedError(f"could not remove cgroup {path} (tasks still inside)")


def cleanup_all(prefix: str) -> list[str]:
    """Remove every cpu cgroup whose name starts with ``prefix``."""
    gone = []
    roots = [V1_ROOT, Path("/sys/fs/cgroup/cpuacct"), V2_ROOT]
    for root in roots:
        if not root.is_dir():
            continue
        for p in sorted(root.glob(prefix + "*")):
            if p.is_dir():
                try:
                    remove_group(p)
                    gone.append(str(p))
                except TestbedError:
                    pass
    return gone
