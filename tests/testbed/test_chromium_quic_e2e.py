"""End to end on Chromium's own QUIC: build proto-quic 62.0.3187.0's quic_server (patched with the shipped Cubic
set, then the BBR set) and quic_client from ../shared/chromium (the first build compiles about 2,100 steps; the
second set's tree compiles only its patched files, the rest come from ccache), load a page through the emulator
with loss, and check the contract lines the real server printed: time forward, every ``from`` the previous
``to``, ``ev=close`` last; the states Cubic and BBR must pass through; parse, infer and draw. Needs root,
clang/lld, ninja, NSS headers and Python 2.7: .ci/install.d/chromium-quic.sh."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from annotate_oracle import infer
from conftest import shared_file
from contract_checks import check_contract_file

from quicsm.testbed import netns
from quicsm.testbed.runner import RunConfig, read_meta, run_many
from quicsm.traces import parse_inputs

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces, tc and cgroups"),
    pytest.mark.skipif(shutil.which("clang") is None, reason="needs clang (.ci/install.d/chromium-quic.sh)"),
]

VERSION = "62.0.3187.0"
# 1 % loss both ways on a 20 Mbit/s, 40 ms path: Recovery within a 3 MB load, and often a TLP.
CUBIC = RunConfig(stack="chromium", cc="cubic", rate_mbps=20, rtt_ms=40, loss=0.01, size=3_000_000, timeout_s=90)


@pytest.fixture(scope="module")
def cubic_bins():  # type: ignore[no-untyped-def]
    from quicsm.testbed.stack import stack_for

    shared_file(f"chromium/proto-quic-{VERSION}-src.tar.xz")
    return stack_for(CUBIC, progress=print)  # unpack, patch, build; cached after the first time


@pytest.fixture(scope="module")
def cubic_run(cubic_bins, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("chromium")
    (res,) = run_many(replace(CUBIC, name="cubic"), cubic_bins, out, retries=4)
    assert res.ok, res.error
    return res.run_dir


def test_build_records_how(cubic_bins) -> None:  # type: ignore[no-untyped-def]
    meta = cubic_bins.meta
    assert cubic_bins.patch_set == f"chromium-{VERSION}-cubic" and meta["version"] == VERSION
    assert meta["patch_set_choice"]["how"] == "shipped" and meta["targets"] == ["quic_server", "quic_client"]
    assert "is_debug = false" in meta["gn_args"] and "symbol_level = 0" in meta["gn_args"]
    assert meta["steps"] > 100 or meta.get("ccache") is not None
    assert set(meta["tool_patches"]) >= {"02-quic-server-testbed.diff", "03-quic-client-testbed.diff"}
    assert os.access(cubic_bins.server, os.X_OK) and os.access(cubic_bins.client, os.X_OK)


def test_cubic_run_meta_and_page_load(cubic_run: Path) -> None:
    meta = json.loads((cubic_run / "meta.json").read_text())
    assert (meta["implementation"], meta["version"], meta["cc"]) == ("chromium", VERSION, "cubic")
    assert meta["versions"]["patch_set"] == f"chromium-{VERSION}-cubic"
    assert meta["versions"]["server_chromium"] == VERSION and meta["versions"]["server_cc"] == "cubic"
    assert meta["build"]["version"] == VERSION and meta["build"]["spki"]
    client = meta["result"]["client"]
    # the toy client's own measurement: the page (its HTML) and the object, over gQUIC
    assert client["proto"] == "gquic" and client["quic_version"] == "QUIC_VERSION_39"
    assert client["responses"] == 2 and client["bytes"] >= 3_000_000
    assert 0 < client["handshake_ms"] < client["plt_ms"] == meta["result"]["plt_ms"]
    # 3 MB at 20 Mbit/s: at least 1.2 s
    assert 1200 < meta["result"]["plt_ms"] < 90_000
    assert meta["labels"]["client"] == "quic_client" and read_meta(cubic_run).labels["stack"] == "chromium"
    assert meta["emulator"]["relay"]["down"]["dropped"] > 0  # the loss was applied
    assert not set(meta["emulator"]["namespaces"]) & set(netns.list_namespaces())  # torn down


def test_cubic_contract_lines_are_consistent(cubic_run: Path) -> None:
    conns = check_contract_file(cubic_run / "server.log")
    (conn,) = conns.values()  # one page load, one connection
    assert conn.cc == "cubic" and conn.states[0] == "SlowStart"
    assert "Recovery" in conn.states and "CongestionAvoidance" in conn.states, conn.states
    # ev=close ends the page load: the controller is destroyed when the client's close arrives
    plt_us = json.loads((cubic_run / "meta.json").read_text())["result"]["plt_ms"] * 1000
    assert conn.closed_at is not None
    assert 0.8 * plt_us < conn.closed_at - conn.times[0] < plt_us + 1_000_000


def test_cubic_parse_and_infer(cubic_run: Path) -> None:
    (trace,) = parse_inputs([str(cubic_run / "server.log")]).traces
    assert (trace.implementation, trace.version, trace.cc) == ("chromium", VERSION, "cubic")
    states = trace.states()
    assert states[0] == "SlowStart" and trace.events[0].prev == "Init" and "Recovery" in states
    nodes = {n.state for n in infer([trace], "synoptic").model.nodes}
    assert {"SlowStart", "Recovery", "CongestionAvoidance"} <= nodes


def test_cubic_outage_goes_tlp_then_rto(cubic_bins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A 1.5 s blackout 0.6 s into the load (no random loss): the tail is lost, the timer fires with nothing
    acked, first as tail loss probes (one TailLossProbe line: the set prints changes), then as a retransmission
    timeout (Fig. 3a's TLP -> RTO path), which the first acks after the blackout end."""
    cfg = replace(CUBIC, loss=0.0, outage="0.6s:1.5s", name="outage")
    (res,) = run_many(cfg, cubic_bins, tmp_path, retries=4)
    assert res.ok, res.error
    meta = json.loads((res.run_dir / "meta.json").read_text())
    relay = meta["emulator"]["relay"]
    assert meta["labels"]["outage"] == "0.6s:1.5s" and meta["params"]["outage"] == "0.6s:1.5s"
    assert relay["down"]["outage_dropped"] > 0 and relay["up"]["outage_dropped"] > 0, relay
    assert relay["down"]["dropped"] == relay["up"]["dropped"] == 0
    assert meta["result"]["plt_ms"] > 1500 + 1200  # the blackout plus the 3 MB
    (conn,) = check_contract_file(res.run_dir / "server.log").values()
    walk = conn.states
    assert "RetransmissionTimeout" in walk, walk
    rto = walk.index("RetransmissionTimeout")
    assert walk[rto - 1] == "TailLossProbe" and len(walk) > rto + 1, walk  # the probes first; and it ended


def test_bbr_from_the_second_set(cubic_bins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The BBR set's tree shares the source and the compile cache: only its patched file is compiled anew.
    The server runs BbrSender (--quicsm_cc=bbr) and prints its modes."""
    from quicsm.testbed.stack import stack_for

    cfg = replace(CUBIC, cc="bbr", loss=0.0, rate_mbps=50, rtt_ms=36, size=5_000_000, name="bbr")
    bbr = stack_for(cfg, progress=print)
    assert bbr.patch_set == f"chromium-{VERSION}-bbr" and bbr.server != cubic_bins.server
    if not bbr.cached and bbr.meta.get("ccache"):
        assert bbr.meta["ccache"]["miss"] < 50, bbr.meta["ccache"]  # the rest were ccache hits
    (res,) = run_many(cfg, bbr, tmp_path, retries=4)
    assert res.ok, res.error
    assert json.loads((res.run_dir / "meta.json").read_text())["versions"]["server_cc"] == "bbr"
    (conn,) = check_contract_file(res.run_dir / "server.log").values()
    assert conn.cc == "bbr" and conn.states[0] == "Startup"
    assert "Drain" in conn.states and any(s.startswith("ProbeBw.") for s in conn.states), conn.states
