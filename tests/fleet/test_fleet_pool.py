"""``--dask local:N``: N worker processes forked from the client (no scheduler), results streamed in order."""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fleet_fixtures import make_fleet_dir, worker_state

from quicsm.cli.main import cli
from quicsm.errors import ParseError
from quicsm.fleet import machine, pool
from quicsm.fleet.machine import forks
from quicsm.fleet.run import map_tasks
from quicsm.traces.inputs import workers_for

ROOT = Path(__file__).resolve().parents[2]


def mark(path: str) -> str:
    """A task that leaves a file behind when it runs."""
    Path(path).write_text("ran")
    return path


def fail_on(item: int) -> int:
    if item == 3:
        raise ParseError("f3.log", 7, "bad record")
    return item * item


@pytest.fixture
def thread_running() -> Iterator[None]:
    """Another thread in this process: forking now is unsafe, so the pool must not fork."""
    pool.close_pools()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    yield
    pool.close_pools()
    stop.set()
    t.join(5)


def test_workers_fork_when_no_other_thread_runs() -> None:
    """In a fresh process with one thread the workers are forked (started in milliseconds), in input order."""
    script = (
        "import os, sys, time\n"
        "from quicsm.fleet import pool\n"
        "from quicsm.fleet.run import map_tasks\n"
        "def where(i):\n"
        "    time.sleep(0.02)\n"
        "    return i, os.getpid(), os.getppid()\n"
        "print(pool.start_method())\n"
        "t = time.perf_counter()\n"
        "got = list(map_tasks(where, range(40), dask='local:2'))\n"
        "print(round(time.perf_counter() - t, 3))\n"
        "print([g[0] for g in got] == list(range(40)), len({g[1] for g in got}), {g[2] for g in got} == {os.getpid()})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    method, seconds, checks = out.stdout.splitlines()
    assert method == "fork"
    assert float(seconds) < 5  # forked: no interpreter start, no imports (spawned: seconds each)
    assert checks == "True 2 True"  # in order, on two worker processes, children of this one


def test_no_fork_while_another_thread_runs(thread_running: None) -> None:
    """A second thread (an fsspec event loop, a test's server) may hold a lock the child would never see
    released: the workers are spawned instead, and still gives the results in order."""
    assert pool.start_method() != "fork"
    got = list(map_tasks(worker_state, range(6), dask="local:2"))
    assert os.getpid() not in {pid for pid, *_ in got} and {ppid for _, ppid, *_ in got} == {os.getpid()}


def test_workers_keep_glibc_thresholds_and_one_blas_thread(thread_running: None) -> None:
    """Workers set the CLI's malloc thresholds (glibc's moving mmap threshold made a worker map and unmap
    every column array: 1.6-1.8x a lone process's CPU) and one BLAS thread, also when not forked."""
    got = list(map_tasks(worker_state, range(4), dask="local:2"))
    for _, _, blas, mapped in got:
        assert blas == "1"
        assert mapped == 0  # a 16 MiB block from the heap, not its own mapping


def test_a_failed_task_names_file_line_and_worker_pid() -> None:
    with pytest.raises(ParseError) as err:
        list(map_tasks(fail_on, range(8), dask="local:2"))
    assert err.value.path == "f3.log" and err.value.line == 7
    assert "f3.log:7: bad record (on local worker process " in str(err.value)
    pid = int(str(err.value).split("local worker process ")[1].split()[0])
    assert pid != os.getpid()
    pool.close_pools()


def test_tasks_are_submitted_a_window_ahead_and_cancelled_when_the_caller_stops(tmp_path: Path) -> None:
    """The client holds at most 2N results: tasks go out only as results are taken; the rest never run."""
    paths = [str(tmp_path / f"t{i}") for i in range(60)]
    results = map_tasks(mark, paths, dask="local:2")
    assert next(results) == paths[0]
    time.sleep(0.5)  # the workers would run ahead here if everything had been submitted
    ran = sum(os.path.exists(p) for p in paths)
    assert 1 <= ran <= 5  # 2N ahead and the one taken
    results.close()
    pool.close_pools()  # waits for the workers: nothing runs after this
    assert sum(os.path.exists(p) for p in paths) <= 5


def test_cli_local_workers_match_the_local_run_and_name_the_worker_of_a_strict_failure(tmp_path: Path) -> None:
    fleet_dir = make_fleet_dir(tmp_path)
    local, remote = tmp_path / "local.json", tmp_path / "dask.json"
    res = CliRunner().invoke(cli, ["compare", str(fleet_dir), str(fleet_dir), "--format", "json", "-o", str(local)])
    assert res.exit_code == 0, res.output
    args = ["compare", str(fleet_dir), str(fleet_dir), "--format", "json", "-o", str(remote), "--dask", "local:3"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert local.read_bytes() == remote.read_bytes()
    bad = fleet_dir / "server1.log"
    bad.write_text(bad.read_text() + "QUICSM v=1 conn=0x9 t_us=oops cc=cubic to=SlowStart\n")
    res = CliRunner().invoke(cli, ["infer", str(fleet_dir), "--strict", "--dask", "local:2", "-o", str(remote)])
    assert res.exit_code != 0 and f"{bad}:" in res.output and "(on local worker process " in res.output, res.output


CLIENT = """
import sys, time
from quicsm.fleet import pool
results = pool.map_local(time.sleep, [60.0] * 4, 2)
print(*pool.pool_for(2)._processes, flush=True)
next(results)
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_workers_end_when_the_client_is_killed() -> None:
    """A killed client (SIGKILL, a timeout's SIGTERM) took no worker with it: they waited forever to hand
    over a result. Now each ends with it, mid-task."""
    client = subprocess.Popen([sys.executable, "-c", CLIENT], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert client.stdout is not None
    workers = [int(p) for p in client.stdout.readline().split()]
    assert len(workers) == 2 and not any(map(_gone, workers))
    client.kill()
    client.wait(10)
    deadline = time.monotonic() + 10
    while not all(map(_gone, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [p for p in workers if not _gone(p)]
    for p in alive:
        os.kill(p, 9)
    assert not alive, f"workers {alive} outlived their client"


def nap(item: int) -> int:
    time.sleep(0.3)
    return item


def test_a_frozen_worker_stops_the_run_with_one_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """SIGSTOP on the workers: no result comes; the client says so after a while and stops at the timeout
    (it waited for ever), killing the pool's processes."""
    import signal

    from quicsm.errors import InputError

    pool.close_pools()
    monkeypatch.setenv("QUICSM_TASK_TIMEOUT", "3")
    results = map_tasks(nap, list(range(20)), dask="local:2")
    procs = list(pool.pool_for(2)._processes.values())  # type: ignore[union-attr]
    for p in procs:
        os.kill(p.pid, signal.SIGSTOP)
    started = time.monotonic()
    with pytest.raises(InputError, match=r"--dask local:2: no result for 0 in 3 s; a worker is frozen"):
        list(results)
    assert time.monotonic() - started < 30
    assert "note: --dask local:2: waiting" in capsys.readouterr().err
    for p in procs:  # killed (gone, or a zombie the pool's own thread may reap: is_alive() races it)
        _until_gone(p.pid)
    pool.close_pools()


def _until_gone(pid: int, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.05)
    raise AssertionError(f"worker {pid} still runs (state {state})")


@pytest.mark.parametrize("spec", ["local:0", "local:x", "local:99999", "tcp://nohost:notaport", "tcp://", "tcp://[::1"])
def test_bad_dask_specs_are_one_line(spec: str, tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text("QUICSM v=1 conn=0x1 t_us=1 cc=cubic to=SlowStart\n")
    res = CliRunner().invoke(cli, ["parse", str(log), "-o", os.devnull, "--dask", spec])
    assert res.exit_code == 1 and res.output.startswith(f"Error: --dask {spec}: "), res.output
    assert "Traceback" not in res.output


@pytest.fixture
def auto(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """``dask="auto"``'s choices, recorded; SMALL_RUN_FILES at the six files of a fleet dir; an idle machine."""
    from quicsm.traces import inputs

    chosen: list[str | None] = []
    real = inputs.workers_for
    monkeypatch.setattr(inputs, "workers_for", lambda d, f: chosen.append(real(d, f)) or chosen[-1])
    monkeypatch.setattr(inputs, "SMALL_RUN_FILES", 6)
    monkeypatch.setattr(machine, "runnable", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(machine, "forks", lambda: True)  # a pool's threads may outlive its shutdown a moment
    return chosen


def _same(a: object, b: object) -> bool:
    from quicsm.traces.summary import Summary

    assert isinstance(a, Summary) and isinstance(b, Summary)
    return a.sequences == b.sequences and a.describe() == b.describe() and a.report.to_json() == b.report.to_json()


def test_summarize_reads_a_big_enough_fleet_on_two_workers_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, auto: list[str | None]
) -> None:
    """The library's default (``dask="auto"``, the CLI's too) reads SMALL_RUN_FILES local files or more on
    local:2 when a second core is usable and idle, expanding the inputs once and shutting the workers down
    after; the summary equals the one-process run's ("off", None, one usable core, a busy machine, a
    smaller run, a byte short of SMALL_RUN_BYTES, too few files for two workers' tasks)."""
    from quicsm.traces import inputs
    from quicsm.traces.summary import summarize

    fleet_dir = make_fleet_dir(tmp_path)
    size = sum(p.stat().st_size for p in fleet_dir.iterdir())
    expanded: list[int] = []
    real_expand = inputs.expand_inputs
    monkeypatch.setattr(inputs, "expand_inputs", lambda *a: expanded.append(1) or real_expand(*a))
    pool.close_pools()
    two = summarize([fleet_dir])
    assert auto == ["local:2"] and expanded == [1] and not pool._POOLS  # its own workers: shut down
    assert _same(summarize([fleet_dir], dask="off"), two) and auto[-1] is None
    assert _same(summarize([fleet_dir], dask=None), two) and auto[-1] is None
    with monkeypatch.context() as m:
        m.setattr(machine, "runnable", lambda: 2)  # another process runs on the second core
        assert _same(summarize([fleet_dir]), two) and auto[-1] is None
        m.setattr(machine, "runnable", lambda: 1)
        m.setattr(os, "sched_getaffinity", lambda pid: {0})
        assert _same(summarize([fleet_dir]), two) and auto[-1] is None
    monkeypatch.setattr(inputs, "SMALL_RUN_FILES", 7)
    assert _same(summarize([fleet_dir]), two) and auto[-1] is None
    monkeypatch.setattr(inputs, "TASKS_PER_WORKER", 3)
    monkeypatch.setattr(inputs, "SMALL_RUN_BYTES", size)
    assert _same(summarize([fleet_dir]), two) and auto[-1] == "local:2"  # few files, but enough bytes and tasks
    monkeypatch.setattr(inputs, "SMALL_RUN_BYTES", size + 1)
    assert _same(summarize([fleet_dir]), two) and auto[-1] is None
    monkeypatch.setattr(inputs, "TASKS_PER_WORKER", 4)  # enough bytes, too few files for 2 x 4 tasks
    monkeypatch.setattr(inputs, "SMALL_RUN_BYTES", 1)
    assert _same(summarize([fleet_dir]), two) and auto[-1] is None
    assert inputs.workers_for("auto", ["-"]) is None and inputs.workers_for("auto", ["s3://b/k.qlog"] * 9) is None
    examples = doctest.DocTestFinder(recurse=False).find(workers_for, "workers_for")  # the real one
    runner = doctest.DocTestRunner()
    for t in examples:
        runner.run(t)
    assert runner.summarize(verbose=False) == (0, 2)  # its docstring's example holds


def test_auto_keeps_one_process_where_workers_would_be_spawned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, auto: list[str | None], thread_running: None
) -> None:
    """With another thread running (a notebook's, an fsspec loop) workers cannot be forked, and spawned
    ones start Python and import quicsm each (seconds): "auto" stays in one process then."""
    from quicsm.traces.summary import summarize

    monkeypatch.setattr(machine, "forks", forks)  # the real one
    fleet_dir = make_fleet_dir(tmp_path)
    assert _same(summarize([fleet_dir]), summarize([fleet_dir], dask="off")) and auto == [None, None]


def test_summarize_errors_on_two_workers_name_what_was_given(tmp_path: Path, auto: list[str | None]) -> None:
    """On the workers "auto" chose, errors read as in one process: a strict failure names the file and
    line, and inputs without a transition are named as the user gave them (the pattern, not its files)."""
    from quicsm.errors import NoTransitionsError
    from quicsm.traces.summary import summarize

    fleet_dir = make_fleet_dir(tmp_path)
    bad = fleet_dir / "server1.log"
    bad.write_text(bad.read_text() + "QUICSM v=1 conn=0x9 t_us=oops cc=cubic to=SlowStart\n")
    said = []
    for dask in ("auto", "off"):
        with pytest.raises(ParseError) as err:
            summarize([fleet_dir], strict=True, dask=dask)
        said.append(str(err.value).split(" (on local worker process ")[0])
    assert auto == ["local:2", None] and said[0] == said[1] and said[0].startswith(f"{bad}:"), said
    plain = tmp_path / "plain"
    plain.mkdir()
    for i in range(6):
        (plain / f"p{i}.log").write_text("no contract line here\n")
    pattern = str(plain / "p*.log")
    for dask in ("auto", "off"):
        with pytest.raises(NoTransitionsError, match=re.escape(f"no state transitions found in {pattern};")):
            summarize([pattern], dask=dask)
    assert auto[-2:] == ["local:2", None]
    with pytest.raises(NoTransitionsError, match=re.escape(f"no state transitions found in {plain};")):
        summarize([plain])  # a path-like, named as given


def test_infer_learns_on_the_library_default(tmp_path: Path, auto: list[str | None]) -> None:
    """``quicsm infer`` without --dask is ``summarize``'s default ("auto"): local:2 here, the model byte
    for byte the one of --dask off but for its timing, a strict failure named alike."""
    import json

    fleet_dir = make_fleet_dir(tmp_path)

    def model(*extra: str) -> dict:
        out = tmp_path / f"m{len(auto)}.json"
        res = CliRunner().invoke(cli, ["infer", str(fleet_dir), "-o", str(out), *extra])
        assert res.exit_code == 0, res.output
        got = json.loads(out.read_bytes())
        del got["meta"]["inference_seconds"]
        return got

    assert model() == model("--dask", "off") and auto == ["local:2", None]
    assert model("--dask", "auto") == model("--dask", "local:2") and auto[-2:] == ["local:2", "local:2"]
    bad = fleet_dir / "server1.log"
    bad.write_text(bad.read_text() + "QUICSM v=1 conn=0x9 t_us=oops cc=cubic to=SlowStart\n")
    said = []
    for extra in ([], ["--dask", "off"]):
        res = CliRunner().invoke(cli, ["infer", str(fleet_dir), "--strict", "-o", str(tmp_path / "x.json"), *extra])
        assert res.exit_code != 0 and f"{bad}:" in res.output, res.output
        said.append(res.output.split(" (on local worker process ")[0].strip())
    assert auto[-2:] == ["local:2", None] and said[0] == said[1], said
