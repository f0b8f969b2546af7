"""A quic-go version no set is shipped for, end to end with one command (issue 23): `quicsm testbed run
--quic-go-version v0.48.2` fetches the module from the Go module proxy, ports the best shipped set to it
(v0.48.2 lies between the shipped v0.43.1 and v0.52.0), builds server and client, and runs a page load
through the emulator. Asserts the run's metadata names the set made for v0.48.2 and how, and that the
server log holds contract lines through slow start and recovery. Needs root and Go; about a minute cold."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quicsm.instrumentation.patchset import load_patch_set
from quicsm.testbed import netns
from quicsm.testbed.build import download_module
from quicsm.traces import parse_inputs

GO = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces, tc and cgroups"),
    pytest.mark.skipif(GO is None, reason="Go toolchain not installed"),
]

VERSION = "v0.48.2"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("unshipped")
    argv = [sys.executable, "-m", "quicsm", "testbed", "run", "--quic-go-version", VERSION, "--cc", "reno"]
    argv += ["--rate", "50", "--delay", "36", "--loss", "1%", "--size", "2MB", "--runs", "1", "--retries", "2"]
    argv += ["--late-limit", "50ms"]  # it checks the port and the build, not the emulator's timing
    proc = subprocess.run([*argv, "--out", str(out)], capture_output=True, text=True, timeout=1500, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = [p for p in out.glob("run-*") if (p / "meta.json").is_file()]
    return run_dir, proc.stderr


def test_the_run_names_the_set_made_for_its_version(run: tuple[Path, str]) -> None:
    run_dir, stderr = run
    meta = json.loads((run_dir / "meta.json").read_text())
    assert (meta["implementation"], meta["version"], meta["cc"]) == ("quic-go", VERSION, "reno")
    assert meta["versions"]["patch_set"] == f"quic-go-{VERSION}-reno-port"
    assert meta["versions"]["server_quic_go"] == VERSION  # the server reports the module it was built with
    choice = meta["build"]["patch_set_choice"]
    assert choice["how"] == "ported" and f"no set shipped for quic-go {VERSION}" in choice["why"]
    assert f"patch set: quic-go-{VERSION}-reno-port" in stderr  # said to the user, with the reason
    assert meta["build"]["module_sum"] == download_module(VERSION).sum
    assert meta["build"]["modules"]["github.com/quic-go/quic-go"].startswith(VERSION)
    ps = load_patch_set(choice["origin"])
    assert ps.extra["module"]["version"] == VERSION and ps.extra["ported_from"]["name"].startswith("quic-go-v0.")
    assert not set(meta["emulator"]["namespaces"]) & set(netns.list_namespaces())  # torn down


def test_the_server_log_holds_contract_lines(run: tuple[Path, str]) -> None:
    run_dir, _ = run
    parsed = parse_inputs([str(run_dir / "server.log")], strict=True)
    assert parsed.report.total_issues == 0
    main = max(parsed.traces, key=lambda t: len(t.events))
    assert main.version == VERSION and main.cc == "reno"
    states = main.states()
    assert states[0] == "SlowStart" and main.events[0].prev == "Init", states
    assert "Recovery" in states, states  # 1 % loss on a 2 MB transfer
