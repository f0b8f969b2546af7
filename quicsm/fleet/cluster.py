"""Dask: a scheduler address (``tcp://host:8786``) of a cluster started with ``dask scheduler`` /
``dask worker``. ``local[:N]`` is no cluster: N local worker processes (:mod:`quicsm.fleet.pool`).
"""

from __future__ import annotations

import atexit
import os
import re
from typing import Any

from quicsm.errors import InputError

__all__ = [
    "CONNECT_TIMEOUT",
    "SCHEMES",
    "client_for",
    "close_clients",
    "local_worker_limit",
    "lost",
    "parse_scheduler",
]

CONNECT_TIMEOUT = "30s"
"""How long the client tries to reach a scheduler (10 s was too short on a loaded two-core machine)."""


SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_ADDRESS = re.compile(r"(?:(?P<scheme>[a-z]+)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):(?P<port>[0-9]{1,5})/?")


def local_worker_limit() -> int:
    """Most ``local:N`` workers: four a usable core. Each is a process holding its batch (64 MB of
    input at most): ``local:99999`` once forked until the machine's load reached 120."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return 4 * max(cores, 1)


def parse_scheduler(spec: str) -> tuple[str, int | None]:
    """``local`` / ``local:4`` -> ("local", N or None); an address -> (address, None). A worker count
    past :func:`local_worker_limit` and an address that is not ``SCHEME://HOST:PORT`` are errors."""
    if spec == "local" or spec.startswith("local:"):
        _, _, n = spec.partition(":")
        if not n:
            return "local", None
        if not n.isdigit() or int(n) < 1:
            raise InputError(f"--dask {spec}: worker count must be a positive integer (local:4)")
        if int(n) > local_worker_limit():
            raise InputError(
                f"--dask {spec}: at most {local_worker_limit()} local workers here (4 a core; each is a process "
                "with its batch in memory)"
            )
        return "local", int(n)
    m = _ADDRESS.fullmatch(spec)
    if m is None or m["scheme"] not in (None, *SCHEMES) or not 0 < int(m["port"]) < 65536:
        raise InputError(f"--dask {spec}: expected local[:N] or a scheduler address such as tcp://host:8786")
    return spec, None


def lost(spec: str, exc: BaseException) -> InputError:
    """The one wording for a cluster gone mid-run (the scheduler killed, the network cut)."""
    reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return InputError(f"--dask {spec}: lost the cluster ({reason})")


_CLIENTS: dict[str, Any] = {}


def client_for(spec: str) -> Any:
    """One client per scheduler address and process (compare loads several sets), closed at exit."""
    if spec in _CLIENTS:
        return _CLIENTS[spec]
    try:
        from distributed import Client
    except ImportError:
        raise InputError("--dask needs dask.distributed: pip install 'quicsm[fleet]'") from None
    try:
        client = Client(spec, timeout=CONNECT_TIMEOUT)
    except Exception as exc:  # OSError, a TimeoutError, or distributed's ValueError for an odd address
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise InputError(f"--dask {spec}: cannot reach the scheduler ({reason})") from None
    if not _CLIENTS:
        atexit.register(close_clients)
    _CLIENTS[spec] = client
    return client


def close_clients() -> None:
    """Close every client and local worker pool this process opened."""
    from quicsm.fleet.pool import close_pools

    close_pools()
    while _CLIENTS:
        _, client = _CLIENTS.popitem()
        client.close()
