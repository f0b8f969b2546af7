"""Which testbed runs are in progress, and whose: so ``quicsm testbed cleanup`` removes what killed runs
of this user left behind, and never the namespaces of a testbed someone else is running.

Every run registers itself before it creates anything: one JSON file per run in :func:`registry_dir`
(``/run/quicsm/runs``, a tmpfs that is empty after a reboot, like the namespaces) naming the run's tag, the
process that runs it (pid and its start time, so a reused pid is not taken for the owner), the user, and
the run directory. Everything the run creates is named ``<prefix><tag>-...`` (namespaces, cgroups), so the
tag is enough to find it. The entry is removed when the run has torn down; an entry whose process is gone
is a leftover that cleanup removes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from quicsm.files import write_output

__all__ = [
    "CleanupPlan",
    "RunEntry",
    "plan_cleanup",
    "registry_dir",
    "register",
    "unregister",
    "entries",
    "registered",
    "owner_alive",
]

DEFAULT_DIR = "/run/quicsm/runs"


def registry_dir() -> Path:
    """``$QUICSM_RUN_REGISTRY`` or ``/run/quicsm/runs``."""
    return Path(os.environ.get("QUICSM_RUN_REGISTRY") or DEFAULT_DIR)


@dataclass(frozen=True, slots=True)
class RunEntry:
    tag: str
    prefix: str
    """Names of everything the run creates start with ``prefix + tag + "-"``."""
    pid: int
    pid_start: int | None
    """Start time of ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22)."""
    uid: int
    run_dir: str
    started: float

    @property
    def stem(self) -> str:
        return f"{self.prefix}{self.tag}-"


def _start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its closing ')'
    fields = stat[stat.rindex(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def owner_alive(entry: RunEntry) -> bool:
    """Is the process that registered the run still running (the same process, not a reused pid)?"""
    start = _start_time(entry.pid)
    return start is not None and (entry.pid_start is None or start == entry.pid_start)


def register(tag: str, prefix: str, run_dir: Path | str) -> RunEntry:
    """Record a run of this process before it creates namespaces or cgroups named ``prefix + tag``."""
    pid = os.getpid()
    entry = RunEntry(tag, prefix, pid, _start_time(pid), os.getuid(), str(run_dir), round(time.time(), 3))
    d = registry_dir()
    d.mkdir(parents=True, exist_ok=True)
    write_output(str(d / f"{tag}.json"), json.dumps(asdict(entry), indent=1))
    return entry


def unregister(tag: str) -> None:
    (registry_dir() / f"{tag}.json").unlink(missing_ok=True)


@contextmanager
def registered(tag: str, prefix: str, run_dir: Path | str) -> Iterator[RunEntry]:
    """``register`` for the length of a ``with`` block (the run tears down inside it)."""
    entry = register(tag, prefix, run_dir)
    try:
        yield entry
    finally:
        unregister(tag)


def entries() -> list[RunEntry]:
    """Every registered run (unreadable files are skipped: a run being written or another format)."""
    out = []
    d = registry_dir()
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            data = json.loads(p.read_text())
            out.append(RunEntry(**data))
        except (OSError, ValueError, TypeError):
            continue
    return out


@dataclass(frozen=True, slots=True)
class CleanupPlan:
    """What ``quicsm testbed cleanup`` would remove, and what it leaves alone and why."""

    leftovers: list[RunEntry]
    """Runs of this user whose process is gone: their namespaces and cgroups are removed."""
    running: list[RunEntry]
    """Runs still in progress (this user's or another's): untouched."""
    others: list[RunEntry]
    """Finished-but-not-removed runs of other users: untouched."""
    unregistered: list[str]
    """Namespaces with the testbed prefix that no registered run owns (another user's, or a quicsm
    without the registry): untouched unless ``--all``."""


def plan_cleanup(namespaces: list[str], prefix: str) -> CleanupPlan:
    """Sort the registered runs and the existing ``prefix*`` namespaces into what cleanup may remove."""
    mine, running, others = [], [], []
    uid = os.getuid()
    for e in entries():
        if owner_alive(e):
            running.append(e)
        elif e.uid == uid:
            mine.append(e)
        else:
            others.append(e)
    stems = [e.stem for e in (*mine, *running, *others)]
    unregistered = [n for n in namespaces if n.startswith(prefix) and not any(n.startswith(s) for s in stems)]
    return CleanupPlan(mine, running, others, unregistered)
