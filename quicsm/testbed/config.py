"""The parameters of a testbed run and the parsers of their units, below the stack registry: stacks type
their methods against :class:`RunParams` (what a run asks for), and :class:`quicsm.testbed.runner.RunConfig`
(the runner's, with the stack's own checks) builds on it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from quicsm.errors import TestbedError
from quicsm.testbed import netns
from quicsm.testbed.emulator import RateSchedule
from quicsm.testbed.relay import RelayConfig

__all__ = [
    "CLIENTS",
    "HTTP_PROTOCOLS",
    "LATE_P99_LIMIT_US",
    "RunParams",
    "ServerClient",
    "parse_delay",
    "parse_duration",
    "parse_late_limit",
    "parse_loss",
    "parse_outages",
    "parse_quota",
    "parse_size",
]

CLIENTS = ("go", "chromium", "quic_client")
"""``go`` (testbed/client), ``chromium`` (the browser), ``quic_client`` (Chromium's gQUIC toy client, stack chromium)."""
HTTP_PROTOCOLS = {"h3": "h3", "h2": "h2", "h1": "http/1.1"}
"""HTTP version of a run -> the protocol DevTools reports for a response that came over it."""
LATE_P99_LIMIT_US = 2000
"""A run whose relay sent 1 % of packets later than this is flagged ``emulator_ok: false`` (the default of
``RunConfig.late_limit_ms``)."""


class ServerClient(Protocol):
    """What the build step returns: paths of the instrumented server and the Go client."""

    @property
    def server(self) -> Path: ...

    @property
    def client(self) -> Path: ...


@dataclass(frozen=True, slots=True)
class RunParams:
    """All parameters of a run (they all land in ``meta.json``), checked where no stack is needed;
    :class:`quicsm.testbed.runner.RunConfig` adds the stack's checks and what the stack decides."""

    rate_mbps: float = 50.0
    rtt_ms: float = 36.0
    """Added round-trip delay, half each way."""
    jitter_ms: float = 0.0
    """Uniform +- jitter per packet and direction (reorders, as netem does)."""
    loss: float = 0.0
    """Drop probability per packet and direction (0.01 = 1 %)."""
    queue: str = "1bdp"
    client: str = "go"
    cpu_quota: float | None = None
    """Share of one core for the client (0.1 = 10 %), or unthrottled."""
    objects: int = 1
    size: int = 10_000_000
    quic_go_version: str = "v0.65.0"
    cc: str = ""
    """The server's congestion controller; empty: the stack's own, the first of its ``ccs`` (reno for quic-go,
    quiche, ngtcp2 and tcp; cubic for chromium; bbr for quinn), filled in by ``RunConfig``."""
    packet_threshold: int | None = None
    """Rebuild the server with this fixed reordering threshold (versions that have the constant)."""
    schedule: str | None = None
    """Bandwidth schedule ``random:MIN:MAX[:PERIOD]`` (Mbit/s), or a fixed rate."""
    seed: int = 1
    timeout_s: float = 120.0
    name: str = "run"
    labels: tuple[tuple[str, str], ...] = ()
    """Extra labels for the traces (e.g. ``(("profile", "mobile"),)``)."""
    stack: str = "quic-go"
    """Server stack, a name of :mod:`quicsm.testbed.stacks` (``quic-go``, ``quiche``, ...)."""
    quiche_version: str = "0.30.0"
    """Crate version of quiche when ``stack`` is ``quiche``."""
    stack_version: str | None = None
    """The stack's version, for any stack (wins over ``quic_go_version``/``quiche_version``, which name
    the quic-go and quiche versions; quic_go_version also picks the Go client's quic-go)."""
    rtt_step: str | None = None
    """An RTT step within the run, ``AFTER:RTT`` (``20s:80ms``): from AFTER past the first packet on, the added
    round trip is RTT (half each way), e.g. to see when BBR enters ProbeRtt."""
    outage: str | None = None
    """Link blackouts within the run, ``AT:FOR[,AT:FOR...]`` (``1s:1500ms``): from AT past the first packet
    (the client's first), for FOR, nothing crosses the emulated link in either direction, e.g. to make a
    sender's retransmission timer fire (TLP, then RTO) where random loss rarely does."""
    duration_s: float | None = None
    """Long flow: the client fetches the page's objects back to back until this many seconds have passed
    (instead of loading the page once); ``size`` is then the size of each fetch."""
    patch_set: str | None = None
    """A patch set (shipped name or directory) for the server instead of the one the testbed picks
    (:mod:`quicsm.testbed.sets`)."""
    qlog: bool = False
    """Also keep the server stack's own qlog (where it writes one: quic-go) in ``<run>/qlog/``, beside the
    contract lines: the instrumented truth that the metric-state reader is measured against."""
    late_limit_ms: float = LATE_P99_LIMIT_US / 1000
    """A run is emulator-late (redone, then not usable) when the relay sent 1 % of its packets later than
    this. 2 ms keeps the emulated delay true for measurements; a loaded machine checking that a stack
    works end to end, not how it performs, may allow more."""
    zero_rtt: bool = False
    """Resume with 0-RTT (IMC'17 Fig. 7): the client first opens a connection for a session ticket and keeps
    it open, then loads the page over a second connection that sends its requests as 0-RTT data. The page
    load time is the second connection's; its ``warmup`` connection is the first in ``server.log``."""
    http: str | None = None
    """HTTP version of the page load: ``h3`` (QUIC stacks), ``h2`` or ``h1`` (HTTP/1.1 over TLS, up to six
    connections like a browser; stack ``tcp``). None: the stack's own (h3, or h2 for tcp)."""
    max_cwnd: int | None = None
    """Rebuild the server with this maximum congestion window in packets (IMC'17 Fig. 15's MACW)."""
    page: str | None = None
    """A page of objects of mixed sizes, ``18x2.6KB+3x86.5KB`` (Carlucci et al.'s pages), instead of
    ``objects`` objects of ``size`` bytes (stacks whose server can: quic-go, tcp)."""

    def __post_init__(self) -> None:
        if self.client not in CLIENTS:
            raise TestbedError(f"client {self.client!r}: choose one of {', '.join(CLIENTS)}")
        if self.rate_mbps <= 0 or self.rtt_ms < 0 or self.objects < 1 or self.size < 1:
            raise TestbedError("rate must be positive, rtt non-negative, objects and size at least 1")
        if self.cpu_quota is not None and not 0 < self.cpu_quota <= (os.cpu_count() or 1):
            raise TestbedError(f"cpu quota {self.cpu_quota}: a share of a core, e.g. 0.1 for 10 %")
        RelayConfig(self.rtt_ms / 2, self.jitter_ms, self.loss, delay_step=self.delay_step, outages=self.outages)
        netns.parse_queue(self.queue, rate_bps=1_000_000, rtt_ms=10)
        if self.schedule:
            RateSchedule.parse(self.schedule)
        if self.packet_threshold is not None and self.packet_threshold < 1:
            raise TestbedError(f"packet threshold {self.packet_threshold}: must be at least 1")
        if self.duration_s is not None:
            if not 0 < self.duration_s <= 3600:
                raise TestbedError(f"duration {self.duration_s:g} s: between 0 and 3600 seconds")
            if self.client != "go":
                raise TestbedError("a duration (long flow) needs the Go client (--client go)")
        if not 0 < self.late_limit_ms <= 1000:
            raise TestbedError(f"late limit {self.late_limit_ms:g} ms: between 0 and 1000 ms")
        if self.page is not None:
            self.page_groups  # noqa: B018  (validates)
        if self.max_cwnd is not None and not 2 <= self.max_cwnd <= 1_000_000:
            raise TestbedError(f"max cwnd {self.max_cwnd}: between 2 and 1000000 packets")

    @property
    def delay_step(self) -> tuple[float, float] | None:
        """The relay's delay step (after seconds, one-way ms) of ``rtt_step``."""
        if self.rtt_step is None:
            return None
        m = re.fullmatch(r"\s*([0-9.]+)\s*s?\s*:\s*([0-9.]+)\s*(?:ms)?\s*", self.rtt_step)
        if not m:
            raise TestbedError(f"rtt step {self.rtt_step!r}: expected AFTER:RTT, e.g. 20s:80ms")
        return float(m.group(1)), float(m.group(2)) / 2

    @property
    def outages(self) -> tuple[tuple[float, float], ...]:
        """The relay's outages (at seconds, for seconds) of ``outage``."""
        return () if self.outage is None else parse_outages(self.outage)

    @property
    def client_timeout_s(self) -> float:
        """What the client may take: ``timeout_s``, and for a long flow at least its duration plus 60 s."""
        return self.timeout_s if self.duration_s is None else max(self.timeout_s, self.duration_s + 60)

    @property
    def rate_bps(self) -> int:
        return int(self.rate_mbps * 1e6)

    def queue_bytes(self) -> int:
        return netns.parse_queue(self.queue, rate_bps=self.rate_bps, rtt_ms=self.rtt_ms)

    @property
    def page_groups(self) -> tuple[tuple[int, int], ...]:
        """The page as (objects, bytes each) groups: ``page``'s, or ``objects`` x ``size``."""
        if self.page is None:
            return ((self.objects, self.size),)
        groups = []
        for part in self.page.replace(" ", "").split("+"):
            m = re.fullmatch(r"(\d+)[x*](.+)", part)
            if not m or int(m.group(1)) < 1:
                raise TestbedError(f"page {self.page!r}: expected NxSIZE+NxSIZE, e.g. 18x2.6KB+3x86.5KB")
            groups.append((int(m.group(1)), parse_size(m.group(2))))
        return tuple(groups)

    @property
    def page_bytes(self) -> int:
        """Bytes of all the page's objects."""
        return sum(n * size for n, size in self.page_groups)


_SIZE = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "kib": 1024, "mib": 1 << 20}


