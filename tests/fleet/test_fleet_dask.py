"""``--dask``: two local worker processes (``local:2``) and a real two-worker Dask cluster reached by
address give byte-identical output."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fleet_fixtures import make_fleet_dir

from quicsm.cli.main import cli

fleet_dir = pytest.fixture(name="fleet_dir")(make_fleet_dir)

pytest.importorskip("distributed")


@pytest.fixture(autouse=True, scope="module")
def _workers_import_this_tree() -> Iterator[None]:
    root = str(Path(__file__).resolve().parents[2])
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([root, old or ""])
    yield
    if old is None:
        del os.environ["PYTHONPATH"]
    else:
        os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def scheduler(_workers_import_this_tree: None) -> Iterator[str]:
    """An existing two-worker cluster, reached by address as a real one would be (started once: workers are slow)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=40) as cluster:
        yield cluster.scheduler_address


def _run(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(cli, args)
    return res.exit_code, res.output


def _model(path: Path) -> dict:
    d = json.loads(path.read_text())
    d["meta"].pop("inference_seconds")
    return d


def test_dask_local_cluster_matches_local_run(fleet_dir: Path, tmp_path: Path) -> None:
    local, remote = tmp_path / "local.json", tmp_path / "dask.json"
    code, out = _run(["infer", str(fleet_dir), "-o", str(local), "-q"])
    assert code == 0, out
    code, out = _run(["infer", str(fleet_dir), "-o", str(remote), "-q", "--dask", "local:2", "--progress"])
    assert code == 0, out
    assert "dask: reduced: 6/6 files" in out and "\r" not in out  # a line per step off a terminal
    assert _model(local) == _model(remote)
    assert _model(local)["traces"] == 240 and _model(local)["sources"] == 6


def test_dask_strict_names_the_corrupt_file(fleet_dir: Path, tmp_path: Path, scheduler: str) -> None:
    bad = fleet_dir / "server7.log"
    bad.write_text("QUICSM v=1 conn=0x1 t_us=1 cc=cubic to=SlowStart\nQUICSM v=1 conn=0x1 t_us=oops cc=cubic to=X\n")
    out_path = tmp_path / "m.json"
    code, out = _run(["infer", str(fleet_dir), "-o", str(out_path), "--strict", "--dask", scheduler])
    assert code != 0 and f"{bad}:2:" in out and "Traceback" not in out
    assert not out_path.exists()
    # not strict: the record is counted and reported with file and line, the rest is used
    code, out = _run(["infer", str(fleet_dir), "-o", str(out_path), "--dask", scheduler])
    assert code == 0 and f"{bad}:2:" in out


def test_dask_truncated_gzip_is_reported_by_file(fleet_dir: Path, tmp_path: Path, scheduler: str) -> None:
    cut = fleet_dir / "cut.log.gz"
    cut.write_bytes(gzip.compress(b"QUICSM v=1 conn=0x1 t_us=1 cc=cubic to=SlowStart\n" * 2000)[:300])
    code, out = _run(["infer", str(fleet_dir), "-o", str(tmp_path / "m.json"), "--dask", scheduler])
    assert code == 0 and f"{cut}:" in out and "truncated" in out
    code, out = _run(["infer", str(fleet_dir), "-o", str(tmp_path / "s.json"), "--dask", scheduler, "--strict"])
    assert code != 0 and f"{cut}:" in out and "Traceback" not in out
    assert not (tmp_path / "s.json").exists()


def test_bad_scheduler_spec(fleet_dir: Path) -> None:
    code, out = _run(["infer", str(fleet_dir), "--dask", "local:zero"])
    assert code != 0 and "worker count" in out


def test_dask_parse_writes_the_same_traces(tmp_path: Path, scheduler: str) -> None:
    from fleet_fixtures import fleet_lines

    for d in ("a", "b"):  # same file names in two directories: ids must be scoped as in a local run
        (tmp_path / d).mkdir()
        for i in range(2):
            (tmp_path / d / f"s{i}.log").write_text("".join(line + "\n" for line in fleet_lines(20, i + ord(d))))
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    code, out = _run(["parse", *dirs, "-o", str(tmp_path / "local.jsonl"), "-q"])
    assert code == 0, out
    code, out = _run(["parse", *dirs, "-o", str(tmp_path / "dask.jsonl"), "-q", "--dask", scheduler])
    assert code == 0, out
    local = (tmp_path / "local.jsonl").read_bytes()
    assert local == (tmp_path / "dask.jsonl").read_bytes()
    assert b'"id":"a/s0.log:' in local and b'"id":"b/s0.log:' in local


def test_dask_parse_to_a_store_builds_row_groups_on_workers(tmp_path: Path, scheduler: str) -> None:
    """``parse --dask -o x.parquet``: each file's row groups are made on a worker (columns for logs and
    stores, objects for qlogs) and written in input order; the store holds the local run's traces, the
    summary line and the selectors agree, and a failing file leaves no store behind."""
    from fleet_fixtures import fleet_lines

    from quicsm.traces.store import read_traces

    root = Path(__file__).resolve().parents[2] / "tests" / "data"
    # a qlog whose states are logged (metric-only files may be refused under --strict: quinn's BBR)
    qlogs = sorted(str(p) for p in root.rglob("*.sqlog.gz") if "metric-only" not in p.parts)[:1]
    assert qlogs
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        for i in range(2):
            (tmp_path / d / f"s{i}.log").write_text("".join(line + "\n" for line in fleet_lines(20, i + ord(d))))
    first = tmp_path / "first.parquet"
    assert _run(["parse", str(tmp_path / "a"), "-o", str(first), "-q", "--label", "client=mobile"])[0] == 0
    inputs = [str(tmp_path / "a"), *qlogs, str(first), str(tmp_path / "b")]
    for extra in ([], ["--where", "cc=cubic"], ["--label", "client=desktop"]):
        local, remote = tmp_path / "local.parquet", tmp_path / "dask.parquet"
        code, out_local = _run(["parse", *inputs, "-o", str(local), *extra])
        assert code == 0, out_local
        code, out = _run(["parse", *inputs, "-o", str(remote), "--dask", scheduler, *extra])
        assert code == 0, out
        got, want = read_traces(str(remote)), read_traces(str(local))
        assert len(want) > 40 and got == want
        said = [line for line in out.splitlines() if not line.startswith("warning: --dask on")]  # too small a run
        assert out_local.splitlines()[0] == said[0]  # the parse summary
    bad = tmp_path / "b" / "s1.log"
    bad.write_text(bad.read_text() + "QUICSM v=1 conn=0x9 t_us=oops cc=cubic to=SlowStart\n")
    remote.unlink()
    code, out = _run(["parse", *inputs, "-o", str(remote), "--strict", "--dask", scheduler])
    assert code != 0 and f"{bad}:" in out and "Traceback" not in out and not remote.exists(), out
    code, out = _run(["parse", *inputs, "-o", str(remote), "--where", "cc=nope", "--dask", scheduler])
    assert code != 0 and "no trace matches" in out and not remote.exists(), out


def test_dask_compare_json_is_identical(tmp_path: Path, scheduler: str) -> None:
    from fleet_fixtures import fleet_lines

    for d, seed in (("a", 1), ("b", 50)):
        (tmp_path / d).mkdir()
        for i in range(3):
            (tmp_path / d / f"s{i}.log").write_text("".join(line + "\n" for line in fleet_lines(30, seed + i)))
    sets = [str(tmp_path / "a"), str(tmp_path / "b")]
    local, remote = tmp_path / "local.json", tmp_path / "dask.json"
    code, out = _run(["compare", *sets, "--format", "json", "-o", str(local), "-q"])
    assert code == 0, out
    code, out = _run(["compare", *sets, "--format", "json", "-o", str(remote), "-q", "--dask", scheduler])
    assert code == 0, out
    assert json.loads(local.read_text())  # a real report, not an empty file
    assert local.read_bytes() == remote.read_bytes()
    bad = tmp_path / "a" / "s1.log"  # a corrupt file: reported by name and line on workers too
    bad.write_text(bad.read_text() + "QUICSM v=1 conn=0x9 t_us=oops cc=cubic to=SlowStart\n")
    code, out = _run(["compare", *sets, "--format", "json", "-o", str(remote), "--dask", scheduler])
    assert code == 0 and f"{bad}:" in out and "skipped 1 problem record(s)" in out, out
    remote.unlink()
    code, out = _run(["compare", *sets, "--format", "json", "-o", str(remote), "-q", "--strict", "--dask", scheduler])
    assert code != 0 and f"{bad}:" in out and not remote.exists(), out


def test_a_task_without_result_stops_the_run_with_one_line(
    scheduler: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A worker that never answers (frozen, lost behind a dead network): the client once waited for ever."""
    import time

    from quicsm.errors import InputError
    from quicsm.fleet.run import map_tasks

    monkeypatch.setenv("QUICSM_TASK_TIMEOUT", "4")
    started = time.monotonic()
    with pytest.raises(InputError, match=rf"--dask {scheduler}: no result for 60 in 4 s"):
        list(map_tasks(time.sleep, [60], dask=scheduler))
    assert time.monotonic() - started < 40
    assert "waiting" in capsys.readouterr().err


def test_a_scheduler_killed_mid_run_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from distributed import LocalCluster

    from quicsm.errors import InputError
    from quicsm.fleet.cluster import close_clients
    from quicsm.fleet.run import map_tasks

    monkeypatch.setenv("QUICSM_TASK_TIMEOUT", "60")
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0", silence_logs=50)
    address = cluster.scheduler_address
    try:
        threading.Timer(3.0, cluster.close).start()
        with pytest.raises(InputError, match=rf"--dask {address}: lost the cluster"):
            list(map_tasks(time.sleep, [1.0] * 30, dask=address))
    finally:
        close_clients()
        cluster.close()
