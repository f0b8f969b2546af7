"""The kernel's TCP as a testbed stack: a Go HTTP/2 + TLS 1.3 server (``testbed/tcp``) whose sockets
use the run's congestion controller, the Go HTTP/2 client (or Chromium without QUIC), and the
server namespace's TCP settings. Its trace comes from :mod:`quicsm.testbed.ktrace`.

Tuning (ANRW'19's "TCP+"): initial window per route (``initcwnd``), pacing, no slow start after
idle, larger socket buffers. This kernel has no ``fq`` qdisc, so pacing is the kernel's internal TCP
pacing: a ``SO_MAX_PACING_RATE`` cap on the socket (any cap below ~0U) sets ``sk_pacing_status`` to
"needed", and TCP then paces at its own rate (2x cwnd/srtt in slow start, 1.2x after) itself. BBR
asks for it on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quicsm.errors import TestbedError
from quicsm.testbed import netns
from quicsm.testbed.relay import build_go_programs
from quicsm.testbed.sources import testbed_root
from quicsm.testbed.system import sh

__all__ = ["TCP_CCS", "TcpBinaries", "TcpTuning", "build_tcp", "apply_tuning", "server_argv", "client_argv"]

TCP_CCS = ("cubic", "reno", "bbr")
"""Controllers this kernel has built in (``net.ipv4.tcp_available_congestion_control``)."""
PACING_CAP = 0xFFFFFFFE
"""SO_MAX_PACING_RATE value that caps nothing but switches internal pacing on (bytes/s)."""


@dataclass(frozen=True, slots=True)
class TcpBinaries:
    server: Path
    client: Path


@dataclass(frozen=True, slots=True)
class TcpTuning:
    """Server-side TCP settings. The defaults are stock Linux (IW 10, no pacing for Cubic/Reno,
    slow start after idle on)."""

    initcwnd: int | None = None
    """Initial congestion window in segments (route attribute ``initcwnd``), None = kernel's 10."""
    pacing: bool = False
    """Internal TCP pacing via SO_MAX_PACING_RATE (no fq qdisc here)."""
    slow_start_after_idle: bool = True
    buffers: int | None = None
    """Maximum send/receive buffer (tcp_wmem/tcp_rmem max, bytes) in the server and client namespaces."""


def tcp_source_dir() -> Path:
    return testbed_root("tcp/go.mod") / "tcp"


def build_tcp(cache_dir: Path | None = None) -> TcpBinaries:
    """Build ``quicsm-h2server`` and ``quicsm-h2client`` (standard library only) once per source digest."""
    out = build_go_programs(tcp_source_dir(), "tcp", ("quicsm-h2server", "quicsm-h2client"), cache_dir)
    return TcpBinaries(out / "quicsm-h2server", out / "quicsm-h2client")


def apply_tuning(topo: netns.Topology, tuning: TcpTuning) -> None:
    """Set the server namespace's TCP up for a run. Always: no cached metrics, so a connection
    never starts from an earlier connection's ssthresh (tcp_metrics)."""
    srv, cli = topo.ns("srv"), topo.ns("cli")
    sysctls = ["net.ipv4.tcp_no_metrics_save=1"]
    sysctls.append(f"net.ipv4.tcp_slow_start_after_idle={int(tuning.slow_start_after_idle)}")
    sh(netns.ns_argv(srv, ["sysctl", "-q", "-w", *sysctls]))
    if tuning.buffers:
        for ns in (srv, cli):
            b = tuning.buffers
            sh(
                netns.ns_argv(
                    ns,
                    ["sysctl", "-q", "-w", f"net.ipv4.tcp_wmem=4096 65536 {b}", f"net.ipv4.tcp_rmem=4096 131072 {b}"],
                )
            )
    if tuning.initcwnd is not None:
        if not 1 <= tuning.initcwnd <= 1000:
            raise TestbedError(f"initcwnd {tuning.initcwnd}: expected 1..1000 segments")
        sh(["ip", "-n", srv, "route", "change", "default", "via", "198.18.1.2", "initcwnd", str(tuning.initcwnd)])


def server_argv(
    bins: TcpBinaries, *, addr: str, objects: int, size: int, cc: str, tuning: TcpTuning, log: Path
) -> list[str]:
    if cc not in TCP_CCS:
        raise TestbedError(f"cc {cc!r} on tcp: choose {', '.join(TCP_CCS)}")
    argv = [str(bins.server), "-addr", addr, "-objects", str(objects), "-size", str(size), "-cc", cc]
    argv += ["-log", str(log)]
    if tuning.pacing:
        argv += ["-pacing-rate", str(PACING_CAP)]
    return argv


def client_argv(bins: TcpBinaries, *, url: str, spki: str, timeout_s: float) -> list[str]:
    return [str(bins.client), "-url", url, "-spki", spki, "-timeout", f"{int(timeout_s)}s"]