def parse_size(text: str | int) -> int:
    """``10MB`` / ``500kb`` / ``1000`` -> bytes (decimal units, like the paper's Table 2)."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in _SIZE:
        raise TestbedError(f"size {text!r}: expected bytes or e.g. 100KB, 10MB")
    return int(float(m.group(1)) * _SIZE[m.group(2)])


_DURATION = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "ms": 0.001}


def parse_duration(text: str | float | None) -> float | None:
    """``60s`` / ``2m`` / ``1500ms`` / ``60`` -> seconds; None or ``none`` -> None."""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    t = text.strip().lower()
    if t in ("", "none"):
        return None
    m = re.fullmatch(r"([0-9.]+)\s*([a-z]*)", t)
    if not m or m.group(2) not in _DURATION:
        raise TestbedError(f"duration {text!r}: expected seconds or e.g. 60s, 2m")
    return float(m.group(1)) * _DURATION[m.group(2)]


def parse_outages(text: str) -> tuple[tuple[float, float], ...]:
    """``1s:1500ms`` / ``2:0.5,6s:1s`` (seconds unless a unit says otherwise) -> ((at_s, for_s), ...)."""
    out = []
    for part in text.split(","):
        at, sep, length = part.partition(":")
        try:
            a, f = parse_duration(at), parse_duration(length)
        except TestbedError:
            a = f = None
        if not sep or a is None or f is None or f <= 0:
            raise TestbedError(f"outage {text!r}: expected AT:FOR[,AT:FOR...] with FOR > 0, e.g. 1s:1500ms")
        out.append((a, f))
    return tuple(out)


def parse_delay(text: str | float) -> float:
    """``36ms`` / ``0.036s`` / ``36`` (ms) -> milliseconds, not negative."""
    if isinstance(text, bool):
        raise TestbedError(f"delay {text!r}: expected milliseconds or e.g. 36ms")
    if isinstance(text, (int, float)):
        val = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s)?\s*", text.lower())
        if not m:
            raise TestbedError(f"delay {text!r}: expected milliseconds or e.g. 36ms")
        val = float(m.group(1)) * (1000.0 if m.group(2) == "s" else 1.0)
    if val < 0:
        raise TestbedError(f"delay {text!r}: must not be negative")
    return val


def parse_late_limit(text: str | float) -> float:
    """``20ms`` / ``0.02s`` / ``20`` (ms) -> milliseconds."""
    if isinstance(text, (int, float)):
        return float(text)
    t = text.strip().lower()
    if re.fullmatch(r"[0-9.]+", t):
        return float(t)
    try:
        sec = parse_duration(t)
    except TestbedError:
        sec = None
    if sec is None:
        raise TestbedError(f"late limit {text!r}: expected milliseconds or e.g. 20ms, 0.05s")
    return sec * 1000


def parse_loss(text: str | float) -> float:
    """``1%`` or ``0.01`` -> 0.01."""
    if isinstance(text, float):
        return text
    t = text.strip()
    val = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    if not 0 <= val < 1:
        raise TestbedError(f"loss {text!r}: a probability below 1 (0.01) or a percentage (1%)")
    return val


def parse_quota(text: str | float | None) -> float | None:
    """``10%`` / ``0.1`` -> 0.1; ``none``/empty -> None."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("", "none", "0")):
        return None
    if isinstance(text, float):
        return text
    t = text.strip()
    return float(t[:-1]) / 100 if t.endswith("%") else float(t)
