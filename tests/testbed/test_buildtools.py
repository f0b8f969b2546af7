"""Running a toolchain for a build (quicsm.testbed.buildtools.run_tool): progress lines as they come, a line
with the elapsed time when the tool is silent, the tail of its output when it fails."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from quicsm.errors import TestbedError
from quicsm.testbed.buildtools import format_duration, run_tool


def test_progress_forwards_lines_and_says_the_time_when_silent(tmp_path: Path) -> None:
    """The tool prints one line, then stays silent until a heartbeat naming that line has been reported
    (no fixed sleeps: the machine may be loaded)."""
    flag = tmp_path / "beat-seen"
    script = (
        "import os, sys, time\n"
        "print('   Compiling a v1', file=sys.stderr, flush=True)\n"
        f"end = time.time() + 60\nwhile not os.path.exists({str(flag)!r}) and time.time() < end: time.sleep(0.05)\n"
        "print('out')\n"
    )
    seen: list[str] = []

    def progress(line: str) -> None:
        seen.append(line)
        if line.startswith("building x: ") and "(its last line: Compiling a v1)" in line:
            flag.touch()

    out = run_tool(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        what="building x",
        progress=progress,
        show=lambda line: "Compiling" in line,
        heartbeat_s=0.3,
    )
    assert out == "out\n" and flag.exists(), seen
    first = seen.index("Compiling a v1")
    assert any(
        s.startswith("building x: ") and "so far (its last line: Compiling a v1)" in s for s in seen[first + 1 :]
    )


def test_quiet_without_progress_and_failure_carries_the_tail(tmp_path: Path) -> None:
    script = "import sys\nfor i in range(100): print(f'line {i}', file=sys.stderr)\nsys.exit(3)\n"
    with pytest.raises(TestbedError) as exc:
        run_tool([sys.executable, "-c", script], cwd=tmp_path, what="building y")
    msg = str(exc.value)
    assert msg.startswith("building y failed (") and "exit status 3" in msg
    assert "line 99" in msg and "line 10\n" not in msg  # the tail, not everything
    with pytest.raises(TestbedError, match="building z: cannot run /nonexistent"):
        run_tool(["/nonexistent/tool"], cwd=tmp_path, what="building z")


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0.4, 42, 60, 605.2)] == ["0 s", "42 s", "1 min 00 s", "10 min 05 s"]
