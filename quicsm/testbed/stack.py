"""The binaries of a run: :func:`stack_for` asks the run's stack (:mod:`quicsm.testbed.stacks`) to build
them, cached; :func:`get_stack` is the quic-go build by version, for scripts that want only that."""

from __future__ import annotations

from typing import TYPE_CHECKING

from quicsm.testbed.stacks import Built, Progress

if TYPE_CHECKING:
    from quicsm.testbed.runner import RunConfig

__all__ = ["get_stack", "stack_for"]


def stack_for(cfg: RunConfig, *, progress: Progress | None = None, force: bool = False) -> Built:
    """Server and client binaries for a run's stack, version, congestion controller and patch set."""
    return cfg.server_stack.build(cfg, progress=progress, force=force)


def get_stack(version: str, cc: str, packet_threshold: int | None = None) -> Built:
    """Patched quic-go server + client for ``version`` with ``cc`` (reno or cubic), optionally with the
    server's packet-reordering threshold changed (:mod:`quicsm.testbed.threshold`)."""
    from quicsm.testbed.runner import RunConfig

    return stack_for(RunConfig(stack="quic-go", quic_go_version=version, cc=cc, packet_threshold=packet_threshold))
