"""The kernel's TCP through the IP-layer emulator, traced with bpftrace: real transfers, real loss.
Needs root, Go and bpftrace (scripts/install.sh, .ci/install.d/tcp.sh)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from quicsm.testbed import ktrace, netns
from quicsm.testbed.emulator import Emulator
from quicsm.testbed.relay import RelayConfig, build_relay
from quicsm.testbed.tcp import TcpTuning, apply_tuning, build_tcp, client_argv, server_argv
from quicsm.traces import parse_inputs

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces, tc and eBPF"),
    pytest.mark.skipif(shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists(), reason="needs Go"),
    pytest.mark.skipif(shutil.which("bpftrace") is None, reason="needs bpftrace (.ci/install.d/tcp.sh)"),
]


def _transfer(tmp_path: Path, *, loss: float, size: int, cc: str = "cubic") -> tuple[dict, Path, dict]:
    tb, relay = build_tcp(), build_relay()
    tbf = netns.TbfConfig(10_000_000, netns.parse_queue("1bdp", rate_bps=10_000_000, rtt_ms=36))
    log = tmp_path / "server.log"
    with Emulator(
        tag=uuid.uuid4().hex[:6],
        tbf=tbf,
        relay_cfg=RelayConfig(18, 0, loss, seed=7),
        bins=relay,
        work_dir=tmp_path,
        mode="ip",
    ) as emu:
        apply_tuning(emu.topo, TcpTuning())
        with ktrace.KernelTracer(emu.topo.ns("srv"), log):
            argv = server_argv(
                tb, addr=emu.server_addr, objects=1, size=size, cc=cc, tuning=TcpTuning(), log=tmp_path / "h2.log"
            )
            srv = emu.procs.start("server", argv, ns=emu.topo.ns("srv"))
            ready = emu.procs.wait_ready(srv)
            url = f"https://{emu.client_target}/"
            cl = emu.procs.start(
                "client", client_argv(tb, url=url, spki=ready["spki"], timeout_s=90), ns=emu.topo.ns("cli")
            )
            result = emu.procs.read_json(cl, 100)
            emu.procs.stop(srv)
            time.sleep(0.2)
        stats = emu.stop_relay()
    return result, log, stats


def test_tcp_through_loss_shows_recovery_and_loss(tmp_path: Path) -> None:
    for attempt in range(3):  # an RTO (Loss) under 10 % loss is likely in one transfer, not certain
        (tmp_path / str(attempt)).mkdir()
        result, log, stats = _transfer(tmp_path / str(attempt), loss=0.10, size=600_000)
        assert result["ok"] and result["proto"] == "HTTP/2.0" and result["tls"] == "TLS 1.3", result
        assert stats["down"]["dropped"] > 10  # the relay really dropped the server's segments
        (trace,) = parse_inputs([str(log)], require_transitions=True).traces
        states = {e.state for e in trace.events if e.kind == "transition"}
        assert {"SlowStart", "Recovery"} <= states, states
        if "Loss" in states:
            break
    assert "Loss" in states, states
    assert trace.cc == "cubic" and trace.events[-1].kind == "close"
    # the tracer saw the connection the relay carried: the flow's port matches the trace's key
    (flow,) = [f for f in stats["flows"] if f["proto"] == "tcp" and f["src"].endswith(":4433")]
    assert trace.key.endswith(flow["dst"])


def test_bbr_modes_are_read_from_the_socket(tmp_path: Path) -> None:
    result, log, _ = _transfer(tmp_path, loss=0.0, size=3_000_000, cc="bbr")
    assert result["ok"], result
    (trace,) = parse_inputs([str(log)], require_transitions=True).traces
    states = [e.state for e in trace.events if e.kind == "transition"]
    assert states[0] == "Startup" and "Drain" in states and any(s.startswith("ProbeBw.") for s in states), states


def test_killed_run_leaves_no_tracing(tmp_path: Path) -> None:
    """SIGKILL of the run: bpftrace dies with it (parent-death signal), and the next run's
    cleanup removes the registry entry; no probe stays attached."""
    ns = f"{netns.PREFIX}kt{uuid.uuid4().hex[:4]}-srv"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        code = (
            "import sys, time; from pathlib import Path; from quicsm.testbed.ktrace import KernelTracer\n"
            f"t = KernelTracer({ns!r}, Path({str(tmp_path / 'k.log')!r})); t.start()\n"
            "print(t.proc.pid, flush=True); time.sleep(600)\n"
        )
        owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert owner.stdout is not None
        bt_pid = int(owner.stdout.readline())
        assert (ktrace.REGISTRY / f"{bt_pid}.json").exists()
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        for _ in range(100):
            if not Path(f"/proc/{bt_pid}").exists() or b"bpftrace" not in Path(f"/proc/{bt_pid}/cmdline").read_bytes():
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"bpftrace {bt_pid} outlived its killed run")
        ktrace.cleanup_stale()
        assert not (ktrace.REGISTRY / f"{bt_pid}.json").exists()
    finally:
        subprocess.run(["ip", "netns", "delete", ns], check=False)


def test_testbed_run_stack_tcp_end_to_end(tmp_path: Path) -> None:
    """CI's short TCP scenario: `quicsm testbed run --stack tcp` through the IP relay's loss, then
    parse and infer on the tracer's server.log like any stack's."""
    env = {**os.environ, "QUICSM_EMULATOR": "ip"}
    out = tmp_path / "runs"
    run = [sys.executable, "-m", "quicsm", "testbed", "run", "--stack", "tcp", "--cc", "reno", "--rate", "10"]
    run += ["--delay", "36", "--loss", "5%", "--size", "500KB", "--retries", "2", "--out", str(out), "--name", "tcp"]
    run += ["--late-limit", "50ms"]  # it checks the stack and the tracer, not the emulator's timing
    proc = subprocess.run(run, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = sorted(out.glob("tcp-*"))
    import json

    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["implementation"] == "linux-tcp" and meta["cc"] == "reno" and meta["result"]["ok"]
    assert meta["result"]["client"]["proto"] == "HTTP/2.0"
    (trace,) = parse_inputs([str(run_dir / "server.log")]).traces
    assert trace.cc == "reno" and trace.implementation == "linux-tcp"
    assert "Recovery" in {e.state for e in trace.events if e.kind == "transition"}
    model = tmp_path / "m.json"
    proc = subprocess.run(
        [sys.executable, "-m", "quicsm", "infer", str(run_dir / "server.log"), "-o", str(model)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and "Recovery" in model.read_text(), proc.stderr
    # without the IP relay the stack refuses in one line
    env["QUICSM_EMULATOR"] = "udp"
    proc = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "needs the IP-layer relay" in proc.stderr
