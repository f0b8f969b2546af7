"""End to end through the emulator: a 2 x 2 grid (rate x object size), 2 runs per cell, of quic-go resuming
with 0-RTT against the kernel's TCP with HTTP/2 over TLS, then its report. Asserts what the protocols did:
the QUIC page loads resumed with 0-RTT after a warm-up connection the report leaves out, QUIC's HTML
arrived at least one round trip before TCP's (no TCP and TLS handshakes), and every cell is drawn, linked
and explained by both arms' states. Needs root, Go and bpftrace (the TCP tracer)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.grids.metrics import METRICS
from quicsm.grids.results import load_grid_runs
from quicsm.grids.timeline import run_traces

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces, tc and cgroups"),
    pytest.mark.skipif(shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists(), reason="needs Go"),
]

GRID = """
name = "ci_2x2"
description = "quic-go with 0-RTT vs kernel TCP (HTTP/2 + TLS 1.3), 2 x 2, 2 runs per cell"
runs = 2
retries = 4

[base]
rtt = 36
cc = "cubic"
# a busy CI machine: the path's timing is checked, the figures are not the point here
late_limit = "20ms"

[axes]
rate = [10, 50]
size = ["5KB", "1MB"]

[arms.tcp]
stack = "tcp"

[arms.quic]
stack = "quic-go"
zero_rtt = true

[report]
baseline = "tcp"
timelines = [{rate = 50, size = "1MB"}]
"""


@pytest.fixture(scope="module")
def grid_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("grid")
    f = tmp / "ci_2x2.toml"
    f.write_text(GRID)
    out = tmp / "runs"
    res = CliRunner().invoke(cli, ["grid", "run", str(f), "--out", str(out), "--report", str(tmp / "report")])
    assert res.exit_code == 0, res.output
    return out


def test_every_run_made_and_quic_resumed_with_0rtt(grid_out: Path) -> None:
    runs = load_grid_runs(grid_out)
    assert runs.missing == 0 and len(runs.records) == 16
    assert sum(r.good for r in runs.records) >= 15, [
        (r.run_dir, r.meta.result and r.meta.result.error) for r in runs.records
    ]
    for r in runs.records:
        client = r.meta.result.client if r.meta.result else {}
        if r.arm == "quic" and r.good:
            assert client["zero_rtt"] is True and client["resumed"] is True and client["warmup"] == 1
            # the warm-up connection is in server.log but not among the run's measured connections
            assert len(run_traces(r.run_dir, r.meta)) == 1
        if r.arm == "tcp" and r.good:
            assert client["proto"] == "HTTP/2.0" and len(run_traces(r.run_dir, r.meta)) >= 1


def test_quic_gets_the_html_a_round_trip_sooner(grid_out: Path) -> None:
    runs = load_grid_runs(grid_out)
    m = METRICS["html_ms"]
    for cell in runs.grid.cells():
        tcp, quic = runs.values(cell.id, "tcp", m), runs.values(cell.id, "quic", m)
        assert tcp and quic
        assert sum(quic) / len(quic) + 30 < sum(tcp) / len(tcp), (cell.id, tcp, quic)  # RTT is 36 ms


def test_heatmap_report_and_cell_states(grid_out: Path) -> None:
    rep = grid_out.parent / "report"
    svg = (rep / "heatmap-quic.svg").read_text()
    assert svg.count('xlink:href="#cell-') == 4 and (rep / "heatmap-quic.png").stat().st_size > 2000
    doc = json.loads((rep / "grid-report.json").read_text())
    assert [c["cell"] for c in doc["cells"]] == [
        "rate=10,size=5KB",
        "rate=10,size=1MB",
        "rate=50,size=5KB",
        "rate=50,size=1MB",
    ]
    for c in doc["cells"]:
        assert c["n_a"] >= 1 and c["n_b"] >= 1 and c["mean_a"] > 0
        assert c["states"] and "no traced connection" not in c["states"]
    assert (rep / "timeline-rate-50_size-1MB.svg").read_text().count("<path") >= 2
    for cell in ("rate-10_size-5KB", "rate-50_size-1MB"):
        assert "SlowStart" in (rep / "cells" / cell / "compare.html").read_text()
