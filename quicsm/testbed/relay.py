"""The Go impairment relays (``testbed/relay``): building them and describing one direction's impairment.

``quicsm-relay`` relays UDP datagrams between the client and the server's address; ``quicsm-iprelay``
impairs every IP packet routed through the relay namespace's TUN device. Both apply one
direction's delay, jitter, loss, delay step and outages with the same code (``internal/lane``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from quicsm.errors import TestbedError
from quicsm.testbed.buildtools import source_digest
from quicsm.testbed.sources import testbed_root

__all__ = [
    "RelayConfig",
    "RelayBinaries",
    "relay_source_dir",
    "build_relay",
    "build_go_programs",
    "relay_argv",
    "iprelay_argv",
]


@dataclass(frozen=True, slots=True)
class RelayConfig:
    """Impairments applied in each direction: one-way delay, uniform jitter (+-, reorders like
    netem), Bernoulli loss. ``delay_ms`` is one way; the RTT is twice it."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    seed: int = 1
    loss_up: float | None = None
    """Drop probability client to server when it differs from ``loss`` (CS244 lost only the downlink)."""
    delay_step: tuple[float, float] | None = None
    """(after_s, delay_ms): from ``after_s`` past the relay's first packet on, the one-way delay of
    both directions is ``delay_ms`` (an RTT step within one run)."""
    outages: tuple[tuple[float, float], ...] = ()
    """(at_s, for_s) link blackouts: from ``at_s`` past the relay's first packet, for ``for_s``, nothing
    crosses the relay in either direction (a packet still on its way when one begins is lost too). In
    time order, not overlapping."""

    def __post_init__(self) -> None:
        if self.delay_ms < 0 or self.jitter_ms < 0:
            raise TestbedError(f"delay {self.delay_ms} ms / jitter {self.jitter_ms} ms must not be negative")
        for p in (self.loss, self.loss if self.loss_up is None else self.loss_up):
            if not 0.0 <= p < 1.0:
                raise TestbedError(f"loss {p} must be a probability in [0, 1)")
        if self.delay_step is not None and (self.delay_step[0] <= 0 or self.delay_step[1] < 0):
            raise TestbedError(f"delay step {self.delay_step}: needs after_s > 0 and a delay >= 0 ms")
        end = 0.0
        for at, length in self.outages:
            if at < end or length <= 0:
                raise TestbedError(
                    f"outages {self.outages}: each needs a length > 0 and must start after the one before it ends"
                )
            end = at + length


@dataclass(frozen=True, slots=True)
class RelayBinaries:
    relay: Path
    probe: Path
    iprelay: Path


def relay_source_dir() -> Path:
    """``testbed/relay`` of the source tree, or of the copy an installed quicsm ships."""
    return testbed_root("relay/go.mod") / "relay"


def build_relay(cache_dir: Path | None = None) -> RelayBinaries:
    """Build ``quicsm-relay``, ``quicsm-iprelay`` and ``quicsm-udpprobe`` once per source digest (cached)."""
    out = build_go_programs(
        relay_source_dir(), "relay", ("quicsm-relay", "quicsm-udpprobe", "quicsm-iprelay"), cache_dir
    )
    return RelayBinaries(out / "quicsm-relay", out / "quicsm-udpprobe", out / "quicsm-iprelay")


def build_go_programs(src: Path, kind: str, programs: tuple[str, ...], cache_dir: Path | None = None) -> Path:
    """``go build ./cmd/...`` of the standard-library-only module ``src`` into a cache directory
    named by its source digest; returns that directory (built once per digest)."""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if go is None:
        raise TestbedError(f"Go toolchain not found: install Go (scripts/install.sh) to build {src.name}")
    base = cache_dir or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "quicsm" / kind
    out = base / source_digest(src, keep=lambda p: p.suffix == ".go" or p.name == "go.mod")
    if all((out / p).exists() for p in programs):
        return out
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [go, "build", "-o", str(out) + "/", "./cmd/..."],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CGO_ENABLED": "0"},
    )
    if proc.returncode != 0:
        raise TestbedError(f"building {', '.join(programs)} in {src} failed: {proc.stderr.strip()[-1500:]}")
    return out


def relay_argv(binary: Path, *, listen: str, upstream: str, cfg: RelayConfig, stats: Path) -> list[str]:
    return [str(binary), "-listen", listen, "-upstream", upstream, *_impairment_args(cfg), "-stats", str(stats)]


def iprelay_argv(
    binary: Path, *, tun: str, down_net: str, cfg: RelayConfig, stats: Path, bin_ms: float = 100
) -> list[str]:
    """The IP-layer relay on TUN device ``tun``; packets to ``down_net`` go down (server to client)."""
    args = [str(binary), "-tun", tun, "-down-net", down_net, *_impairment_args(cfg)]
    return [*args, "-bin", f"{bin_ms}ms", "-stats", str(stats)]


def _impairment_args(cfg: RelayConfig) -> list[str]:
    d, j = f"{cfg.delay_ms}ms", f"{cfg.jitter_ms}ms"
    return [
        "-delay-down",
        d,
        "-delay-up",
        d,
        "-jitter-down",
        j,
        "-jitter-up",
        j,
        "-loss-down",
        str(cfg.loss),
        "-loss-up",
        str(cfg.loss if cfg.loss_up is None else cfg.loss_up),
        "-seed",
        str(cfg.seed),
        *(["-delay-step", f"{cfg.delay_step[0]}s:{cfg.delay_step[1]}ms"] if cfg.delay_step else []),
        *(
            ["-outage", ",".join(f"{at * 1000:g}ms:{length * 1000:g}ms" for at, length in cfg.outages)]
            if cfg.outages
            else []
        ),
    ]
