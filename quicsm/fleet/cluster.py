"""Dask: a scheduler address (``tcp://host:8786``) of a cluster started with ``dask scheduler`` /
``dask worker``. ``local[:N]`` is no cluster: N local worker processes (:mod:`quicsm.fleet.pool`).
"""

from __future__ import annotations

import atexit
from typing import Any

from quicsm.errors import InputError

__all__ = ["parse_scheduler", "client_for", "close_clients", "lost"]


def parse_scheduler(spec: str) -> tuple[str, int | None]:
    """``local`` / ``local:4`` -> ("local", N or None); an address -> (address, None)."""
    if spec == "local" or spec.startswith("local:"):
        _, _, n = spec.partition(":")
        if not n:
            return "local", None
        if not n.isdigit() or int(n) < 1:
            raise InputError(f"--dask {spec}: worker count must be a positive integer (local:4)")
        return "local", int(n)
    if "://" not in spec and ":" not in spec:
        raise InputError(f"--dask {spec}: expected local[:N] or a scheduler address such as tcp://host:8786")
    return spec, None


def lost(spec: str, exc: OSError) -> InputError:
    return InputError(f"--dask {spec}: lost the cluster ({exc})")


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
        client = Client(spec, timeout="10s")
    except OSError as exc:
        raise InputError(f"--dask {spec}: cannot reach the scheduler ({exc})") from None
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
