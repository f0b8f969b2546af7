"""The instrumented quic-go server and Go client for a version and congestion controller, built
once per (version, cc) by the patch engine's ``quicsm.testbed.build`` and cached."""

from __future__ import annotations

from pathlib import Path

from quicsm.errors import TestbedError
from quicsm.testbed.runner import ServerClient

__all__ = ["get_stack"]


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
