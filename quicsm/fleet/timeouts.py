"""How long a task may go without a result, and waiting for one (both executors: Dask and the local pool)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from quicsm.errors import InputError
from quicsm.textsafe import terminal

__all__ = ["TASK_TIMEOUT", "awaited", "task_timeout"]

R = TypeVar("R")

TASK_TIMEOUT = 900.0
"""Seconds a task may go without a result before the run stops (``QUICSM_TASK_TIMEOUT`` changes it): a
batch is at most 64 MB or 4,096 files, which takes seconds; a worker that is frozen (SIGSTOP, swapped
out) or lost behind a dead network otherwise holds the client for ever. Said on stderr after a tenth
of it (at most a minute) without a result."""


def task_timeout() -> float:
    raw = os.environ.get("QUICSM_TASK_TIMEOUT", "")
    try:
        value = float(raw) if raw else TASK_TIMEOUT
    except ValueError:
        raise InputError(f"QUICSM_TASK_TIMEOUT={raw[:40]!r}: expected a number of seconds") from None
    if not value > 0:
        raise InputError(f"QUICSM_TASK_TIMEOUT={raw[:40]!r}: expected a positive number of seconds")
    return value


def _what(item: Any) -> str:
    """A task's item for a message: its files when it is a batch of them (the executor knows no more)."""
    files = getattr(item, "files", None)
    if files:
        return f"{len(files)} file(s) from {terminal(str(files[0]))}"
    return terminal(str(item))[:100]


def awaited(result: Callable[[float], R], item: Any, where: str, timeout: float) -> R:
    """``result(seconds)`` (a future's), waited for in slices: a note on stderr when a task has been
    silent a while, an :class:`InputError` naming the task and the cluster when it passes ``timeout``."""
    started = time.monotonic()
    step = min(60.0, timeout / 10)
    while True:
        left = timeout - (time.monotonic() - started)
        try:
            return result(max(0.01, min(step, left)))
        except TimeoutError:
            waited = time.monotonic() - started
            if waited >= timeout:
                raise InputError(
                    f"{where}: no result for {_what(item)} in {timeout:g} s; a worker is frozen, lost or "
                    "overloaded (QUICSM_TASK_TIMEOUT=SECONDS gives tasks longer)"
                ) from None
            print(f"note: {where}: waiting {waited:.0f} s for the task of {_what(item)}", file=sys.stderr, flush=True)
