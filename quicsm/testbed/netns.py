"""The emulated path: four network namespaces in a line, tbf for the bottleneck rate.

::

    srv --(s0|b0)-- bn --(b1|r0)-- rly --(r1|c0)-- cli
    server          tbf both ways   quicsm-relay     client

``bn`` only forwards and holds the tbf qdiscs (rate + drop-tail queue), so a full queue drops
silently, as on a real router (tbf at an endpoint would report drops to the sender's socket).
``rly`` runs the userspace relay (delay, jitter that reorders, loss) after the rate limiter: either
the UDP relay (the client dials the relay's address, UDP only) or the IP-layer relay, for which
``rly`` routes every packet it forwards through the TUN device ``qt0`` (policy routing on the
incoming interface) so the relay sees and impairs every IP packet of any protocol, and the client
dials the server's own address.
Addresses come from 198.18.0.0/15 (RFC 2544 benchmarking) and exist only inside these namespaces.
Everything a topology creates is named ``<prefix><tag>-<role>`` so :func:`cleanup_all` can find
leftovers; deleting a namespace deletes its veths and qdiscs with it.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass

from quicsm.errors import TestbedError
from quicsm.testbed.system import require_root, require_tool, sh, sh_ok

__all__ = [
    "PREFIX",
    "Topology",
    "TbfConfig",
    "parse_rate",
    "parse_queue",
    "create",
    "destroy",
    "set_rate",
    "tbf_stats",
    "cleanup_all",
    "list_namespaces",
    "ns_argv",
]

PREFIX = "qsm"
ROLES = ("srv", "bn", "rly", "cli")


@dataclass(frozen=True, slots=True)
class Topology:
    """Names and addresses of one emulated path."""

    tag: str
    prefix: str = PREFIX
    server_ip: str = "198.18.1.1"
    relay_ip: str = "198.18.3.1"
    client_ip: str = "198.18.3.2"

    def ns(self, role: str) -> str:
        if role not in ROLES:
            raise ValueError(role)
        return f"{self.prefix}{self.tag}-{role}"

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(self.ns(r) for r in ROLES)


@dataclass(frozen=True, slots=True)
class TbfConfig:
    """Bottleneck: rate in bit/s, queue (tbf ``limit``) in bytes, bucket in bytes."""

    rate_bps: int
    queue_bytes: int
    burst_bytes: int = 0
    up_rate_bps: int | None = None
    """Client-to-server rate when it differs (ANRW'19's DSL and LTE links); the queue of that
    direction then holds the same time's worth of bytes at its own rate."""

    def burst(self, rate_bps: int | None = None) -> int:
        # A few full packets, or 1 ms at line rate, whichever is larger: enough for tbf to keep up
        # at 100 Mbit/s with high-resolution timers, small enough not to release visible bursts.
        return self.burst_bytes or max(3 * 1514, (rate_bps or self.rate_bps) // 8 // 1000)

    def direction(self, dev: str) -> tuple[int, int]:
        """(rate, queue bytes) of the bottleneck's egress ``b1`` (down) or ``b0`` (up)."""
        if dev == "b0" and self.up_rate_bps:
            return self.up_rate_bps, max(4 * 1514, self.queue_bytes * self.up_rate_bps // self.rate_bps)
        return self.rate_bps, self.queue_bytes


_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def parse_rate(text: str | float | int) -> int:
    """``50`` / ``50mbit`` / ``500kbit`` / ``1e8`` -> bit/s (plain numbers are Mbit/s)."""
    if isinstance(text, (int, float)):
        val = float(text) * 1e6
    else:
        m = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([kmg]?)(bit|bps|b)?(?:/s)?\s*", text.lower())
        if not m:
            raise TestbedError(f"rate {text!r}: expected a number of Mbit/s or e.g. 500kbit, 50mbit")
        num = float(m.group(1))
        val = num * _UNITS[m.group(2)] if (m.group(2) or m.group(3)) else num * 1e6
    if val <= 0:
        raise TestbedError(f"rate {text!r} must be positive")
    return int(val)


def parse_queue(text: str | int, *, rate_bps: int, rtt_ms: float) -> int:
    """Queue size in bytes: ``1bdp``, ``0.5bdp``, ``150000``, ``150kb``, ``64kib``.

    BDP multiples use the configured rate and RTT (at least 10 ms, so a zero-delay path still
    gets a usable queue), never less than 4 full packets.
    """
    if isinstance(text, int):
        return max(text, 4 * 1514)
    t = text.strip().lower()
    m = re.fullmatch(r"([0-9.]+)\s*bdp", t)
    if m:
        bdp = rate_bps / 8 * max(rtt_ms, 10.0) / 1000
        return max(int(float(m.group(1)) * bdp), 4 * 1514)
    m = re.fullmatch(r"([0-9.]+)\s*(b|kb|kib|mb|mib)?", t)
    if not m:
        raise TestbedError(f"queue {text!r}: expected bytes (150000, 150kb) or a BDP multiple (1bdp)")
    mult = {None: 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 10**6, "mib": 1 << 20}[m.group(2)]
    return max(int(float(m.group(1)) * mult), 4 * 1514)


def ns_argv(ns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


def _ip(ns: str, *args: str) -> None:
    sh(["ip", "-n", ns, *args])


TUN_DEV = "qt0"
CLIENT_NET = "198.18.3.0/24"
"""The client side of the path: the IP relay sends packets to it down (server to client)."""


def create(topo: Topology, tbf: TbfConfig | None, *, tun: bool = False) -> None:
    """Build the four namespaces, links, routes and qdiscs (and with ``tun`` the relay namespace's
    TUN device and policy routing). On any failure, tear down what exists."""
    require_root("creating network namespaces")
    require_tool("ip", "iproute2")
    require_tool("tc", "iproute2")
    taken = set(topo.namespaces) & set(list_namespaces(topo.prefix))
    if taken:
        raise TestbedError(f"namespace(s) {', '.join(sorted(taken))} already exist: run `quicsm testbed cleanup` first")
    try:
        _create(topo)
        if tun:
            _route_through_tun(topo)
        if tbf is not None:
            set_rate(topo, tbf, replace=True)
    except BaseException:
        destroy(topo)
        raise


def _create(topo: Topology) -> None:
    srv, bn, rly, cli = topo.namespaces
    for ns in topo.namespaces:
        sh(["ip", "netns", "add", ns])
        _ip(ns, "link", "set", "lo", "up")
    _ip(srv, "link", "add", "s0", "type", "veth", "peer", "name", "b0", "netns", bn)
    _ip(bn, "link", "add", "b1", "type", "veth", "peer", "name", "r0", "netns", rly)
    _ip(rly, "link", "add", "r1", "type", "veth", "peer", "name", "c0", "netns", cli)
    addrs = [
        (srv, "s0", f"{topo.server_ip}/24"),
        (bn, "b0", "198.18.1.2/24"),
        (bn, "b1", "198.18.2.1/24"),
        (rly, "r0", "198.18.2.2/24"),
        (rly, "r1", f"{topo.relay_ip}/24"),
        (cli, "c0", f"{topo.client_ip}/24"),
    ]
    for ns, dev, addr in addrs:
        _ip(ns, "addr", "add", addr, "dev", dev)
        _ip(ns, "link", "set", dev, "up")
    _ip(srv, "route", "add", "default", "via", "198.18.1.2")
    _ip(bn, "route", "add", "198.18.3.0/24", "via", "198.18.2.2")
    _ip(rly, "route", "add", "default", "via", "198.18.2.1")
    _ip(cli, "route", "add", "default", "via", topo.relay_ip)
    sh(ns_argv(bn, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]))
    for ns in topo.namespaces:
        # Big UDP buffers so the endpoints, not the kernel, see the emulated queue (quic-go asks
        # for 7 MB). Where these sysctls are not per-namespace the write fails harmlessly.
        for key in ("net.core.rmem_max", "net.core.wmem_max"):
            sh_ok(ns_argv(ns, ["sysctl", "-q", "-w", f"{key}=16777216"]))


def _route_through_tun(topo: Topology) -> None:
    """In ``rly``: everything arriving on r0 or r1 goes to the TUN device (table 100); what the relay
    writes back into it arrives on ``qt0``, matches no rule and is forwarded by the main table."""
    rly = topo.ns("rly")
    try:
        _ip(rly, "tuntap", "add", "dev", TUN_DEV, "mode", "tun")
    except TestbedError as exc:
        raise TestbedError(
            f"the IP-layer relay (the default emulator) needs a TUN device ({exc}): load the tun module "
            "(modprobe tun) or give the container /dev/net/tun; QUIC stacks can use the UDP relay: QUICSM_EMULATOR=udp"
        ) from None
    # A long device queue: packets wait there only while the relay's reader is descheduled, and a
    # drop there would be loss the relay never counts (the count is kept: tun_drops()).
    _ip(rly, "link", "set", TUN_DEV, "txqueuelen", "10000", "up")
    _ip(rly, "route", "add", "default", "dev", TUN_DEV, "table", "100")
    for pref, dev in (("100", "r0"), ("101", "r1")):
        _ip(rly, "rule", "add", "iif", dev, "lookup", "100", "pref", pref)
    sysctls = ["net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", f"net.ipv4.conf.{TUN_DEV}.rp_filter=0"]
    sysctls += [
        "net.ipv4.conf.all.send_redirects=0",
        "net.ipv4.conf.r0.send_redirects=0",
        "net.ipv4.conf.r1.send_redirects=0",
    ]
    sh(ns_argv(rly, ["sysctl", "-q", "-w", *sysctls]))


def tun_drops(topo: Topology) -> int | None:
    """Packets the kernel dropped at the TUN device's queue (the relay never saw them)."""
    try:
        out = sh(ns_argv(topo.ns("rly"), ["cat", f"/sys/class/net/{TUN_DEV}/statistics/tx_dropped"]))
        return int(out.strip())
    except (TestbedError, ValueError):
        return None


def tbf_stats(topo: Topology) -> dict[str, dict[str, int]] | None:
    """The bottleneck's counters per direction (``down``: b1, toward the client; ``up``: b0): packets and
    bytes it sent, packets it dropped (a full queue), overlimits. None when tc cannot tell."""
    import json

    out: dict[str, dict[str, int]] = {}
    for name, dev in (("down", "b1"), ("up", "b0")):
        try:
            data = json.loads(sh(["tc", "-s", "-j", "-n", topo.ns("bn"), "qdisc", "show", "dev", dev]))
        except (TestbedError, ValueError):
            return None
        q = next((q for q in data if isinstance(q, dict) and q.get("kind") == "tbf"), None)
        if q is None:
            return None
        out[name] = {k: int(q.get(k, 0)) for k in ("packets", "bytes", "drops", "overlimits")}
    return out


def set_rate(topo: Topology, tbf: TbfConfig, *, replace: bool = False) -> None:
    """Install or change the bottleneck on both directions (``tc qdisc change`` keeps the queue)."""
    verb = "replace" if replace else "change"
    bn = topo.ns("bn")
    for dev in ("b1", "b0"):
        rate, queue = tbf.direction(dev)
        sh(
            [
                "tc",
                "-n",
                bn,
                "qdisc",
                verb,
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                f"{rate}bit",
                "burst",
                str(tbf.burst(rate)),
                "limit",
                str(queue),
            ]
        )


def list_namespaces(prefix: str = PREFIX) -> list[str]:
    try:
        names = os.listdir("/var/run/netns")
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(prefix))


def destroy(topo: Topology) -> list[str]:
    """Delete the topology's namespaces (their veths and qdiscs go with them); returns those removed."""
    present = set(list_namespaces(topo.prefix))
    return _delete([ns for ns in topo.namespaces if ns in present])


def cleanup_all(prefix: str = PREFIX) -> list[str]:
    """Remove every namespace whose name starts with ``prefix`` (leftovers of killed runs)."""
    return _delete(list_namespaces(prefix))


def _delete(namespaces: list[str]) -> list[str]:
    """Stop each namespace's processes and delete it; the ones deleted."""
    gone = []
    for ns in namespaces:
        _kill_ns_pids(ns)
        if sh_ok(["ip", "netns", "delete", ns]):
            gone.append(ns)
    return gone


def _kill_ns_pids(ns: str) -> None:
    import signal
    import subprocess

    try:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return
    for tok in out.split():
        with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
            os.kill(int(tok), signal.SIGKILL)
