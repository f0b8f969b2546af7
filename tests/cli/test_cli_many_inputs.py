"""Inputs at fleet scale from the command line: --files-from, -q still naming problem files, --report,
paths a remote cluster cannot see refused, a run too small for Dask said, compare JSON saying what it skipped."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.errors import InputError
from quicsm.traces.contract import format_line
from quicsm.traces.inputs import file_batches


def _logs(tmp_path: Path, n: int = 6) -> list[Path]:
    out = []
    for i in range(n):
        p = tmp_path / f"h{i % 2}" / f"s{i}.log"
        p.parent.mkdir(parents=True, exist_ok=True)
        lines = [
            format_line(conn="a", t_us=1, cc="cubic", frm="Init", to="SlowStart"),
            format_line(conn="a", t_us=50 + i, cc="cubic", frm="SlowStart", to="CongestionAvoidance"),
        ]
        p.write_text("\n".join(lines) + "\n")
        out.append(p)
    return out


def test_files_from_a_list_and_stdin_equal_the_arguments(tmp_path: Path) -> None:
    logs = _logs(tmp_path)
    listing = tmp_path / "list.txt"
    listing.write_text("\n".join(str(p) for p in logs) + "\n\n")
    runs = {
        "args": CliRunner().invoke(cli, ["infer", *map(str, logs), "-o", str(tmp_path / "a.json"), "-q"]),
        "list": CliRunner().invoke(cli, ["infer", "--files-from", str(listing), "-o", str(tmp_path / "b.json"), "-q"]),
        "stdin": CliRunner().invoke(
            cli, ["infer", "--files-from", "-", "-o", str(tmp_path / "c.json"), "-q"], input=listing.read_text()
        ),
    }
    for r in runs.values():
        assert r.exit_code == 0, r.output
    models = [json.loads((tmp_path / f"{x}.json").read_text()) for x in "abc"]
    for m in models:
        m["meta"].pop("inference_seconds")
    assert models[0] == models[1] == models[2] and models[0]["traces"] == 6
    r = CliRunner().invoke(cli, ["infer", "-o", str(tmp_path / "d.json")])
    assert r.exit_code != 0 and "--files-from" in r.output


def test_quiet_still_names_problem_files_and_report_is_written(tmp_path: Path) -> None:
    logs = _logs(tmp_path)
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(logs[0].read_bytes() * 50)[:-30])  # truncated gzip
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"\x00\x01garbage" * 100)
    report = tmp_path / "report.json"
    r = CliRunner().invoke(
        cli,
        ["infer", *map(str, logs), str(cut), str(junk), "-q", "-o", str(tmp_path / "m.json"), "--report", str(report)],
    )
    assert r.exit_code == 0, r.output
    assert str(cut) in r.output and str(junk) in r.output
    data = json.loads(report.read_text())
    assert data["files"] == 8 and data["issues_total"] >= 2
    assert {i["path"] for i in data["issues"]} >= {str(cut), str(junk)}


def test_relative_paths_are_refused_for_a_remote_cluster_not_a_local_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _logs(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="workers of tcp://sched:8786 run in their own directory"):
        file_batches(["h0/s0.log"], dask="tcp://sched:8786")
    assert [b.files for b in file_batches(["h0/s0.log", "h1/s1.log"], dask="local:2")] == [
        ("h0/s0.log",),
        ("h1/s1.log",),
    ]


def test_batches_keep_order_and_whole_run_scopes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = [str(p) for p in _logs(tmp_path, 9)]
    batches = file_batches(logs, dask="tcp://sched:8786", max_files=4)
    assert [f for b in batches for f in b.files] == logs and [len(b.files) for b in batches] == [4, 4, 1]
    assert batches[0].scopes[0] == "s0.log"
    assert [len(b.files) for b in file_batches(logs, dask="tcp://sched:8786")] == [9]
    capsys.readouterr()
    local = file_batches(logs, dask="local:2")  # local:N: at least TASKS_PER_WORKER tasks a worker
    assert [b.files for b in local] == [(p,) for p in logs] and local[3].scopes == ("s3.log",)
    assert "a run this small" in capsys.readouterr().err


def test_many_small_files_are_cut_by_count_from_a_sample_of_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over SIZE_SAMPLE files, a sample is stat-ed; files that small are cut by count (no stat a file)
    into tasks that say no size, so progress counts files; larger ones are still cut by size. A run
    of SMALL_RUN_FILES files or more is not called too small, however few its bytes."""
    from quicsm.traces import inputs

    logs = [str(p) for p in _logs(tmp_path, 1200)]
    size = os.path.getsize(logs[0])
    monkeypatch.setattr(inputs, "SMALL_RUN_FILES", 1201)
    file_batches(logs, dask="local:2")
    assert "a run this small" in capsys.readouterr().err
    monkeypatch.setattr(inputs, "SMALL_RUN_FILES", 1200)
    counted = file_batches(logs, dask="local:2")
    assert "a run this small" not in capsys.readouterr().err
    assert [len(b.files) for b in counted] == [75] * 16 and {b.bytes for b in counted} == {0}
    assert [f for b in counted for f in b.files] == logs
    assert [len(b.files) for b in file_batches(logs, dask="local:3")] == [50] * 24
    by_size = file_batches(logs, dask="tcp://sched:8786", target_bytes=100 * size)
    assert {len(b.files) for b in by_size[:-1]} <= set(range(95, 101)) and sum(b.bytes for b in by_size) > 1000 * size


def test_compare_json_records_skipped_records(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d, seed in ((a, 0), (b, 1)):
        d.mkdir()
        for p in _logs(tmp_path / f"src{seed}", 6):
            (d / p.name).write_bytes(p.read_bytes())
    (a / "s0.log").write_text((a / "s0.log").read_text() + "QUICSM v=1 conn=z t_us=oops cc=cubic to=SlowStart\n")
    out = tmp_path / "c.json"
    r = CliRunner().invoke(
        cli, ["compare", str(a), str(b), "--format", "json", "-o", str(out), "-q", "--bootstrap", "0"]
    )
    assert r.exit_code == 0, r.output
    sets = json.loads(out.read_text())["sets"]
    assert sets[0]["skipped"] == {"records": 1, "files": []} and "skipped" not in sets[1]
