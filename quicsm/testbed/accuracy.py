"""Emulator accuracy: achieved rate vs configured, delay error percentiles, reordering with jitter.

UDP probes (``quicsm-udpprobe``) run from the client namespace through relay and tbf to the
server namespace; both ends stamp CLOCK_REALTIME on one machine, so one-way delays are exact
up to the kernel's own path.
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from quicsm.testbed import netns
from quicsm.testbed.emulator import Emulator, default_mode
from quicsm.testbed.relay import RelayBinaries, RelayConfig, build_relay
from quicsm.testbed.system import require_root

__all__ = ["RateRow", "DelayRow", "ReorderRow", "LossRow", "AccuracyReport", "measure_accuracy", "probe"]


@dataclass(frozen=True, slots=True)
class RateRow:
    configured_mbps: float
    offered_mbps: float
    achieved_mbps: float
    """IP-level goodput (IP+UDP headers counted); tbf also counts 14 B of Ethernet per packet."""
    ratio: float
    eth_ratio: float
    """Achieved rate counted as tbf counts it (with the Ethernet header) over the configured rate."""


@dataclass(frozen=True, slots=True)
class DelayRow:
    delay_ms: float
    packets: int
    p50_us: int
    p90_us: int
    p99_us: int
    max_us: int
    """Error = measured one-way delay minus configured delay."""
    relay_late_p99_us: int


@dataclass(frozen=True, slots=True)
class ReorderRow:
    delay_ms: float
    jitter_ms: float
    rate_mbps: float
    packets: int
    reordered_share: float
    displaced_ge3_share: float


@dataclass(frozen=True, slots=True)
class LossRow:
    configured: float
    sent: int
    received: int
    measured: float
    """1 - received / sent at the probe receiver (one direction, client to server)."""


@dataclass(frozen=True, slots=True)
class AccuracyReport:
    rates: tuple[RateRow, ...]
    delays: tuple[DelayRow, ...]
    reorder: tuple[ReorderRow, ...]
    load_avg: tuple[float, float] = (0.0, 0.0)
    """1-minute load average before and after: the relay and probes share the CPU with everything else."""
    losses: tuple[LossRow, ...] = ()
    mode: str = "udp"
    """Which relay was measured (``quicsm.testbed.emulator.MODES``)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "rates": [asdict(r) for r in self.rates],
            "delays": [asdict(r) for r in self.delays],
            "reorder": [asdict(r) for r in self.reorder],
            "losses": [asdict(r) for r in self.losses],
            "load_avg": list(self.load_avg),
        }

    def markdown(self) -> str:
        out = [
            f"Relay: {self.mode}",
            "",
            "| configured Mbit/s | offered | achieved (IP) | ratio | ratio incl. Ethernet hdr |",
            "|---:|---:|---:|---:|---:|",
        ]
        out += [
            f"| {r.configured_mbps:g} | {r.offered_mbps:.1f} | {r.achieved_mbps:.2f} | {r.ratio:.3f} | {r.eth_ratio:.3f} |"
            for r in self.rates
        ]
        out += [
            "",
            "| one-way delay | packets | error p50 | p90 | p99 | max | relay send lateness p99 |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        out += [
            f"| {d.delay_ms:g} ms | {d.packets} | {d.p50_us} us | {d.p90_us} us | {d.p99_us} us | {d.max_us} us | {d.relay_late_p99_us} us |"
            for d in self.delays
        ]
        out += [
            "",
            "| delay | jitter | rate | packets | reordered | displaced by >= 3 |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        out += [
            f"| {r.delay_ms:g} ms | +-{r.jitter_ms:g} ms | {r.rate_mbps:g} Mbit/s | {r.packets} | {r.reordered_share:.1%} | {r.displaced_ge3_share:.1%} |"
            for r in self.reorder
        ]
        if self.losses:
            out += ["", "| configured loss | sent | received | measured loss |", "|---:|---:|---:|---:|"]
            out += [f"| {r.configured:.1%} | {r.sent} | {r.received} | {r.measured:.2%} |" for r in self.losses]
        out += ["", f"Machine load (1-min average) before/after: {self.load_avg[0]:.2f} / {self.load_avg[1]:.2f}"]
        return "\n".join(out) + "\n"


