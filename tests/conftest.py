"""Shared fixtures: small contract logs written by the tests themselves."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from quicsm.traces.contract import format_line

CUBIC_CHAIN = {
    "SlowStart": ["CongestionAvoidance", "Recovery", "ApplicationLimited"],
    "CongestionAvoidance": ["Recovery", "ApplicationLimited", "CongestionAvoidanceMaxed"],
    "CongestionAvoidanceMaxed": ["CongestionAvoidance", "Recovery"],
    "ApplicationLimited": ["CongestionAvoidance", "SlowStart"],
    "Recovery": ["CongestionAvoidance", "TailLossProbe"],
    "TailLossProbe": ["Recovery", "RetransmissionTimeout", "CongestionAvoidance"],
    "RetransmissionTimeout": ["SlowStart"],
}


def synth_cubic_lines(conns: int, steps: int, seed: int = 0, prefix: str = "") -> list[str]:
    """Interleaved contract lines of ``conns`` connections doing a random walk over Cubic states."""
    rng = random.Random(seed)
    walkers = {c: ["Init", rng.randrange(10**6)] for c in range(conns)}
    lines = []
    for _ in range(conns * steps):
        c = rng.randrange(conns)
        state, t = walkers[c]
        t += rng.randrange(100, 50_000)
        nxt = "SlowStart" if state == "Init" else rng.choice(CUBIC_CHAIN[state])
        lines.append(
            prefix
            + format_line(
                conn=f"0x{c:x}",
                t_us=t,
                cc="cubic",
                frm=state,
                to=nxt,
                cwnd=rng.randrange(14600, 500_000),
                inflight=rng.randrange(0, 500_000),
            )
        )
        walkers[c] = [nxt, t]
    for c, (state, t) in walkers.items():
        if state != "Init":
            lines.append(prefix + format_line(conn=f"0x{c:x}", t_us=t + 1000, cc="cubic", ev="close"))
    return lines


@pytest.fixture
def write_log(tmp_path: Path) -> Callable[..., Path]:
    def _write(name: str, lines: list[str]) -> Path:
        p = tmp_path / name
        p.write_text("".join(line + "\n" for line in lines))
        return p

    return _write
