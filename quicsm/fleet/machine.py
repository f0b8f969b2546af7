"""What this machine and process allow local workers now: a second core that is idle, and forking."""

from __future__ import annotations

import os
import sys
import threading

__all__ = ["forks", "runnable", "spare_core"]


def forks() -> bool:
    """Whether local workers can be forked now: Linux, and this process runs no other thread, Python's or a
    native library's (nothing can then be held locked in a child). Else they are spawned: each starts
    Python and imports what its tasks need (2.5-3.5 s), more than a small run takes in one process."""
    return sys.platform == "linux" and threading.active_count() == 1 and _os_threads() == 1


def _os_threads() -> int:
    """Threads of this process, those of native libraries too (pyarrow's allocator starts one on import)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def spare_core() -> bool:
    """Whether this process may use two cores or more and fewer threads are runnable now than it may use
    (this one among them): with the second core busy, two workers took 1.03x the wall time of one
    process and 1.17x its CPU (2,000 small qlogs, another process holding a core)."""
    cores = len(os.sched_getaffinity(0))
    return cores >= 2 and runnable() < cores


def runnable() -> int:
    """Threads runnable on this machine now (/proc/loadavg's fourth field, before the slash); 1 if unknown."""
    try:
        with open("/proc/loadavg") as fh:
            return int(fh.read().split()[3].partition("/")[0])
    except (OSError, ValueError, IndexError):
        return 1