def probe(
    bins: RelayBinaries,
    work: Path,
    *,
    rate_bps: int,
    relay_cfg: RelayConfig,
    offered_bps: float,
    size: int,
    seconds: float,
    queue: str = "1bdp",
    mode: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One probe run through a fresh emulator; returns (receiver result, relay summary)."""
    rtt = 2 * relay_cfg.delay_ms
    tbf = netns.TbfConfig(rate_bps, netns.parse_queue(queue, rate_bps=rate_bps, rtt_ms=rtt))
    with Emulator(
        tag=uuid.uuid4().hex[:6], tbf=tbf, relay_cfg=relay_cfg, bins=bins, work_dir=work, mode=mode or default_mode()
    ) as emu:
        recv = emu.procs.start(
            "probe-recv", [str(bins.probe), "recv", "-listen", emu.server_addr, "-idle", "2s"], ns=emu.topo.ns("srv")
        )
        emu.procs.wait_ready(recv)
        send = emu.procs.start(
            "probe-send",
            [
                str(bins.probe),
                "send",
                "-to",
                emu.client_target,
                "-rate",
                str(offered_bps),
                "-size",
                str(size),
                "-duration",
                f"{seconds}s",
            ],
            ns=emu.topo.ns("cli"),
        )
        emu.procs.read_json(send, timeout=seconds + 30)
        result = emu.procs.read_json(recv, timeout=30)
        stats = emu.stop_relay()
    return result, stats


def measure_accuracy(
    work: Path,
    *,
    rates_mbps: Sequence[float] = (5, 10, 50, 100),
    delays_ms: Sequence[float] = (5, 18, 56),
    seconds: float = 4.0,
    losses: Sequence[float] = (0.01, 0.05),
    mode: str | None = None,
) -> AccuracyReport:
    """Probe rate, delay, reordering and loss through the relay ``mode`` (default: the emulator's)."""
    require_root("the accuracy report")
    mode = mode or default_mode()
    bins = build_relay()
    work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    run = functools.partial(probe, bins, seconds=seconds, mode=mode)
    rates = []
    for mbps in rates_mbps:
        res, _ = run(
            work / f"rate-{mbps:g}",
            rate_bps=int(mbps * 1e6),
            relay_cfg=RelayConfig(delay_ms=5),
            offered_bps=mbps * 1e6 * 1.15,
            size=1200,
        )
        achieved = res["rate_bps"] / 1e6
        rates.append(RateRow(mbps, mbps * 1.15, achieved, achieved / mbps, achieved * (1228 + 14) / 1228 / mbps))
    delays = []
    for d in delays_ms:
        res, stats = run(
            work / f"delay-{d:g}", rate_bps=100_000_000, relay_cfg=RelayConfig(delay_ms=d), offered_bps=4e6, size=200
        )
        owd = res["owd_us"]
        base = int(d * 1000)
        delays.append(
            DelayRow(
                d,
                res["received"],
                owd["p50"] - base,
                owd["p90"] - base,
                owd["p99"] - base,
                owd["max"] - base,
                int(stats.get("up", {}).get("late_us", {}).get("p99", -1)),
            )
        )
    reorder = []
    for jitter, mbps in ((10.0, 10.0), (0.0, 10.0)):
        res, _ = run(
            work / f"jitter-{jitter:g}",
            rate_bps=int(mbps * 1e6),
            relay_cfg=RelayConfig(delay_ms=56, jitter_ms=jitter),
            offered_bps=mbps * 1e6 * 0.9,
            size=1200,
        )
        n = max(1, res["received"])
        reorder.append(ReorderRow(56, jitter, mbps, res["received"], res["reordered"] / n, res["reordered_ge3"] / n))
    loss_rows = []
    for p in losses:
        res, stats = run(
            work / f"loss-{p:g}",
            rate_bps=100_000_000,
            relay_cfg=RelayConfig(delay_ms=5, loss=p),
            offered_bps=4e6,
            size=200,
        )
        sent = int(stats["up"]["received"])
        got = int(res["received"])
        loss_rows.append(LossRow(p, sent, got, 1 - got / sent if sent else float("nan")))
    report = AccuracyReport(
        tuple(rates), tuple(delays), tuple(reorder), (load_before, os.getloadavg()[0]), tuple(loss_rows), mode
    )
    (work / "accuracy.json").write_text(json.dumps(report.to_json(), indent=2))
    return report
