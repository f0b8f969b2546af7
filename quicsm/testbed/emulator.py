"""One emulated path, up for the duration of a ``with`` block: namespaces, tbf, relay, and an
optional bandwidth schedule (a new rate every period, Fig. 11). Teardown always runs.

Two relays (``mode``): ``ip`` (the default, every stack) routes every packet of any protocol through
the IP-layer relay, so TCP and QUIC flows share one path and one set of impairments and clients dial
the server's own address; ``udp`` is the UDP relay (QUIC only), kept to compare against.
``QUICSM_EMULATOR=udp|ip`` overrides the default for a process. Both relays share their impairment
code (testbed/relay/internal/lane); experiments/iprelay_handshake.md and iprelay_fig13.md hold them
against each other."""

from __future__ import annotations

import contextlib
import json
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from quicsm.errors import TestbedError
from quicsm.testbed import netns
from quicsm.testbed.procs import Child, ProcGroup
from quicsm.testbed.relay import RelayBinaries, RelayConfig, iprelay_argv, relay_argv

__all__ = ["RateSchedule", "Emulator", "SERVER_PORT", "RELAY_PORT", "MODES", "default_mode"]

SERVER_PORT = 4433
RELAY_PORT = 4433
MODES = ("udp", "ip")
DEFAULT_MODE = "ip"


def default_mode() -> str:
    """The relay a run uses unless told otherwise: ``$QUICSM_EMULATOR`` or :data:`DEFAULT_MODE`."""
    mode = os.environ.get("QUICSM_EMULATOR", "").strip().lower() or DEFAULT_MODE
    if mode not in MODES:
        raise TestbedError(f"QUICSM_EMULATOR={mode!r}: choose {' or '.join(MODES)}")
    return mode


@dataclass(frozen=True, slots=True)
class RateSchedule:
    """Every ``period_s`` a new rate drawn uniformly from [min_bps, max_bps] (seeded)."""

    min_bps: int
    max_bps: int
    period_s: float = 1.0
    seed: int = 1

    @classmethod
    def parse(cls, text: str, seed: int = 1) -> RateSchedule:
        """``random:MIN:MAX[:PERIOD_S]`` with rates as in :func:`netns.parse_rate`."""
        parts = text.split(":")
        if parts[0] != "random" or len(parts) not in (3, 4):
            raise TestbedError(f"bandwidth schedule {text!r}: expected random:MIN:MAX[:PERIOD_S], e.g. random:5:50:1")
        lo, hi = netns.parse_rate(parts[1]), netns.parse_rate(parts[2])
        if lo > hi:
            raise TestbedError(f"bandwidth schedule {text!r}: MIN above MAX")
        period = float(parts[3]) if len(parts) == 4 else 1.0
        if period <= 0:
            raise TestbedError(f"bandwidth schedule {text!r}: period must be positive")
        return cls(lo, hi, period, seed)


@dataclass
class Emulator:
    """Context manager: ``with Emulator(...) as emu: emu.server_addr / emu.client_target``."""

    tag: str
    tbf: netns.TbfConfig | None
    relay_cfg: RelayConfig
    bins: RelayBinaries
    work_dir: Path
    schedule: RateSchedule | None = None
    mode: str = field(default_factory=default_mode)
    """``ip`` (every protocol, clients dial the server) or ``udp`` (the UDP relay)."""
    procs: ProcGroup = field(init=False)
    topo: netns.Topology = field(init=False)
    relay: Child | None = field(init=False, default=None)
    rate_log: list[tuple[float, int]] = field(init=False, default_factory=list)
    relay_stats: dict[str, Any] = field(init=False, default_factory=dict)
    tbf_stats: dict[str, dict[str, int]] | None = field(init=False, default=None)
    """The bottleneck queue's counters when the relay stopped (:func:`netns.tbf_stats`)."""
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _thread: threading.Thread | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise TestbedError(f"emulator mode {self.mode!r}: choose {' or '.join(MODES)}")
        self.topo = netns.Topology(tag=self.tag)
        self.procs = ProcGroup(self.work_dir)

    @property
    def server_addr(self) -> str:
        return f"{self.topo.server_ip}:{SERVER_PORT}"

    @property
    def client_target(self) -> str:
        """What the client dials: the server itself through the IP relay, else the UDP relay's address."""
        if self.mode == "ip":
            return self.server_addr
        return f"{self.topo.relay_ip}:{RELAY_PORT}"

    def target(self, port: int) -> str:
        """Where a client reaches a server listening on ``port`` (several flows share one path)."""
        if self.mode != "ip":
            raise TestbedError("several servers on one path need the IP relay (emulator mode ip)")
        return f"{self.topo.server_ip}:{port}"

    def __enter__(self) -> Emulator:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        netns.create(self.topo, self.tbf, tun=self.mode == "ip")
        stats = self.work_dir / "relay.json"
        if self.mode == "ip":
            argv = iprelay_argv(
                self.bins.iprelay, tun=netns.TUN_DEV, down_net=netns.CLIENT_NET, cfg=self.relay_cfg, stats=stats
            )
        else:
            argv = relay_argv(
                self.bins.relay, listen=self.client_target, upstream=self.server_addr, cfg=self.relay_cfg, stats=stats
            )
        try:
            self.relay = self.procs.start("relay", argv, ns=self.topo.ns("rly"))
            self.procs.wait_ready(self.relay, timeout=10)
        except BaseException:
            self.close()
            raise
        return self

    def start_schedule(self) -> None:
        """Begin changing the rate (call when the transfer starts)."""
        if self.schedule is None or self.tbf is None:
            return
        self._thread = threading.Thread(target=self._run_schedule, name="rate-schedule", daemon=True)
        self._thread.start()

    def _run_schedule(self) -> None:
        assert self.schedule is not None and self.tbf is not None
        rng = random.Random(self.schedule.seed)
        t0 = time.monotonic()
        while not self._stop.is_set():
            rate = rng.randint(self.schedule.min_bps, self.schedule.max_bps)
            try:
                netns.set_rate(self.topo, netns.TbfConfig(rate, self.tbf.queue_bytes, self.tbf.burst_bytes))
            except TestbedError:
                return  # topology is going away
            self.rate_log.append((round(time.monotonic() - t0, 3), rate))
            self._stop.wait(self.schedule.period_s)

    def stop_relay(self) -> dict[str, Any]:
        """Stop the relay and read its summary (counters, lateness, reordering)."""
        if self.relay is not None and self.relay.popen.poll() is None:
            if self.tbf is not None:
                self.tbf_stats = netns.tbf_stats(self.topo)
            drops = netns.tun_drops(self.topo) if self.mode == "ip" else None
            cpu_s = _cpu_seconds(self.relay.popen.pid)
            self.procs.stop(self.relay)
            path = self.work_dir / "relay.json"
            if path.exists():
                self.relay_stats = json.loads(path.read_text())
                if drops is not None:
                    self.relay_stats["tun_tx_dropped"] = drops
                if cpu_s is not None:
                    self.relay_stats["cpu_s"] = cpu_s
        return self.relay_stats

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(OSError, ValueError):
            self.stop_relay()
        self.procs.stop_all()
        netns.destroy(self.topo)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far, from /proc (what the relay costs)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None
