"""The testbed's ngtcp2 server: Debian's ``gtlsserver`` (ngtcp2's example HTTP/3 server over GnuTLS,
packages ``ngtcp2-server``) behind the testbed server's interface, so the Go client loads the same page
from it as from the Go, quiche and quinn servers.

ngtcp2 prints no contract lines (it is a stack that logs no congestion state): ``-log`` gets an empty
``server.log`` and ``-qlog DIR`` has ngtcp2's own qlog code write the connection's qlog there, whose
metrics :mod:`quicsm.traces.metric_states` reads states from. The page (``/`` with N ``<script async
src="/obj/i">`` tags) and the objects are files in a temporary htdocs; a self-signed P-256 certificate
is made with ``openssl`` at start and its SPKI hash goes into the one JSON ready line on stdout, printed
once gtlsserver has bound its port.

    python3 -m quicsm.testbed.ngtcp2_server -addr HOST:PORT -objects N -size S -log FILE -qlog DIR -cc reno
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from quicsm.testbed.pages import object_body, page_html

__all__ = ["GTLSSERVER", "CCS", "main", "installed_version"]

GTLSSERVER = "/usr/sbin/gtlsserver"
CCS = ("reno", "cubic", "bbr", "bbr2")
"""gtlsserver's ``--cc`` values (ngtcp2 0.12.1)."""


def installed_version() -> str | None:
    """The Debian package's version of ngtcp2 (``0.12.1``), or None when it is not installed."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", "ngtcp2-server"], capture_output=True, text=True, timeout=10
        )
    except OSError:
        return None
    if out.returncode != 0 or not out.stdout:
        return None
    return out.stdout.split("+")[0].split("-")[0]


def _certificate(work: Path) -> tuple[Path, Path, str]:
    key, cert = work / "key.pem", work / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    der = subprocess.run(
        ["openssl", "pkey", "-in", str(key), "-pubout", "-outform", "DER"], check=True, capture_output=True
    ).stdout
    return key, cert, base64.b64encode(hashlib.sha256(der).digest()).decode()


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def _bound(port: int) -> bool:
    """Whether a UDP socket of this network namespace is bound to ``port`` (/proc/net/udp, udp6)."""
    for name in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            rows = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        if any(int(r.split()[1].rsplit(":", 1)[1], 16) == port for r in rows if len(r.split()) > 1):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="quicsm-ngtcp2-server", description=__doc__.splitlines()[0])
    ap.add_argument("-addr", default="127.0.0.1:4433")
    ap.add_argument("-objects", type=int, default=1)
    ap.add_argument("-size", type=int, default=10000)
    ap.add_argument("-log", required=True, help="server.log: left empty (ngtcp2 prints no contract lines)")
    ap.add_argument("-qlog", help="directory for ngtcp2's qlog")
    ap.add_argument("-cc", default="cubic", choices=CCS)
    ap.add_argument("-bin", default=GTLSSERVER)
    a = ap.parse_args(argv)
    host, _, port = a.addr.rpartition(":")
    Path(a.log).write_text("")
    work = Path(tempfile.mkdtemp(prefix="quicsm-ngtcp2-"))
    child: subprocess.Popen[bytes] | None = None
    try:
        htdocs = work / "htdocs"
        (htdocs / "obj").mkdir(parents=True)
        (htdocs / "index.html").write_text(page_html(a.objects, a.size))
        body = object_body(a.size)
        for i in range(a.objects):
            (htdocs / "obj" / str(i)).write_bytes(body)
        key, cert, spki = _certificate(work)
        cmd = [a.bin, "--quiet", "--cc", a.cc, "--htdocs", str(htdocs), "--no-quic-dump", "--no-http-dump"]
        if a.qlog:
            Path(a.qlog).mkdir(parents=True, exist_ok=True)
            cmd += ["--qlog-dir", a.qlog]
        # gtlsserver writes its qlog through a stdio buffer it flushes only when it leaves its event loop,
        # which SIGINT does and SIGTERM does not. The testbed stops a server by signalling its process
        # group, so gtlsserver gets a session of its own (dying with this process, PR_SET_PDEATHSIG) and
        # the stop is passed on to it as SIGINT.
        child = subprocess.Popen(
            [*cmd, host, port, str(key), str(cert)],
            stdout=sys.stderr,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGINT) if child else None)
        deadline = time.monotonic() + 10
        while not _bound(int(port)):
            if child.poll() is not None or time.monotonic() > deadline:
                print(f"quicsm-ngtcp2-server: {a.bin} did not bind {a.addr}", file=sys.stderr)
                return 1
            time.sleep(0.02)
        ready = {"ready": True, "addr": a.addr, "spki": spki, "stack": "ngtcp2", "ngtcp2": installed_version()}
        print(json.dumps({**ready, "cc": a.cc, "objects": a.objects, "size": a.size}), flush=True)
        return child.wait()
    finally:
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.umask(0o022)
    raise SystemExit(main())
