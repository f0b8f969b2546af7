"""End to end on ngtcp2 (Debian's ngtcp2-server, uninstrumented: a stack that logs no congestion state):
a Cubic page load under 2 % loss through the emulator, its qlog read with states inferred from the
metrics, a model drawn (the diagram says the states were inferred). Asserts what Cubic under loss must show (slow start, recoveries, avoidance after
them) and that every output says the states were inferred. Needs root and the package
(.ci/install.d/ngtcp2.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quicsm.testbed.ngtcp2_server import GTLSSERVER
from quicsm.testbed.runner import RunConfig, run_many
from quicsm.traces import parse_inputs
from quicsm.traces.metric_states import INFERRED_LABEL

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces, tc and cgroups"),
    pytest.mark.skipif(not Path(GTLSSERVER).is_file(), reason="needs ngtcp2-server (.ci/install.d/ngtcp2.sh)"),
]


def test_cubic_under_loss_inferred_and_drawn(tmp_path: Path) -> None:
    from quicsm.testbed.stack import stack_for

    cfg = RunConfig(stack="ngtcp2", cc="cubic", loss=0.02, size=2_000_000, name="cubic-loss2", timeout_s=60)
    (res,) = run_many(cfg, stack_for(cfg), tmp_path, retries=3)
    assert res.ok, res.error
    meta = json.loads((res.run_dir / "meta.json").read_text())
    assert (meta["implementation"], meta["cc"]) == ("ngtcp2", "cubic") and meta["result"]["client"]["proto"] == "h3"
    assert meta["result"]["client"]["bytes"] >= 2_000_000
    assert (res.run_dir / "server.log").read_text() == ""  # ngtcp2 prints no contract lines
    (qlog,) = (res.run_dir / "qlog").glob("*.sqlog")
    (trace,) = parse_inputs([str(qlog)]).traces
    assert trace.labels["states"] == INFERRED_LABEL["states"] and trace.implementation == "ngtcp2"
    # the run's meta.json, one level above its qlog/ folder, names the controller the qlog does not
    assert (trace.cc, trace.version, trace.labels["scenario"]) == ("cubic", meta["version"], "cubic-loss2")
    states = trace.states()
    assert states[0] == "SlowStart" and {"Recovery", "CongestionAvoidance"} <= set(states), states
    after = states[states.index("Recovery") + 1 :]
    assert "CongestionAvoidance" in after  # Cubic leaves a recovery for avoidance, not slow start
    svg = tmp_path / "ngtcp2.svg"
    done = subprocess.run(
        [sys.executable, "-m", "quicsm", "diagram", str(qlog), "-o", str(svg)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    text = svg.read_text()
    assert "Recovery" in text and "inferred from metrics" in text
    # stopped with SIGINT passed on by the wrapper (the testbed signals the server's process group):
    # gtlsserver flushed its qlog, whose last record is whole
    last = qlog.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1].lstrip(b"\x1e")
    assert json.loads(last)["name"]
