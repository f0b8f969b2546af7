"""The executor: a domain package's task over its inputs, here or on a Dask cluster, results in order.

It knows no domain: a task is a picklable function of one item (a batch of input files) that returns
what the domain merges. A task that fails on a worker returns the error as text instead of raising
(exceptions with custom arguments do not unpickle), naming the worker it ran on; the client raises
it as the quicsm error it was, so the run stops naming the file and line. Nothing is dropped silently.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from quicsm.errors import InputError, ParseError, QuicsmError, as_quicsm_error
from quicsm.fleet.timeouts import awaited, task_timeout

__all__ = ["Failure", "Progress", "guarded", "map_tasks", "tree_merge"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Failure:
    """A task's error, carried back from a worker as text."""

    kind: str
    message: str
    path: str = ""
    line: int = 0
    reason: str = ""

    def raise_(self) -> None:
        if self.kind == "ParseError":
            raise ParseError(self.path, self.line, self.reason)
        raise InputError(self.message)


@dataclass(frozen=True, slots=True)
class guarded:
    """``fn`` as a task: its quicsm error (or a lower layer's, mapped by :func:`as_quicsm_error`)
    comes back as a :class:`Failure`; ``where`` names the worker when the task ran on one."""

    fn: Callable[[Any], Any]
    remote: str = ""
    """Where it runs: "" here, ``"dask"`` on a Dask worker, ``"local"`` in a local worker process."""

    def __call__(self, item: Any) -> Any:
        try:
            return self.fn(item)
        except Exception as exc:
            err = as_quicsm_error(exc)
            if err is None:
                raise
            on = f" (on {_worker_name(self.remote)})" if self.remote else ""
            if isinstance(err, ParseError):
                return Failure("ParseError", str(err) + on, err.path, err.line, err.reason + on)
            return Failure(type(err).__name__, str(err) + on)


def _worker_name(remote: str) -> str:
    import socket

    if remote == "dask":
        try:
            from distributed import get_worker

            w = get_worker()
            return f"Dask worker {w.name} at {w.address}"
        except Exception:
            pass
    return f"local worker process {os.getpid()} on {socket.gethostname()}"


def map_tasks(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    dask: str | None = None,
    progress: Callable[[T], None] | None = None,
    imports: Sequence[str] = (),
) -> Iterator[R]:
    """``fn`` over ``items``, results in the order of ``items``; a failed task raises when reached.

    Without ``dask``, here one after the other. With ``local[:N]``, on N local worker processes
    (:mod:`quicsm.fleet.pool`: at most 2N tasks ahead, so the client holds at most that many results).
    Local workers start, and the first tasks go out, on the call. With a scheduler address, on the
    first result asked for, every task is submitted at once and each result fetched when reached,
    then released on its worker (the client holds one at a time). Either way the tasks not yet reached
    are cancelled when the caller stops. ``progress(item)`` after each. ``imports``: modules the task
    needs, imported here before local workers are forked (so they start with them, not each on its own).
    """
    from quicsm.fleet.cluster import parse_scheduler

    where, n = parse_scheduler(dask) if dask else ("", None)
    if dask and where != "local":
        return _map_dask(fn, items, dask, progress)
    if dask:
        from quicsm.fleet.pool import map_local

        results: Iterator[Any] = map_local(guarded(fn, remote="local"), items, n or 2, imports)  # started now
    else:
        results = map(guarded(fn), items)
    return _checked(items, results, progress)


def _checked(items: Sequence[T], results: Iterator[Any], progress: Callable[[T], None] | None) -> Iterator[Any]:
    for item, r in zip(items, results):
        if isinstance(r, Failure):
            r.raise_()
        if progress is not None:
            progress(item)
        yield r


def _map_dask(fn: Callable[[T], R], items: Sequence[T], dask: str, progress: Callable[[T], None] | None) -> Iterator[R]:
    from quicsm.fleet.cluster import client_for, lost

    timeout = task_timeout()
    client = client_for(dask)
    try:
        with warnings.catch_warnings():  # the batches' file lists are the graph: 10 MiB at 10^5 files, by design
            warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
            futures: list[Any] = client.map(guarded(fn, remote="dask"), list(items), pure=False)
    except Exception as exc:  # the scheduler gone before the tasks were sent
        raise lost(dask, exc) from None
    try:
        for i in range(len(futures)):
            try:
                r = awaited(futures[i].result, items[i], f"--dask {dask}", timeout)
            except QuicsmError:
                raise
            except Exception as exc:  # OSError, a cancelled future (the scheduler killed), a comm error
                raise lost(dask, exc) from None
            futures[i] = None  # the worker may drop it
            if isinstance(r, Failure):
                r.raise_()
            if progress is not None:
                progress(items[i])
            yield r
    finally:
        for f in futures:
            if f is not None:
                f.cancel()


def tree_merge(parts: Sequence[T], merge: Callable[[T, T], T]) -> T | None:
    """``parts`` merged pairwise, neighbours first (``merge(a, b)``: ``b`` after ``a``), so each merge
    is of parts of similar size; the order of the parts is kept."""
    level = list(parts)
    while len(level) > 1:
        level = [merge(level[i], level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    return level[0] if level else None


class Progress:
    """Files done of the total, bytes and an ETA on stderr: one line rewritten on a terminal, a plain
    line per step (at most one a second) when stderr is a file or a pipe."""

    def __init__(self, what: str, files: int, nbytes: int | None = None) -> None:
        self.what, self.files, self.bytes = what, files, nbytes
        self.done_files = self.done_bytes = 0
        self.started = self.shown = time.monotonic()
        self.tty = sys.stderr.isatty()

    def advance(self, files: int, nbytes: int = 0) -> None:
        self.done_files += files
        self.done_bytes += nbytes
        now = time.monotonic()
        last = self.done_files >= self.files
        if not self.tty and not last and now - self.shown < 1.0:
            return
        self.shown = now
        line = f"{self.what}: {self.done_files}/{self.files} files"
        if self.bytes:
            line += f", {self.done_bytes / 1e6:.1f}/{self.bytes / 1e6:.1f} MB"
        share = self.done_bytes / self.bytes if self.bytes else self.done_files / max(self.files, 1)
        if 0 < share < 1:
            line += f", ETA {(now - self.started) * (1 - share) / share:.0f} s"
        if self.tty:
            print(f"\r{line}\x1b[K", end="\n" if last else "", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)
