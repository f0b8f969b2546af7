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


def test_replace_dir_swaps_a_cache_entry_without_a_moment_it_is_missing(tmp_path: Path) -> None:
    """A run that resolved a binary in a cache entry keeps finding one while --force replaces the entry."""
    import threading

    from quicsm.files import replace_dir

    entry = tmp_path / "v1-reno-abc"
    (entry / "bin").mkdir(parents=True)
    (entry / "bin" / "quicsm-client").write_text("build 0")
    missing: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        k = 0
        while not stop.is_set():
            k += 1
            if not (entry / "bin" / "quicsm-client").is_file():
                missing.append(k)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for i in range(1, 201):
            staging = tmp_path / f".tmp-v1-reno-abc-{i}"
            (staging / "bin").mkdir(parents=True)
            (staging / "bin" / "quicsm-client").write_text(f"build {i}")
            replace_dir(staging, entry)
    finally:
        stop.set()
        watcher.join()
    assert not missing
    assert (entry / "bin" / "quicsm-client").read_text() == "build 200"
    assert [p.name for p in tmp_path.iterdir()] == [entry.name]  # the old entries are gone
    fresh = tmp_path / ".tmp-new"
    (fresh / "bin").mkdir(parents=True)
    replace_dir(fresh, tmp_path / "v2-reno-abc")  # no entry yet: a plain rename
    assert (tmp_path / "v2-reno-abc" / "bin").is_dir() and not fresh.exists()


def test_forced_quic_go_build_keeps_the_old_binaries_until_the_new_ones_are_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_binaries(force=True) builds beside the cache entry (it used to delete the entry first,
    and a client binary vanished under a run that was using it)."""
    from types import SimpleNamespace

    from quicsm.testbed import build

    plan = SimpleNamespace(
        source=SimpleNamespace(version="v0.65.0"),
        ps=SimpleNamespace(algorithm="reno", name="set"),
        key=lambda: "0" * 64,
    )
    monkeypatch.setattr(build, "_plan", lambda version, variant, ps: plan)
    seen: list[bool] = []

    def fake_build(plan: object, tmp: Path, progress: object) -> dict[str, object]:
        old = tmp_path / "v0.65.0-reno-0000000000000000" / "bin" / "quicsm-client"
        seen.append(old.is_file())
        (tmp / "bin").mkdir()
        for b in build.PROGRAMS.values():
            (tmp / "bin" / b).write_text(f"build {len(seen)}")
        return {"version": "v0.65.0", "go_version": "go", "build_tags": []}

    monkeypatch.setattr(build, "_build_entry", fake_build)
    first = build.build_binaries("v0.65.0", cache_dir=tmp_path)
    assert not first.cached and first.client.read_text() == "build 1"
    assert build.build_binaries("v0.65.0", cache_dir=tmp_path).cached and len(seen) == 1
    forced = build.build_binaries("v0.65.0", cache_dir=tmp_path, force=True)
    assert not forced.cached and seen == [False, True] and forced.client.read_text() == "build 2"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [forced.cache_dir.name]
