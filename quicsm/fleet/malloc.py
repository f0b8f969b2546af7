"""glibc's malloc thresholds, fixed for the whole run (the CLI process and the workers it starts)."""

from __future__ import annotations

import sys

__all__ = ["keep_freed_memory"]


def keep_freed_memory() -> None:
    """Fixed glibc malloc thresholds (mallopt(3)): the readers free a batch's arrays (megabytes each) and
    allocate them again for the next batch, and glibc's moving thresholds gave them back to the kernel
    every time, which zeroed fresh pages for each batch (parse -o x.parquet of 1.9 GB: 53k page faults
    and 0.9 s of system time; 18k and 0.4 s with these). Nothing on a libc without mallopt (musl)."""
    if sys.platform != "linux":
        return
    import ctypes

    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD: keep up to 256 MiB free at the top of the heap
        mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: blocks below 32 MiB (glibc's cap) from the heap
