"""Plain logs and qlogs scanned in their mapping (logscan._mapped_windows and Window, _scan.map_file): the same
traces and report as the read() path, and a file truncated while mapped is read to its new end, never a SIGBUS."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import synth_cubic_lines

from quicsm.traces import columnar, logscan
from quicsm.traces.events import TraceMeta
from quicsm.traces.report import ParseReport

pytestmark = pytest.mark.skipif(logscan._map_file is None, reason="the C extension is not built")

ROOT = Path(__file__).resolve().parents[2]


def _read(
    path: Path, *, mapped: bool, chunk: int, on_bytes: Callable[[int], None] | None = None
) -> tuple[list[object], dict[str, object]]:
    report = ParseReport(keep=1 << 30)
    reader = columnar.ColumnReader(report, on_bytes, chunk=chunk)
    reader.mapped = mapped
    with open(path, "rb") as fh:
        batches = list(reader.read(fh, str(path), "s", TraceMeta())) + list(reader.flush())
    return [t for b in batches for t in b.traces()], report.to_json()


def _log(tmp_path: Path, lines: list[str], end: str = "\n") -> Path:
    path = tmp_path / "server.log"
    path.write_bytes(("\n".join(lines) + end).encode("utf-8", "surrogateescape"))
    return path


@pytest.fixture
def mapped_from_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logscan, "MAP_MIN", 0)


@pytest.mark.usefixtures("mapped_from_zero")
@pytest.mark.parametrize("chunk", [3, 97, 4096, logscan.CHUNK])
def test_a_mapped_log_reads_as_the_read_path_reads_it(tmp_path: Path, chunk: int) -> None:
    """Long lines (longer than a window), noise, bad lines, blank lines, a last line without its newline."""
    lines = synth_cubic_lines(conns=3, steps=60, seed=4, prefix="I1122 14:30:15.495185 server.cc:12] ")
    lines[7] += " " + "x" * 5000  # longer than most windows: the window grows to its newline
    lines[20:20] = ["", "noise " * 900, "QUICSM v=1 conn=z t_us=x cc=cubic to=A", "QUICSM \udcff"]
    for end in ("\n", ""):
        path = _log(tmp_path, lines, end)
        want = _read(path, mapped=False, chunk=chunk)
        assert len(want[0]) == 3 and want[1]["issues"]
        assert _read(path, mapped=True, chunk=chunk) == want


@pytest.mark.usefixtures("mapped_from_zero")
def test_a_line_longer_than_max_line_in_a_mapped_log_is_skipped_as_the_read_path_skips_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mapping serves lines up to MAX_LINE; from a longer one on the read path reads (and reports it)."""
    monkeypatch.setattr(logscan, "MAX_LINE", 256)
    lines = synth_cubic_lines(conns=2, steps=30, seed=1)
    lines[10] = "y" * 1000
    lines[40] = lines[40] + " " + "z" * 700
    for end in ("\n", ""):
        path = _log(tmp_path, lines, end)
        want = _read(path, mapped=False, chunk=64)
        assert any("longer than 256 bytes" in str(i) for i in want[1]["issues"])  # type: ignore[attr-defined]
        assert _read(path, mapped=True, chunk=64) == want


@pytest.mark.usefixtures("mapped_from_zero")
def test_a_log_that_grows_or_is_replaced_while_mapped_reads_as_the_read_path_reads_it(tmp_path: Path) -> None:
    """A live log appended to while it is scanned: what was appended is read too (with read()), as the read
    path reads it. A log replaced (rename over it) while scanned: the file opened is read whole, no problem."""
    lines = synth_cubic_lines(conns=2, steps=200, seed=6)
    more = synth_cubic_lines(conns=2, steps=20, seed=7)
    for mapped in (False, True):
        path = _log(tmp_path, lines)

        def append_once(n: int, path: Path = path) -> None:
            if path.stat().st_size == len("\n".join(lines)) + 1:
                with open(path, "a") as fh:
                    fh.write("\n".join(more) + "\n")

        got = _read(path, mapped=mapped, chunk=4096, on_bytes=append_once)
        assert got[1]["issues"] == [] and got[1]["records"] == len(lines) + len(more)

        path = _log(tmp_path, lines)
        want = _read(path, mapped=mapped, chunk=4096)

        def replace_once(n: int, path: Path = path) -> None:
            if path.read_bytes().startswith(b"QUICSM"):
                (tmp_path / "new.log").write_bytes(b"noise\n" * 10)
                os.replace(tmp_path / "new.log", path)

        assert _read(path, mapped=mapped, chunk=4096, on_bytes=replace_once) == want


