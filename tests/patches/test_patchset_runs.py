"""Logs printed by real patched senders read back into the states their patch set declares.

``data/run-<set>-<cc>.log.gz`` were recorded (2026-11-22) from google/quiche at the set's commit with
the set applied, the sender driven by a small simulated path (10 Mbit/s, 40 ms, drop-tail queue, an
RTT step to expire min_rtt, an idle gap) and Abseil logging at ``--stderrthreshold=0``; see
docs/patch-sets.md. The timer states come from QuicSentPacketManager, which the driver does not run.
``run-cloudflare-quiche-<version>-<cc>-<cc>.log.gz`` are whole ``server.log`` files of one testbed run
(`bench/bench_versions.py`: 50 Mbit/s, 36 ms RTT, 1 % loss, 2 MB) of quicsm-quiche-server built against
that crates.io release with the set applied (2026-11-26).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import quicsm
from quicsm.traces import parse_inputs
from quicsm.traces.events import StateView

DATA = Path(__file__).parent / "data"
RUNS = sorted(DATA.glob("run-*.log.gz"))
TIMERS = {"TailLossProbe", "RetransmissionTimeout", "ProbeTimeout"}


def _manifest(set_name: str) -> dict:
    (path,) = Path(quicsm.__file__).parent.glob(f"patches/*/{set_name}/manifest.json")
    return json.loads(path.read_text())


def test_there_are_recorded_runs() -> None:
    assert len(RUNS) >= 4


@pytest.mark.parametrize("log", RUNS, ids=lambda p: p.name)
def test_recorded_run_parses_into_the_declared_states(log: Path) -> None:
    m = re.fullmatch(r"run-(.+)-(cubic|reno|bbr|bbr2|bbr3)\.log\.gz", log.name)
    assert m, log.name
    manifest = _manifest(m.group(1))
    result = parse_inputs([log], strict=True)
    assert not result.report.issues
    (trace,) = result.traces
    assert trace.cc == m.group(2)
    seen = set(trace.states(StateView(phases=True)))
    declared = set(manifest["states"])
    assert seen <= declared | {"ProbeBw"}
    assert trace.events[0].prev == "Init"  # the start marker: printed, in every set's table, never a stay
    assert "Init" not in seen
    assert declared - TIMERS - {"Init"} <= seen, f"never reached: {sorted(declared - TIMERS - seen)}"
    times = [e.t_us for e in trace.events]
    assert times == sorted(times) and times[-1] > times[0]
