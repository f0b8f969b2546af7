"""End to end: HTTP/1.1 over TLS on the kernel's TCP (the Go client and headless Chromium, each over
several connections the tracer follows), and a quic-go server rebuilt with a small maximum congestion
window (IMC'17 Fig. 15's MACW) that its sender reaches and is held at. Needs root, Go, bpftrace and
chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from quicsm.testbed.runner import RunConfig, run_many
from quicsm.testbed.stack import stack_for
from quicsm.traces import parse_inputs

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces, tc and cgroups"),
    pytest.mark.skipif(shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists(), reason="needs Go"),
]


def _one(cfg: RunConfig, out: Path) -> tuple[dict, list]:  # type: ignore[type-arg]
    import json

    (res,) = run_many(cfg, stack_for(cfg), out, runs=1, retries=3)
    assert res.ok, res.error
    meta = json.loads((res.run_dir / "meta.json").read_text())
    traces = parse_inputs([str(res.run_dir / "server.log")], require_transitions=False).traces
    return meta, traces


def test_http1_go_client_opens_several_traced_connections(tmp_path: Path) -> None:
    cfg = RunConfig(
        stack="tcp", cc="cubic", http="h1", objects=12, size=200_000, rate_mbps=20, rtt_ms=20, late_limit_ms=20
    )
    meta, traces = _one(cfg, tmp_path)
    client = meta["result"]["client"]
    assert client["proto"] == "HTTP/1.1" and client["objects"] == 12 and 2 <= client["conns"] <= 6
    assert len([t for t in traces if len(t.events) > 1]) >= 2  # the tracer follows every connection
    assert meta["labels"]["http"] == "h1" and meta["emulator"]["tbf"]["down"]["packets"] > 1000


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs chromium")
def test_http1_in_chromium(tmp_path: Path) -> None:
    cfg = RunConfig(
        stack="tcp", cc="cubic", http="h1", client="chromium", page="6x2.6KB+2x86.5KB", rtt_ms=20, late_limit_ms=20
    )
    meta, traces = _one(cfg, tmp_path)
    client = meta["result"]["client"]
    # every response over HTTP/1.1: the page and its eight objects of two sizes (and whatever else the browser
    # asks for on its own, e.g. /favicon.ico, which CI's Chromium did once)
    assert set(client["protocols"]) == {"http/1.1"} and client["protocols"]["http/1.1"] >= 9
    assert client["bytes"] >= 6 * 2600 + 2 * 86500
    assert len(traces) >= 2


def test_mixed_page_over_quic(tmp_path: Path) -> None:
    cfg = RunConfig(cc="cubic", page="5x1KB+2x300KB", rtt_ms=20, late_limit_ms=20)
    meta, _ = _one(cfg, tmp_path)
    client = meta["result"]["client"]
    assert client["objects"] == 7 and client["bytes"] >= 5 * 1000 + 2 * 300_000


def test_max_cwnd_holds_the_sender(tmp_path: Path) -> None:
    # 40 packets (above quic-go's initial window of 32) per 40 ms RTT: at most 12 Mbit/s on a 50 Mbit/s link
    cfg = RunConfig(cc="cubic", max_cwnd=40, size=3_000_000, rate_mbps=50, rtt_ms=40, late_limit_ms=20)
    meta, traces = _one(cfg, tmp_path)
    assert meta["build"]["max_cwnd"] == 40
    t = max(traces, key=lambda t: t.duration_us)
    assert "CongestionAvoidanceMaxed" in t.states()
    assert max(e.cwnd or 0 for e in t.events) <= 40 * 1500
    assert meta["result"]["plt_ms"] > 3_000_000 * 8 / 12e6 * 1000
