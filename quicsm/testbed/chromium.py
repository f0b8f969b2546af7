"""The real browser as a client: Debian's headless ``chromium``, forced onto HTTP/3 for the test
origin (or, for the kernel TCP stack, kept off QUIC so it speaks HTTP/2 over TLS) with the server
certificate's SPKI pinned, page load time from the DevTools protocol.

DevTools runs over ``--remote-debugging-pipe`` (NUL-terminated JSON on fds 3 and 4), so no
WebSocket library is needed. Page load time is the Navigation Timing ``loadEventEnd`` of the page;
every response's protocol is collected so a run that fell back to TCP cannot pass as HTTP/3.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quicsm.errors import TestbedError
from quicsm.testbed.procs import ProcGroup
from quicsm.testbed.system import require_tool

__all__ = ["chromium_flags", "load_page", "CdpPipe", "chromium_version"]


def chromium_flags(origin: str, spki: str, user_data_dir: Path, protocol: str = "h3") -> list[str]:
    """The flags testbed-facts found to work (HTTP/3 forced for ``origin``, cert pinned by SPKI);
    with ``protocol="h2"`` QUIC is switched off instead, so the page comes over HTTP/2 on TCP, and with
    ``protocol="http/1.1"`` HTTP/2 too (HTTP/1.1 over TLS, up to six connections per origin)."""
    transport = ["--enable-quic", f"--origin-to-force-quic-on={origin}"] if protocol == "h3" else ["--disable-quic"]
    if protocol == "http/1.1":
        transport.append("--disable-http2")
    return [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        *transport,
        f"--ignore-certificate-errors-spki-list={spki}",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-extensions",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--disk-cache-size=1",
        "--remote-debugging-pipe",
        f"--user-data-dir={user_data_dir}",
        "about:blank",
    ]


def chromium_version() -> str:
    import subprocess

    try:
        return subprocess.run(["chromium", "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return "unknown"


class CdpPipe:
    """Minimal DevTools client over the debugging pipe: send commands, collect events."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.w, self.r = write_fd, read_fd
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> int:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def _next(self, deadline: float, missing: str) -> dict[str, Any]:
        """The next message (an event is also kept in ``events``); ``missing`` raised when none comes in time."""
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                raise TestbedError(missing)
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise TestbedError("chromium closed the DevTools pipe (browser exited)")
            self.buf += chunk
        raw, _, self.buf = self.buf.partition(b"\0")
        msg: dict[str, Any] = json.loads(raw)
        if "method" in msg:
            self.events.append(msg)
        return msg

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None, timeout: float = 30.0
    ) -> dict[str, Any]:
        mid = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._next(deadline, f"chromium: no answer to {method} within {timeout:.0f} s")
            if msg.get("id") == mid:
                if "error" in msg:
                    raise TestbedError(f"chromium: {method} failed: {msg['error'].get('message')}")
                return msg.get("result", {})

    def wait_event(self, method: str, timeout: float) -> dict[str, Any]:
        for ev in self.events:
            if ev.get("method") == method:
                return ev
        deadline = time.monotonic() + timeout
        while True:
            msg = self._next(deadline, f"chromium: no {method} within {timeout:.0f} s")
            if msg.get("method") == method:
                return msg


def _high_fd(fd: int) -> int:
    import fcntl

    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def load_page(
    url: str,
    *,
    spki: str,
    ns: str,
    procs: ProcGroup,
    work_dir: Path,
    preexec: Callable[[], None] | None = None,
    timeout_s: float = 120.0,
    expect_bytes: int = 0,
    protocol: str = "h3",
) -> dict[str, Any]:
    """Load ``url`` once in a fresh profile; returns the same keys as the Go client
    (``ok``, ``plt_ms``, ``bytes``, ``objects``) plus ``protocols`` seen. A load that fetched fewer
    than ``expect_bytes`` (the browser cancelled objects) or used anything but ``protocol`` (``h3``,
    or ``h2`` for a TCP server) is not ok."""
    require_tool("chromium", "chromium")
    if not spki:
        raise TestbedError("chromium needs the server's SPKI hash (the server did not print one)")
    origin = url.split("/")[2]
    profile = Path(tempfile.mkdtemp(prefix="qsm-chromium-"))
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()
    # Move the child's ends above 3 and 4, or the shell's `3<&N 4>&M` could clobber one with the other.
    to_chrome_r, from_chrome_w = _high_fd(to_chrome_r), _high_fd(from_chrome_w)
    argv = [
        "bash",
        "-c",
        f'exec "$@" 3<&{to_chrome_r} 4>&{from_chrome_w} {to_chrome_r}<&- {from_chrome_w}>&-',
        "sh",
        "chromium",
        *chromium_flags(origin, spki, profile, protocol),
    ]
    child = procs.start(
        "chromium",
        argv,
        ns=ns,
        preexec=preexec,
        stdout_path=work_dir / "chromium.stdout",
        pass_fds=(to_chrome_r, from_chrome_w),
    )
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    cdp = CdpPipe(to_chrome_w, from_chrome_r)
    try:
        targets = cdp.call("Target.getTargets", timeout=60)["targetInfos"]
        page = next((t for t in targets if t.get("type") == "page"), None)
        if page is None:
            page = {"targetId": cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]}
        session = cdp.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        cdp.call("Network.enable", session=session)
        cdp.call("Network.setCacheDisabled", {"cacheDisabled": True}, session=session)
        cdp.call("Page.enable", session=session)
        cdp.events.clear()
        t0 = time.monotonic()
        nav = cdp.call("Page.navigate", {"url": url}, session=session, timeout=timeout_s)
        if nav.get("errorText"):
            raise TestbedError(f"chromium: navigation to {url} failed: {nav['errorText']}")
        cdp.wait_event("Page.loadEventFired", timeout=timeout_s)
        wall_ms = (time.monotonic() - t0) * 1000
        timing = cdp.call(
            "Runtime.evaluate",
            {"expression": "JSON.stringify(performance.getEntriesByType('navigation')[0])", "returnByValue": True},
            session=session,
        )
        nav_t = json.loads(timing.get("result", {}).get("value") or "{}")
        protocols: dict[str, int] = {}
        nbytes = 0
        nresp = 0
        for ev in cdp.events:
            if ev.get("method") == "Network.responseReceived":
                proto = ev["params"]["response"].get("protocol", "?")
                protocols[proto] = protocols.get(proto, 0) + 1
                nresp += 1
            elif ev.get("method") == "Network.loadingFinished":
                nbytes += int(ev["params"].get("encodedDataLength", 0))
        plt = float(nav_t.get("loadEventEnd") or 0) - float(nav_t.get("startTime") or 0)
        complete = nbytes >= expect_bytes
        ok = nresp > 0 and set(protocols) == {protocol} and complete
        out: dict[str, Any] = {
            "ok": ok,
            "plt_ms": round(plt if plt > 0 else wall_ms, 3),
            "wall_ms": round(wall_ms, 3),
            "bytes": nbytes,
            "objects": max(0, nresp - 1),
            "protocols": protocols,
            "browser": chromium_version(),
        }
        if set(protocols) != {protocol}:
            out["error"] = f"responses over {protocols or 'nothing'}, not only {protocol}"
        elif not complete:
            out["error"] = f"browser fetched {nbytes} of {expect_bytes} bytes (objects cancelled)"
        with contextlib.suppress(OSError):
            cdp.send("Browser.close")
        return out
    finally:
        os.close(to_chrome_w)
        os.close(from_chrome_r)
        procs.stop(child, grace=5)
        shutil.rmtree(profile, ignore_errors=True)
