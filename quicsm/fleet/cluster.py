"""Dask: ``local[:N]`` starts a LocalCluster of N worker processes; anything else is a scheduler address
(``tcp://host:8786``) of a cluster started with ``dask scheduler`` / ``dask worker``.

"""

from __future__ import annotations

import atexit
from typing import Any

from quicsm.errors import InputError

__all__ = ["parse_scheduler", "client_for", "close_clients", "lost", "worker_environ"]


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
    """One client per scheduler spec and process (compare loads several sets), closed at exit."""
    if spec in _CLIENTS:
        return _CLIENTS[spec]
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("--dask needs dask.distributed: pip install 'quicsm[fleet]'") from None
    where, n = parse_scheduler(spec)
    if where == "local":
        import dask

        with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ()}):
            cluster = LocalCluster(
                n_workers=n or 2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
            )
        client = Client(cluster)
        client._quicsm_cluster = cluster  # type: ignore[attr-defined]  # closed with the client
    else:
        try:
            client = Client(where, timeout="10s")
        except OSError as exc:
            raise InputError(f"--dask {spec}: cannot reach the scheduler ({exc})") from None
    if not _CLIENTS:
        atexit.register(close_clients)
    _CLIENTS[spec] = client
    return client


WORKER_MMAP_THRESHOLD = 64 << 20
"""glibc's mmap threshold in workers started here. Dask's nannies set ``MALLOC_TRIM_THRESHOLD_``, and
setting it freezes glibc's mmap threshold at 128 KiB: every column array is then mapped and unmapped,
page faults included, and a worker spent 1.6-1.8x the CPU per file of a lone process. A 64 MiB
threshold gives the lone speed back (docs/fleet.md). Set it in the workers' environment on a cluster
of your own."""


def worker_environ() -> dict[str, Any]:
    """Dask's environment for new workers, with :data:`WORKER_MMAP_THRESHOLD` added."""
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(WORKER_MMAP_THRESHOLD))
    return env


def close_clients() -> None:
    """Close every client (and LocalCluster) this process opened."""
    while _CLIENTS:
        _, client = _CLIENTS.popitem()
        cluster = getattr(client, "_quicsm_cluster", None)
        client.close()
        if cluster is not None:
            cluster.close()
