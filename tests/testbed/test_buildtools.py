"""Running a toolchain for a build (quicsm.testbed.buildtools.run_tool): progress lines as they come, a line
with the elapsed time when the tool is silent, the tail of its output when it fails."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from quicsm.errors import TestbedError
from quicsm.testbed.buildtools import format_duration, run_tool


def test_progress_forwards_lines_and_says_the_time_when_silent(tmp_path: Path) -> None:
    script = (
        "import sys, time\nprint('   Compiling a v1', file=sys.stderr, flush=True)\ntime.sleep(1.6)\nprint('out')\n"
    )
    seen: list[str] = []
    out = run_tool(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        what="building x",
        progress=seen.append,
        show=lambda line: "Compiling" in line,
        heartbeat_s=0.5,
    )
    assert out == "out\n"
    assert seen[0] == "Compiling a v1"
    beats = [s for s in seen[1:] if s.startswith("building x: ")]
    assert beats and all("so far (last: Compiling a v1)" in b for b in beats), seen


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