TRUNCATED = textwrap.dedent(
    """
    import json, sys
    from quicsm.traces import columnar, logscan
    from quicsm.traces.events import TraceMeta
    from quicsm.traces.report import ParseReport

    logscan.MAP_MIN = 0
    path, mapped, cut = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
    report = ParseReport(keep=100)
    done = []

    def truncate_after_first_window(n):
        if not done:
            with open(path, "r+b") as fh:
                fh.truncate(cut)
        done.append(n)

    reader = columnar.ColumnReader(report, truncate_after_first_window, chunk=1 << 16)
    reader.mapped = mapped
    with open(path, "rb") as fh:
        traces = [t for b in [*reader.read(fh, path, "s", TraceMeta()), *reader.flush()] for t in b.traces()]
    print(json.dumps({"events": sum(len(t.events) for t in traces), "issues": [str(i) for i in report.issues]}))
    """
)


def _child(script: str, path: Path, mapped: str, cut: int) -> dict:
    """Run a truncation script in a child (a SIGBUS ends the child, not the test run); its JSON report."""
    run = subprocess.run(
        [sys.executable, "-c", script, str(path), mapped, str(cut)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


@pytest.mark.parametrize("cut", [0, 100_000])
def test_a_log_truncated_while_mapped_ends_early_and_says_so_without_sigbus(tmp_path: Path, cut: int) -> None:
    """logrotate's copytruncate on a live log while quicsm scans its mapping: pages past the new end would
    kill the process with SIGBUS; here the lines scanned are kept and the shrink is reported, as the read
    path reports it (run in a child: a SIGBUS would end it, not the test run)."""
    lines = synth_cubic_lines(conns=4, steps=3000, seed=2)
    got = {}
    for mapped in ("0", "1"):
        path = _log(tmp_path, lines)
        assert path.stat().st_size > 4 << 16
        got[mapped] = out = _child(TRUNCATED, path, mapped, cut)
        assert 0 < out["events"] < len(lines)
        assert sum("file shrank while being read" in i for i in out["issues"]) == 1, out["issues"]
    assert got["1"]["events"] <= got["0"]["events"]


def test_a_sigbus_outside_a_mapped_log_still_ends_the_process(tmp_path: Path) -> None:
    """The handler answers only for mapped logs: any other bad access ends the process as before."""
    script = textwrap.dedent(
        """
        import mmap, os, sys
        from quicsm.traces import logscan
        log, other = sys.argv[1], sys.argv[2]
        fd = os.open(log, os.O_RDONLY)
        m = logscan._map_file(fd, os.fstat(fd).st_size)  # the handler is installed
        with open(other, "wb") as fh:
            fh.write(b"x" * 65536)
        fh = open(other, "rb")
        mm = mmap.mmap(fh.fileno(), 65536, access=mmap.ACCESS_READ)
        os.truncate(other, 0)
        print(mm[40000])
        """
    )
    log = _log(tmp_path, synth_cubic_lines(conns=1, steps=10))
    run = subprocess.run(
        [sys.executable, "-c", script, str(log), str(tmp_path / "other.bin")],
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert run.returncode in (-signal.SIGBUS, -signal.SIGABRT) and not run.stdout  # SIGABRT: a sanitizer's handler


TRUNCATED_QLOG = textwrap.dedent(
    """
    import json, sys
    from quicsm.traces import logscan
    from quicsm.traces.events import TraceMeta
    from quicsm.traces.qlog_columns import QlogBatcher
    from quicsm.traces.report import ParseReport

    logscan.MAP_MIN = 0 if sys.argv[2] == "1" else 1 << 62
    path, cut = sys.argv[1], int(sys.argv[3])
    report = ParseReport(keep=100)
    done = []

    def truncate_after_first_window(n):
        if not done:
            with open(path, "r+b") as fh:
                fh.truncate(cut)
        done.append(n)

    b = QlogBatcher(report, truncate_after_first_window, window=1 << 14)
    with open(path, "rb") as fh:
        traces = [t for c in [*b.read(fh, path, TraceMeta(), "sqlog"), *b.flush()] for t in c.traces()]
    print(json.dumps({"events": sum(len(t.events) for t in traces), "issues": [str(i) for i in report.issues]}))
    """
)


@pytest.mark.parametrize("cut", [0, 30_000])
def test_a_qlog_truncated_while_mapped_is_read_to_its_new_end_without_sigbus(tmp_path: Path, cut: int) -> None:
    """A plain qlog cut while the scanner reads its mapping (in a child: a SIGBUS would end it): the pages past
    the new end read as zeros, the rest is read with read(), which ends where the file ends now."""
    data = gzip.decompress((ROOT / "tests/data/quic-go-v0.65/server.sqlog.gz").read_bytes())
    second = data.index(b"\x1e", 1)  # the header record, then the events, several times over
    body = data[:second] + data[second:] * max(2, 400_000 // len(data))
    got = {}
    for mapped in ("0", "1"):
        path = tmp_path / "server.sqlog"
        path.write_bytes(body)
        got[mapped] = _child(TRUNCATED_QLOG, path, mapped, cut)
    assert got["1"]["events"] <= got["0"]["events"]
