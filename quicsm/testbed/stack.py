"""The instrumented server and the Go client for a run: quic-go built once per (version, cc) by
``quicsm.testbed.build``, or Cloudflare quiche built once per (crate version, cc) by
``quicsm.testbed.quiche_build``; both cached."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quicsm.errors import TestbedError
from quicsm.testbed.runner import RunConfig, ServerClient

__all__ = ["QuicheStack", "get_stack", "stack_for"]


@dataclass(frozen=True)
class QuicheStack:
    """The patched quiche server with the Go client (built from the run's quic-go version) beside it."""

    server: Path
    client: Path
    patch_set: str


def stack_for(cfg: RunConfig) -> ServerClient:
    """Server and client binaries for a run's stack, version and congestion controller."""
    if cfg.stack != "quiche":
        return get_stack(cfg.quic_go_version, cfg.cc, cfg.packet_threshold)
    from quicsm.testbed.quiche_build import build_quiche_server

    server = build_quiche_server(cfg.quiche_version, cfg.cc)
    client = get_stack(cfg.quic_go_version, "reno").client  # the client carries no instrumentation
    return QuicheStack(server=server.binary, client=client, patch_set=server.patch_set)


def get_stack(version: str, cc: str, packet_threshold: int | None = None) -> ServerClient:
    """Patched server + client binaries for ``version`` with ``cc`` (reno or cubic), optionally with
    the server's packet-reordering threshold changed (:mod:`quicsm.testbed.threshold`)."""
    try:
        from quicsm.testbed.build import build_binaries
    except ImportError as exc:
        raise TestbedError(f"quicsm.testbed.build is not available ({exc}): cannot build the quic-go server") from None
    if packet_threshold is not None:
        from quicsm.testbed.threshold import build_threshold_server

        return build_threshold_server(version, cc, packet_threshold)
    res = build_binaries(version, variant=cc)  # cached by the build step itself
    for p in (res.server, res.client):
        if not Path(p).exists():
            raise TestbedError(f"build of quic-go {version} ({cc}) did not produce {p}")
    return res
