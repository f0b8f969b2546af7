"""End to end, each BBR stack on a short long flow: quinn-proto 0.11.19's BBR (v1) and Cloudflare quiche
0.30.0's BBR2 built from their pinned locks (cargo build --locked), and the kernel's TCP BBR behind the Go
HTTP/2 server (standard library only, pinned by its go.mod), each streaming for --duration through the
emulator, then parsed. Asserts what six seconds of BBR must show on a 50 Mbit/s, 36 ms path: Startup, Drain,
then the ProbeBw gain cycle (quinn and the kernel probe every ~8 round trips, so Up, Down and Cruise all
appear; quiche cruises 2 s after Drain, then Refill, Up and Down), and a client that streamed for the whole
duration. Needs root and cargo; the quiche build also needs libclang (.ci/install.d/quiche.sh), the kernel's
TCP bpftrace and the IP-layer relay (.ci/install.d/tcp.sh).

Cost in CI (experiments/bbr2_cycle.md, "What CI pays"): warm, 35 s of test time (8 s quiche, 10 s quinn,
17 s kernel TCP); cold, the quiche 0.30.0 bbr2 and TCP builds are the cache entries test_quiche_e2e and
test_tcp_stack build anyway, and this file adds the quinn server's cold cargo build, 218 CPU-seconds
(about 2-4 min on two cores, estimated from the CPU time)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from quicsm.testbed import sources
from quicsm.testbed.quiche_build import committed_lock
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
    if stack == "quinn":  # pinned: built from the committed lock with cargo build --locked
        assert bins.meta.get("locked") is True, bins.meta
    if stack == "quiche":  # pinned wherever the repository has a lock for this quiche version
        server_src = sources.testbed_root("quiche-server/Cargo.toml") / "quiche-server"
        assert bins.meta.get("locked") is (committed_lock(server_src, cfg.version) is not None), bins.meta
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
    # quinn counts a flow-control-blocked sender as application-limited, and its BBR leaves Startup only on
    # rounds that are not: with quic-go's default windows growing from 768 KiB, 10 runs here showed 13-30
    # such visits and Startup lasting up to 5.8 s (one CI run: the whole 6 s). The long-flow client opens its
    # windows at 6/15 MiB; one visit is left, the first ACK before any data was queued.
    limited = sum(v.state == "ApplicationLimited" for t in traces for v in t.visits())
    assert limited < 10, limited


def test_quiche_bbr2_long_flow(tmp_path: Path) -> None:
    meta, traces = _long_flow("quiche", "bbr2", tmp_path)
    assert (meta["implementation"], meta["cc"]) == ("cloudflare-quiche", "bbr2")
    assert meta["result"]["client"]["duration_ms"] >= DURATION * 1000
    states = _states(traces)
    # the whole probing cycle: Cruise lasts 2 s after Drain, so Refill and Up come at about 2.7 s
    want = {"Startup", "Drain", "ProbeBw.Down", "ProbeBw.Cruise", "ProbeBw.Refill", "ProbeBw.Up"}
    assert want <= states, states


@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="needs bpftrace (.ci/install.d/tcp.sh)")
def test_tcp_bbr_long_flow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUICSM_EMULATOR", "ip")  # a TCP client dials the server through the IP-layer relay
    meta, traces = _long_flow("tcp", "bbr", tmp_path)
    assert (meta["implementation"], meta["cc"]) == ("linux-tcp", "bbr")
    client = meta["result"]["client"]
    assert client["proto"] == "HTTP/2.0" and client["duration_ms"] >= DURATION * 1000  # -duration of the h2 client
    assert 20 < client["goodput_mbps"] < 51, client
    (trace,) = [t for t in traces if t.duration_us > 5e6]  # the one HTTP/2 connection carried the whole flow
    states = _states([trace])
    assert {"Startup", "Drain", "ProbeBw.Up", "ProbeBw.Down", "ProbeBw.Cruise"} <= states, states
