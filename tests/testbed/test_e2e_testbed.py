"""End to end: patch quic-go and build it (quicsm.testbed.build), run three short page loads through
the emulator (plain, lossy, CPU-starved client), parse the server logs, infer a model, render it.
Asserts what the congestion controller did, not only that files exist. Needs root and Go."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from annotate_oracle import annotate, infer
from contract_checks import browser_page_trace

from quicsm.compare.occupancy import state_entries, state_share
from quicsm.testbed import netns
from quicsm.testbed.runner import RunConfig, run_many
from quicsm.traces import StateView, parse_inputs
from quicsm.traces.runmeta import RunMeta, dump_meta, read_meta

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces, tc and cgroups"),
    pytest.mark.skipif(shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists(), reason="needs Go"),
    pytest.mark.skipif(importlib.util.find_spec("quicsm.testbed.build") is None, reason="needs quicsm.testbed.build"),
]

VERSION = "v0.65.0"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from quicsm.testbed.stack import get_stack

    out = tmp_path_factory.mktemp("e2e")
    bins = get_stack(VERSION, "reno")  # patch + build (cached after the first time)
    base = RunConfig(rate_mbps=20, rtt_ms=20, queue="1bdp", size=3_000_000, quic_go_version=VERSION, timeout_s=60)
    for cfg in (
        replace(base, name="plain"),
        replace(base, name="lossy", loss=0.02),
        replace(base, name="mobile", cpu_quota=0.05, rate_mbps=50),
    ):
        results = run_many(cfg, bins, out, runs=1, retries=2)
        assert all(r.ok for r in results), [r.error for r in results]
    return out


TOP = {"implementation", "version", "cc", "labels", "params", "result", "emulator", "timestamps", "versions", "build"}
EMULATOR = {"ok", "late_p99_us", "late_limit_us", "namespaces", "relay", "tbf", "rate_log"}


def test_runs_leave_log_and_complete_meta(runs: Path) -> None:
    dirs = sorted(p for p in runs.iterdir() if p.name != "_rejected")
    assert [d.name for d in dirs] == ["lossy-00", "mobile-00", "plain-00"]
    for d in dirs:
        meta = json.loads((d / "meta.json").read_text())
        assert meta["implementation"] == "quic-go" and meta["version"] == VERSION and meta["cc"] == "reno"
        assert meta["result"]["client"]["bytes"] >= 3_000_000
        assert meta["params"]["queue_bytes"] > 0 and meta["timestamps"]["seconds"] > 0
        relay = meta["emulator"]["relay"]
        assert relay["down"]["sent"] > 2000 and relay["up"]["sent"] > 100
        assert not set(meta["emulator"]["namespaces"]) & set(netns.list_namespaces())  # torn down
        # written through the declaration: it decodes as RunMeta, and writing that back gives the file's
        # bytes (no field the runner writes is undeclared), with the blocks the runner always wrote
        assert dump_meta(read_meta(str(d / "meta.json"), RunMeta)) == (d / "meta.json").read_text()
        assert set(meta) == {*TOP, "run_index"} and set(meta["emulator"]) == EMULATOR
        assert set(meta["result"]) == {"ok", "plt_ms", "client", "error", "client_cpu_s"}
    assert read_meta(str(runs / "mobile-00" / "meta.json")).labels["profile"] == "mobile"
    assert json.loads((runs / "lossy-00" / "meta.json").read_text())["emulator"]["relay"]["down"]["dropped"] > 0


def test_states_parse_infer_render(runs: Path, tmp_path: Path) -> None:
    logs = sorted(str(p) for p in runs.glob("*/server.log"))
    traces = parse_inputs(logs).traces
    by_run = {t.labels["run"]: t for t in sorted(traces, key=lambda t: t.duration_us)}
    assert set(by_run) == {"plain-00", "lossy-00", "mobile-00"}
    plain, lossy, mobile = by_run["plain-00"], by_run["lossy-00"], by_run["mobile-00"]
    assert plain.states()[0] == "SlowStart" and plain.events[0].prev == "Init"
    assert "CongestionAvoidance" in plain.states()
    assert state_entries(lossy, "Recovery") >= 2  # 2 % random loss: several recovery episodes
    # A client held to 5 % of a core cannot keep up with 50 Mbit/s: the server waits on it.
    assert state_share(mobile, "ApplicationLimited") > state_share(plain, "ApplicationLimited")
    assert state_share(mobile, "ApplicationLimited") > 0.2

    res = infer(traces, "dfg")
    states = {n.state for n in res.model.nodes}
    assert {"SlowStart", "CongestionAvoidance", "Recovery", "ApplicationLimited"} <= states
    am = annotate(res, traces, StateView())
    doc = am.to_json()
    assert doc  # serialisable
    if importlib.util.find_spec("quicsm.diagrams") is not None and shutil.which("dot"):
        from quicsm.diagrams import write_diagram

        svg = tmp_path / "e2e.svg"
        write_diagram(am, str(svg))
        text = svg.read_text()
        assert "<svg" in text and "ApplicationLimited" in text and "Recovery" in text


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_chromium_loads_the_page_over_http3(tmp_path: Path) -> None:
    from quicsm.testbed.stack import get_stack

    cfg = RunConfig(
        rate_mbps=20,
        rtt_ms=20,
        objects=4,
        size=200_000,
        client="chromium",
        quic_go_version=VERSION,
        name="chromium",
        timeout_s=60,
    )
    (res,) = run_many(cfg, get_stack(VERSION, "reno"), tmp_path, runs=1, retries=1)
    assert res.ok, res.error
    meta = json.loads((res.run_dir / "meta.json").read_text())
    client = meta["result"]["client"]
    assert client["protocols"] == {"h3": 5}  # the page and its 4 objects, all over HTTP/3
    assert client["bytes"] >= 4 * 200_000 and client["objects"] == 4
    assert 0 < client["plt_ms"] < 60_000
    # every connection the browser opened logged its states (it may race a second one); the page's went on
    assert len(browser_page_trace(res.run_dir, "SlowStart").events) > 1


def test_ctrl_c_mid_run_cleans_up(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from quicsm.testbed import cpu

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "quicsm",
            "testbed",
            "run",
            "--rate",
            "5",
            "--delay",
            "20",
            "--size",
            "50MB",
            "--cpu-quota",
            "50%",
            "--quic-go-version",
            VERSION,
            "--out",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C in a terminal: a test run started in the background (nohup, `cmd &` in a script) hands its
        # children an ignored SIGINT, which the run rightly keeps ignoring
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # wait until the transfer is under way
            logs = list(tmp_path.glob("run-00/server.log"))
            if logs and "SlowStart" in logs[0].read_text():
                break
            time.sleep(0.2)
        else:
            pytest.fail("the run never started")
        # Our run's namespaces and cgroup, found from its server process (other testbeds may be running).
        server_pid = subprocess.run(
            ["pgrep", "-f", f"quicsm-server.*{tmp_path}"], capture_output=True, text=True
        ).stdout.split()[0]
        srv_ns = subprocess.run(["ip", "netns", "identify", server_pid], capture_output=True, text=True).stdout.strip()
        assert srv_ns.startswith(netns.PREFIX) and srv_ns.endswith("-srv")
        tag = srv_ns[len(netns.PREFIX) : -len("-srv")]
        ours = set(netns.Topology(tag=tag).namespaces)
        group = (cpu.V1_ROOT if cpu.cgroup_kind() == "v1" else cpu.V2_ROOT) / f"{netns.PREFIX}{tag}-client"
        assert ours <= set(netns.list_namespaces()) and group.is_dir()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # SIGTERM still cleans up; a bare SIGKILL would leave the path running
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not (set(netns.list_namespaces()) & ours)
    assert not group.exists()
    for name in ("quicsm-server", "quicsm-relay"):
        out = subprocess.run(["pgrep", "-f", f"{name}.*{tmp_path}"], capture_output=True, text=True).stdout
        assert not out.strip(), f"{name} still running"
