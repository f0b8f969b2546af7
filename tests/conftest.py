"""Shared fixtures (small contract logs written by the tests themselves), the CI skip guard, and the testbed
lock every ``root`` test takes.

Under ``CI=true`` a skipped test is work not checked, so every skip fails the run unless its reason
matches :data:`CI_ALLOWED_SKIPS`, where each entry says why skipping it in CI is acceptable.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from quicsm.traces.contract import format_line

CI_ALLOWED_SKIPS: dict[str, str] = {
    "needs java and $QUICSM_SYNOPTIC_JAR": (
        "the original Synoptic jar is not redistributable and is not built in CI; its recorded outputs "
        "are checked without Java by tests/inference"
    ),
}
"""Skip reason (substring) -> why that skip may happen in CI. Anything else skipped under CI=true fails."""


SHARED = next(
    (
        p
        for p in (Path(__file__).resolve().parents[2] / "shared", Path(__file__).resolve().parents[3] / "shared")
        if (p / "reference").is_dir()
    ),
    Path(__file__).resolve().parents[2] / "shared",
)
"""The ``shared/`` folder beside the clone: fetched reference data (other stacks' qlogs, papers). Only this
project's CI has it; a user's plain clone does not."""


def shared_file(relative: str) -> Path:
    """A file under ``../shared``; outside CI a test that needs it skips, naming the missing folder."""
    path = SHARED / relative
    if path.is_file():
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"{path} missing: CI runs with ../shared beside the clone (reference data the tests read)")
    pytest.skip(f"needs {path.parent} (reference data in ../shared beside the clone; only this project's CI has it)")


CI_REQUIRED_COMMANDS = {
    "dot": "Graphviz (scripts/install.sh)",
    "go": "Go (.ci/install.d/quic-go.sh)",
    "chromium": "Debian's chromium (.ci/install.d/testbed.sh)",
    "tc": "iproute2 (.ci/install.d/testbed.sh)",
    "cargo": "Rust >= 1.88 for the quiche server (.ci/install.d/quiche.sh)",
    "clang": "clang/lld for Chromium's QUIC (.ci/install.d/chromium-quic.sh)",
}


def input_kind(path: str) -> str:
    """The kind ``read_inputs`` gives a file (:func:`quicsm.traces.readers.kind_of`: content, then name)."""
    from quicsm.traces.readers import kind_of

    return kind_of(file_head(path), path)


def file_head(path: str) -> bytes:
    """The first ``HEAD_BYTES`` of a file, gunzipped on its own (empty when the gzip data is bad): the sniff the
    readers did before the gzip reader inflated the head itself, kept as the oracle the reader's kinds are held to."""
    import gzip
    import zlib

    from quicsm.traces.sniff import HEAD_BYTES

    with open(path, "rb") as fh:
        raw = fh.read(HEAD_BYTES)
    if not raw.startswith(b"\x1f\x8b"):
        return raw
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, HEAD_BYTES)
    except (zlib.error, gzip.BadGzipFile, EOFError):
        return b""


def pytest_configure(config: pytest.Config) -> None:
    """In CI, refuse to start without root, the toolchains and the compiled scanner."""
    if os.environ.get("CI") != "true":
        return
    missing = [f"{cmd} ({what})" for cmd, what in CI_REQUIRED_COMMANDS.items() if shutil.which(cmd) is None]
    if os.geteuid() != 0:
        missing.append("root (CI runs as root)")
    if importlib.util.find_spec("quicsm.traces._scan") is None:
        missing.append("the C extension quicsm.traces._scan (pip install -e . with a C compiler)")
    if missing:
        pytest.exit("CI=true but missing: " + "; ".join(missing), returncode=1)


TESTBED_LOCK = Path("/tmp/quicsm-testbed.lock")
"""Emulator runs and benchmarks on one machine take turns on this file (``flock /tmp/quicsm-testbed.lock CMD``,
experiments/grids.py, bench/): a run made beside another is late or measures the other's load."""


@contextmanager
def hold_testbed_lock(who: str, lock: Path = TESTBED_LOCK) -> Iterator[None]:
    """Hold ``lock`` (the ``flock(2)`` lock flock(1) takes); says on stderr when it has to wait."""
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            t0 = time.monotonic()
            print(f"\n{who}: waiting for {lock} (an emulator run or benchmark holds it)", file=sys.__stderr__)
            fcntl.flock(fd, fcntl.LOCK_EX)
            print(f"{who}: got {lock} after {time.monotonic() - t0:.0f} s", file=sys.__stderr__)
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A ``root`` test (the emulator, tc, namespaces: the testbed tests and the tutorials run with it) holds the
    testbed lock from its setup (module fixtures make their runs there) to its teardown, so it neither disturbs
    nor is disturbed by a grid or benchmark running beside it. Without root those tests skip: no lock."""
    if item.get_closest_marker("root") is None or os.geteuid() != 0:
        yield
        return
    with hold_testbed_lock(item.nodeid):
        yield


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """In CI, turn a skip into a failure unless its reason is allowlisted."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if os.environ.get("CI") != "true" or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if any(allowed in reason for allowed in CI_ALLOWED_SKIPS):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI=true: {reason}\n"
        "CI must run this test (install what it needs in scripts/install.sh or .ci/install.d/), "
        "or add its reason to CI_ALLOWED_SKIPS in tests/conftest.py with why skipping is acceptable."
    )


CUBIC_CHAIN = {
    "SlowStart": ["CongestionAvoidance", "Recovery", "ApplicationLimited"],
    "CongestionAvoidance": ["Recovery", "ApplicationLimited", "CongestionAvoidanceMaxed"],
    "CongestionAvoidanceMaxed": ["CongestionAvoidance", "Recovery"],
    "ApplicationLimited": ["CongestionAvoidance", "SlowStart"],
    "Recovery": ["CongestionAvoidance", "TailLossProbe"],
    "TailLossProbe": ["Recovery", "RetransmissionTimeout", "CongestionAvoidance"],
    "RetransmissionTimeout": ["SlowStart"],
}


def synth_cubic_lines(conns: int, steps: int, seed: int = 0, prefix: str = "") -> list[str]:
    """Interleaved contract lines of ``conns`` connections doing a random walk over Cubic states."""
    rng = random.Random(seed)
    walkers = {c: ["Init", rng.randrange(10**6)] for c in range(conns)}
    lines = []
    for _ in range(conns * steps):
        c = rng.randrange(conns)
        state, t = walkers[c]
        t += rng.randrange(100, 50_000)
        nxt = "SlowStart" if state == "Init" else rng.choice(CUBIC_CHAIN[state])
        lines.append(
            prefix
            + format_line(
                conn=f"0x{c:x}",
                t_us=t,
                cc="cubic",
                frm=state,
                to=nxt,
                cwnd=rng.randrange(14600, 500_000),
                inflight=rng.randrange(0, 500_000),
            )
        )
        walkers[c] = [nxt, t]
    for c, (state, t) in walkers.items():
        if state != "Init":
            lines.append(prefix + format_line(conn=f"0x{c:x}", t_us=t + 1000, cc="cubic", ev="close"))
    return lines


@pytest.fixture
def write_log(tmp_path: Path) -> Callable[..., Path]:
    def _write(name: str, lines: list[str]) -> Path:
        p = tmp_path / name
        p.write_text("".join(line + "\n" for line in lines))
        return p

    return _write
