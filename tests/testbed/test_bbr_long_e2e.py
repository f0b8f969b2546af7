"""End to end, each BBR stack on a short long flow: quinn-proto 0.11.19's BBR (v1) and Cloudflare quiche
0.30.0's BBR2 built from their pinned locks (cargo build --locked), each streaming for --duration through
the emulator, then parsed. Asserts what a few seconds of BBR must show on a 50 Mbit/s, 36 ms path:
Startup, then the ProbeBw gain cycle (quinn probes every ~8 round trips, so Up and Down both appear; quiche
cruises ~2 s between probes, so its run must at least reach ProbeBw), and a client that streamed for
the whole duration. Needs root and cargo; the quiche build also needs libclang (.ci/install.d/quiche.sh)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from quicsm.testbed.runner import RunConfig, run_many
from quicsm.traces import parse_inputs


def _have_cargo() -> bool:
    return shutil.which("cargo") is not None or os.access(Path.home() / ".cargo/bin/cargo", os.X_OK)


pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces, tc and cgroups"),
    pytest.mark.skipif(not _have_cargo(), reason="needs cargo (Rust >= 1.88, .ci/install.d/quiche.sh)"),
]

DURATION = 6.0


def _long_flow(stack: str, cc: str, tmp: Path) -> tuple[dict, list]:  # type: ignore[type-arg]
    cfg = RunConfig(stack=stack, cc=cc, rate_mbps=50, rtt_ms=36, size=50_000_000, duration_s=DURATION, name=stack)
    bins = cfg.server_stack.build(cfg)
    if stack == "quinn":  # pinned: built from the committed lock (quiche's lock is the quiche build's business)
        assert bins.meta.get("locked") is True, bins.meta
    (res,) = run_many(cfg, bins, tmp, retries=2)
    assert res.ok, res.error
    meta = json.loads((res.run_dir / "meta.json").read_text())
    traces = parse_inputs([str(res.run_dir / "server.log")], require_transitions=False).traces
    return meta, traces


def _states(traces: list) -> set[str]:  # type: ignore[type-arg]
    return {v.state for t in traces for v in t.visits()}


def test_quinn_bbr_long_flow(tmp_path: Path) -> None:
    meta, traces = _long_flow("quinn", "bbr", tmp_path)
    assert (meta["implementation"], meta["cc"], meta["labels"]["duration_s"]) == ("quinn", "bbr", "6")
    client = meta["result"]["client"]
    assert client["duration_ms"] >= DURATION * 1000  # streamed for the whole duration, then stopped
    assert 20 < client["goodput_mbps"] < 51, client  # a real transfer at the bottleneck's rate, not a stub
    states = _states(traces)
    assert {"Startup", "ProbeBw.Up", "ProbeBw.Down", "ProbeBw.Cruise", "ProbeRtt"} <= states, states
    assert all(t.cc == "bbr" for t in traces)


def test_quiche_bbr2_long_flow(tmp_path: Path) -> None:
    meta, traces = _long_flow("quiche", "bbr2", tmp_path)
    assert (meta["implementation"], meta["cc"]) == ("cloudflare-quiche", "bbr2")
    assert meta["result"]["client"]["duration_ms"] >= DURATION * 1000
    states = _states(traces)
    assert "Startup" in states and any(s.startswith("ProbeBw.") for s in states), states
