"""The rate schedule of a testbed run, drawn above the sender's states in the HTML report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from quicsm.compare.svg import rate_logs_for, rate_timeline_svg
from quicsm.traces.events import Trace, TraceEvent


def _run(tmp_path: Path, rate_log: object) -> Trace:
    (tmp_path / "meta.json").write_text(json.dumps({"emulator": {"rate_log": rate_log}}))
    events = [
        TraceEvent(0, "Startup", prev="Init", pacing_bps=10_000_000),
        TraceEvent(400_000, "ProbeBw.Cruise", pacing_bps=40_000_000),
        TraceEvent(1_500_000, "ProbeBw.Up", pacing_bps=50_000_000),
        TraceEvent(1_600_000, "ProbeBw.Down"),
        TraceEvent(2_500_000, "ProbeBw.Down", kind="close"),
    ]
    return Trace("c1", "bbr2", events, sources=(str(tmp_path / "server.log"),))


def test_rate_log_is_read_from_the_sidecar_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import quicsm.traces.runmeta as runmeta

    trace = _run(tmp_path, [[0.0, 20e6], [1.0, 80e6], [2.0, 30e6]])
    other = Trace("c2", "bbr2", trace.events, sources=trace.sources)  # a second connection of the run
    reads: list[str] = []
    real = runmeta.read_meta
    monkeypatch.setattr(runmeta, "read_meta", lambda path, kind: reads.append(path) or real(path, kind))
    logs = rate_logs_for([trace, other])
    assert logs == {"c1": [(0.0, 20e6), (1.0, 80e6), (2.0, 30e6)], "c2": logs["c1"]} and len(reads) == 1


def test_no_schedule_or_no_sidecar_gives_none(tmp_path: Path) -> None:
    assert rate_logs_for([_run(tmp_path, [])]) == {}
    assert rate_logs_for([Trace("x", "bbr2", [], sources=(str(tmp_path / "nowhere/server.log"),))]) == {}


def test_svg_has_the_rate_steps_and_every_state_on_one_time_axis(tmp_path: Path) -> None:
    trace = _run(tmp_path, [[0.0, 20e6], [1.0, 80e6], [2.0, 30e6]])
    svg = rate_timeline_svg(trace, rate_logs_for([trace])["c1"], title="run 1")
    path = re.search(r'<path d="([^"]+)"', svg)
    assert path is not None and path.group(1).count("V") == 2  # two rate changes
    for state in ("Startup", "ProbeBw.Cruise", "ProbeBw.Up", "ProbeBw.Down"):
        assert re.search(rf"<title>{re.escape(state)} [0-9.]+-[0-9.]+ s</title>", svg), state
    up = re.search(r'<rect x="([0-9.]+)" [^>]*><title>ProbeBw.Up 1\.500-1\.600 s', svg)
    rate_up = re.search(r"H([0-9.]+)V", path.group(1))
    assert up is not None and rate_up is not None and float(up.group(1)) > float(rate_up.group(1))
    assert svg.count("<circle") >= 3  # pacing samples
