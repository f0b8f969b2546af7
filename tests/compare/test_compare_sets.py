"""Choosing trace sets: directories, globs, selectors, grouping by label."""

from __future__ import annotations

from pathlib import Path

import pytest
from compare_fixtures import make_traces, write_contract_log

from quicsm.compare.sets import (
    TraceSet,
    expand_set,
    parse_selector,
    sets_by_label,
    sets_from_inputs,
    sets_from_selectors,
)
from quicsm.errors import InputError


def test_directory_takes_logs_not_sidecars_or_stderr(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    write_contract_log(run / "server.log", make_traces("x", 2, 0.2, seed=1))
    for name in ("meta.json", "relay.json", "server.stderr"):
        (run / name).write_text("{}")
    (run / "old.log.gz").write_bytes(b"")
    assert [Path(p).name for p in expand_set(str(tmp_path / "runs"))] == ["old.log.gz", "server.log"]
    with pytest.raises(InputError, match="holds no log"):
        (tmp_path / "empty").mkdir()
        expand_set(str(tmp_path / "empty"))


def test_globs_and_missing_files(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"s{i}.log").write_text("")
    assert len(expand_set(str(tmp_path / "s*.log"))) == 3
    with pytest.raises(InputError, match="no file matches"):
        expand_set(str(tmp_path / "q*.log"))
    with pytest.raises(InputError, match="no such file"):
        expand_set(str(tmp_path / "q.log"))


def test_set_names_from_paths_are_unique(tmp_path: Path) -> None:
    for d in ("a/desktop", "b/desktop"):
        (tmp_path / d).mkdir(parents=True)
        write_contract_log(tmp_path / d / "server.log", make_traces("x", 2, 0.2, seed=1))
    sets = sets_from_inputs([str(tmp_path / "a/desktop"), str(tmp_path / "b/desktop")])
    assert [s.name for s in sets] == ["desktop", "desktop#2"]
    assert all(len(s) == 2 for s in sets)


def test_selectors_and_grouping() -> None:
    pool = TraceSet.from_traces(
        "all",
        [
            *make_traces("d", 3, 0.1, seed=1, labels={"client": "desktop", "rate": "50"}),
            *make_traces("m", 4, 0.5, seed=2, labels={"client": "mobile", "rate": "50"}),
            *make_traces("m10", 2, 0.5, seed=3, labels={"client": "mobile", "rate": "10"}),
        ],
    )
    assert parse_selector("client=mobile, rate=10") == {"client": "mobile", "rate": "10"}
    with pytest.raises(InputError, match="not KEY=VALUE"):
        parse_selector("client")
    a, b = sets_from_selectors(pool, [{"client": "desktop"}, {"client": "mobile", "rate": "50"}])
    assert (a.name, len(a), b.name, len(b)) == ("client=desktop", 3, "client=mobile,rate=50", 4)
    groups = sets_by_label(pool, "rate", order=["50"])
    assert [(g.name, len(g)) for g in groups] == [("rate=50", 7), ("rate=10", 2)]
    assert [g.name for g in sets_by_label(pool, "cc")] == ["cc=cubic"]
    with pytest.raises(InputError, match="no trace has label"):
        sets_by_label(pool, "colour")
