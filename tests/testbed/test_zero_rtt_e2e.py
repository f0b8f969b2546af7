"""0-RTT end to end on both QUIC servers that accept it: the Go client's second connection resumes the
session of its first and sends its requests as 0-RTT data, so the HTML arrives a round trip sooner than
over a fresh connection; the warm-up connection is in server.log and left out of the run's connections.
Needs root and Go; the quiche case needs cargo."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from quicsm.grids.timeline import run_traces
from quicsm.testbed.runner import RunConfig, read_meta, run_many
from quicsm.testbed.stack import stack_for
from quicsm.traces import parse_inputs

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces, tc and cgroups"),
    pytest.mark.skipif(shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists(), reason="needs Go"),
]


def _cargo() -> bool:
    return shutil.which("cargo") is not None or (Path.home() / ".cargo/bin/cargo").exists()


@pytest.mark.parametrize(
    "stack",
    [
        "quic-go",
        pytest.param(
            "quiche",
            marks=pytest.mark.skipif(not _cargo(), reason="needs cargo (Rust >= 1.88, .ci/install.d/quiche.sh)"),
        ),
    ],
)
def test_zero_rtt_saves_a_round_trip(stack: str, tmp_path: Path) -> None:
    rtt = 60.0
    base = RunConfig(stack=stack, cc="cubic", size=5000, rate_mbps=20, rtt_ms=rtt, late_limit_ms=20)
    html: dict[bool, list[float]] = {False: [], True: []}
    for zero in (False, True):
        cfg = replace(base, zero_rtt=zero, name=f"z{int(zero)}")
        for res in run_many(cfg, stack_for(cfg), tmp_path, runs=2, retries=3):
            assert res.ok, res.error
            meta = json.loads((res.run_dir / "meta.json").read_text())
            client = meta["result"]["client"]
            html[zero].append(client["page_ms"])
            logged = parse_inputs([str(res.run_dir / "server.log")], require_transitions=False).traces
            if zero:
                assert client["zero_rtt"] is True and client["resumed"] is True and client["warmup"] == 1
                assert len(logged) == 2 and len(run_traces(res.run_dir, read_meta(res.run_dir))) == 1
            else:
                assert "zero_rtt" not in client and len(logged) == 1
    assert max(html[True]) + rtt / 2 < min(html[False]), html  # one round trip (60 ms) sooner, give or take
