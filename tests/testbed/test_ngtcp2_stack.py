"""The ngtcp2 stack: Debian's gtlsserver behind the testbed server interface (quicsm.testbed.ngtcp2_server),
uninstrumented, its qlog always written. Units here; the emulator run is tests/testbed/test_ngtcp2_e2e.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quicsm.errors import TestbedError
from quicsm.testbed import stacks
from quicsm.testbed.ngtcp2_server import GTLSSERVER, installed_version
from quicsm.testbed.pages import page_html
from quicsm.testbed.runner import RunConfig
from quicsm.testbed.stacks import Built


def test_registered_as_a_stack_that_logs_no_state() -> None:
    st = stacks.get("ngtcp2")
    assert st.implementation == "ngtcp2" and st.ccs == ("reno", "cubic", "bbr", "bbr2") and st.clients == ("go",)
    with pytest.raises(TestbedError, match="client 'chromium' on ngtcp2"):
        RunConfig(stack="ngtcp2", cc="cubic", client="chromium")
    with pytest.raises(TestbedError, match="page loads only"):
        RunConfig(stack="ngtcp2", cc="cubic", duration_s=10.0)


def test_server_argv_always_writes_the_qlog() -> None:
    cfg = RunConfig(stack="ngtcp2", cc="cubic", objects=3, size=1000)
    bins = Built("ngtcp2", "0.12.1", "cubic", Path(GTLSSERVER), Path("/c"), None, True, 0.0)
    argv = cfg.server_stack.server_argv(cfg, bins, "198.18.1.1:4433", Path("/r/server.log"))
    assert argv[:3] == [sys.executable, "-m", "quicsm.testbed.ngtcp2_server"]
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert flags == {
        "-bin": GTLSSERVER,
        "-addr": "198.18.1.1:4433",
        "-objects": "3",
        "-size": "1000",
        "-log": "/r/server.log",
        "-cc": "cubic",
        "-qlog": "/r/qlog",
    }


def test_the_page_is_the_go_servers() -> None:
    html = page_html(3, 500)
    assert html.count("<script async src=") == 3 and '"/obj/2"' in html and "quicsm 3 x 500 B" in html


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path(GTLSSERVER).is_file(), reason="needs ngtcp2-server (.ci/install.d/ngtcp2.sh)")
def test_the_wrapper_serves_the_page_and_writes_a_whole_qlog(tmp_path: Path) -> None:
    """On loopback: the ready line comes once gtlsserver listens, its SPKI pins the certificate, the page
    and object arrive over HTTP/3 (a minimal HTTP/3 client: ngtcp2's own gtlsclient), and a stop (SIGTERM to the
    process group, as the testbed stops a server) leaves a qlog whose last record is whole."""
    assert installed_version()
    port = 20000 + os.getpid() % 20000
    srv = subprocess.Popen(
        [sys.executable, "-m", "quicsm.testbed.ngtcp2_server", "-addr", f"127.0.0.1:{port}", "-objects", "1"]
        + ["-size", "300000", "-log", str(tmp_path / "server.log"), "-qlog", str(tmp_path / "qlog"), "-cc", "reno"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # the testbed stops a server by signalling its process group
    )
    try:
        assert srv.stdout is not None
        ready = json.loads(srv.stdout.readline())
        assert ready["ready"] and ready["stack"] == "ngtcp2" and len(ready["spki"]) == 44
        (tmp_path / "dl").mkdir()
        # the client keeps the connection open after the download (no --exit-on-all-streams-close), so the
        # server is stopped with the connection open, as the testbed stops it right after the page load
        cli = subprocess.Popen(
            ["gtlsclient", "--quiet", "--download", str(tmp_path / "dl"), "127.0.0.1", str(port)]
            + [f"https://127.0.0.1:{port}/obj/0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            got = tmp_path / "dl" / "0"
            deadline = time.monotonic() + 60
            while not (got.exists() and got.stat().st_size == 300000) and time.monotonic() < deadline:
                time.sleep(0.05)
            body = got.read_bytes()
            assert len(body) == 300000 and body.startswith(b"/*") and body.endswith(b"*/")
            assert cli.poll() is None  # still connected
            # gtlsserver flushes its qlog on SIGINT, not on SIGTERM (measured: a SIGTERM mid-transfer left
            # the file cut at a 4 KiB boundary), so it runs in a session of its own that the testbed's
            # group SIGTERM does not reach; the wrapper passes the stop on as SIGINT
            (child,) = _children(srv.pid)
            assert os.getpgid(child) != os.getpgid(srv.pid)
        finally:
            os.killpg(srv.pid, signal.SIGTERM)
            srv.wait(timeout=20)
            cli.kill()
            cli.wait(timeout=10)
    finally:
        if srv.poll() is None:
            os.killpg(srv.pid, signal.SIGKILL)
            srv.wait(timeout=10)
    assert (tmp_path / "server.log").read_text() == ""  # no contract lines: ngtcp2 logs no state
    (qlog,) = (tmp_path / "qlog").glob("*.sqlog")
    last = qlog.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1].lstrip(b"\x1e")
    assert json.loads(last)["name"]  # whole: gtlsserver was stopped with SIGINT, which flushes its qlog
