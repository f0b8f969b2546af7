"""``--dask local:N``: N worker processes of this machine, no scheduler.

One machine needs no distributed scheduler: Dask itself runs GIL-bound Python on one machine with its
local *processes* scheduler, a process pool. This is such a pool, driven so that results stream: tasks
are submitted at most :func:`window` ahead of the one the caller waits for, results come back in
input order, and the client holds at most that many (a 9.6 GB store is never held whole). The workers
are **forked** from the client while it has no other thread (nothing can then be held locked in the
child), so they start in milliseconds with the client's modules imported; with another thread running
(an fsspec event loop, a test's server), or off Linux, they are spawned (each starts Python and imports
what its tasks need: seconds).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import islice
from typing import TypeVar

from quicsm.errors import InputError
from quicsm.fleet.machine import forks
from quicsm.fleet.malloc import keep_freed_memory
from quicsm.fleet.timeouts import awaited, task_timeout

__all__ = ["close_pools", "map_local", "pool_for", "start_method", "window"]

T = TypeVar("T")
R = TypeVar("R")

_POOLS: dict[int, ProcessPoolExecutor] = {}


def start_method() -> str:
    """``fork`` when it is safe (:func:`quicsm.fleet.machine.forks`), else ``spawn`` (a forkserver would
    give workers the environment of when it started, not of this run)."""
    return "fork" if forks() else "spawn"


def _worker_started(client: int) -> None:
    # as the CLI process: one BLAS thread (spawned workers import NumPy after this), fixed malloc thresholds
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    for sig in (signal.SIGTERM, signal.SIGHUP):  # a forked worker ends on these, whatever the client set
        signal.signal(sig, signal.SIG_DFL)
    keep_freed_memory()
    _end_with(client)


def _end_with(client: int) -> None:
    """This worker ends when the client process does: killed, or ended by a timeout's SIGTERM, it leaves
    its workers waiting forever to hand over a result nobody reads (seen: two orphans blocked in a pipe
    write). Linux's parent-death signal (prctl(2) PR_SET_PDEATHSIG) sends SIGTERM then; a client gone
    before it was set is caught by the parent's pid."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != client:
        os._exit(1)


def pool_for(n: int) -> ProcessPoolExecutor:
    """The pool of ``n`` workers of this process (made on first use, closed by :func:`close_pools` or at exit)."""
    pool = _POOLS.get(n)
    if pool is None:
        ctx = multiprocessing.get_context(start_method())
        pool = ProcessPoolExecutor(n, mp_context=ctx, initializer=_worker_started, initargs=(os.getpid(),))
        if not _POOLS:
            atexit.register(close_pools)
        _POOLS[n] = pool
    return pool


def window(n: int) -> int:
    """Tasks submitted ahead of the one awaited: each of ``n`` workers busy and one queued for each."""
    return 2 * n


def map_local(task: Callable[[T], R], items: Sequence[T], n: int, imports: Sequence[str] = ()) -> Iterator[R]:
    """``task`` over ``items`` on ``n`` local worker processes, results in input order. The workers start
    and the first tasks go out now, on the call (so they fork before the caller starts a thread, as a
    Parquet writer's allocator does); the rest as results are taken. The tasks not yet reached are
    cancelled when the caller stops; a worker that dies fails the run. ``imports`` are imported here
    first: forked workers then have them (spawned ones import them on their own)."""
    for name in imports:
        importlib.import_module(name)
    pool = pool_for(n)
    queued = iter(items)
    ahead: deque[tuple[Future[R], T]] = deque((pool.submit(task, item), item) for item in islice(queued, window(n)))
    return _results(pool, ahead, queued, task, n)


def _results(
    pool: ProcessPoolExecutor, ahead: deque[tuple[Future[R], T]], queued: Iterator[T], task: Callable[[T], R], n: int
) -> Iterator[R]:
    timeout = task_timeout()
    try:
        while ahead:
            future, item = ahead.popleft()
            try:
                r = awaited(future.result, item, f"--dask local:{n}", timeout)
            except InputError:  # a frozen worker: the pool goes, its processes killed, not waited for
                ahead.clear()  # the pool fails them itself (cancelled ones would trip its manager thread)
                _kill(n, pool)
                raise
            ahead.extend((pool.submit(task, i), i) for i in islice(queued, window(n) - len(ahead)))
            yield r
    except BrokenProcessPool as exc:
        _POOLS.pop(n, None)
        raise InputError(f"--dask local:{n}: a worker process died ({exc})") from None
    finally:
        for f, _ in ahead:
            f.cancel()


def _kill(n: int, pool: ProcessPoolExecutor) -> None:
    """End a pool whose worker hangs: SIGKILL its processes (a stopped one ignores SIGTERM), then shut it."""
    _POOLS.pop(n, None)
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError):
            proc.kill()
    pool.shutdown(wait=False)


def close_pools() -> None:
    """Shut down every pool this process made (their workers exit)."""
    while _POOLS:
        _, pool = _POOLS.popitem()
        pool.shutdown(wait=True, cancel_futures=True)
