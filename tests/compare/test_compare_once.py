"""compare() returns a finished result and reads each input once: the report writers learn no model and
open no input; the connections a report draws keep the events of the one read, the same traces a
second read gives."""

from __future__ import annotations

import builtins
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.compare import CompareOptions, build_sets, compare
from quicsm.compare import comparison as comparison_module
from quicsm.compare import sets as sets_module
from quicsm.compare.figures import diff_dot
from quicsm.compare.html import to_html
from quicsm.compare.sets import _from_batches, _read_back, load_rows
from quicsm.traces import parse_inputs
from quicsm.traces.store import write_traces

ROOT = Path(__file__).resolve().parents[2]
FIG13 = ROOT / "traces" / "fig13"
QLOGS = ROOT / "tests" / "data" / "qlog"


def _inputs(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and p.name != "meta.json")


def _counting(monkeypatch: pytest.MonkeyPatch, watched: set[str]) -> list[str]:
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def counting_open(file, *a, **kw):  # type: ignore[no-untyped-def]
        if isinstance(file, str) and os.path.abspath(file) in watched:
            opened.append(os.path.abspath(file))
        return real_open(file, *a, **kw)

    def counting_os_open(path, *a, **kw):  # type: ignore[no-untyped-def]
        if isinstance(path, str) and os.path.abspath(path) in watched:
            opened.append(os.path.abspath(path))
        return real_os_open(path, *a, **kw)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(os, "open", counting_os_open)
    return opened


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz not installed")
def test_compare_with_every_picture_opens_each_input_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README command 1's compare: 22 logs; with the HTML report (3 timelines a set), the side-by-side
    and the diff diagram, each log is opened once."""
    logs = {os.path.abspath(p) for p in _inputs(FIG13) if "server.log" in p}
    assert len(logs) == 22
    learnt: list[str] = []
    real_learn = comparison_module.learn
    monkeypatch.setattr(
        comparison_module, "learn", lambda s, engine, **kw: learnt.append(engine) or real_learn(s, engine, **kw)
    )
    opened = _counting(monkeypatch, logs)
    out = tmp_path / "out"
    args = [
        "compare",
        str(FIG13 / "desktop"),
        str(FIG13 / "mobile"),
        "-q",
        "--format",
        "json",
        "-o",
        str(out / "c.json"),
    ]
    res = CliRunner().invoke(
        cli,
        [*args, "--html", str(out / "r.html"), "--diagram", str(out / "s.svg"), "--diff-diagram", str(out / "d.svg")],
    )
    monkeypatch.undo()
    assert res.exit_code == 0, res.output
    assert sorted(opened) == sorted(logs)  # once each
    assert learnt == ["synoptic", "synoptic", "dfg"]  # the two sets' models and the pair's union, once
    assert (out / "r.html").read_text().count('class="timeline"') == 6


def test_writers_learn_nothing_and_read_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    sets = build_sets([str(FIG13 / "desktop"), str(FIG13 / "mobile")], metrics=True)
    c = compare(sets, CompareOptions(resamples=0, engine="dfg", timelines=2))
    assert set(c.unions) == {("desktop", "mobile")} and [len(v) for v in c.timelines.values()] == [2, 2]
    assert all(any(e.cwnd is not None for e in t.events) for ts in c.timelines.values() for t in ts)

    def refuse(*a, **kw):  # type: ignore[no-untyped-def]
        raise AssertionError("a writer learnt a model or read an input")

    monkeypatch.setattr(comparison_module, "learn", refuse)
    monkeypatch.setattr("quicsm.traces.parse.read_inputs", refuse)
    monkeypatch.setattr(builtins, "open", refuse)
    assert "digraph" in diff_dot(c, c.pairs[0])
    if shutil.which("dot"):
        assert to_html(c).count('class="timeline"') == 4


def test_events_kept_from_the_one_read_are_the_events_read_back(tmp_path: Path) -> None:
    """Logs, qlogs, and trace files: the connections a report draws, from the batches kept while the
    set was read, equal the traces a second read of their files gives."""
    from quicsm.traces.inputs import trace_scopes

    traces = parse_inputs([str(FIG13 / "mobile")]).traces
    write_traces(traces, str(tmp_path / "t.jsonl"))
    write_traces(traces, str(tmp_path / "t.parquet"))
    for inputs in ([str(FIG13)], _inputs(QLOGS), [str(tmp_path / "t.jsonl")], [str(tmp_path / "t.parquet")]):
        ts = load_rows(inputs, metrics=True)
        assert ts.fetch is not None and ts.fetch.func is _from_batches  # type: ignore[attr-defined]
        rows = [r for r in ts.rows if r.has_cwnd]
        kept = ts.with_events(rows)
        back = _read_back(rows, ts.sources, trace_scopes(list(ts.sources)), None)
        order = [r.id for r in rows]
        assert len(kept) == len(rows) > 0
        assert kept == sorted(back, key=lambda t: order.index(t.id)), inputs


def test_a_set_too_large_to_keep_reads_the_chosen_connections_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sets_module, "KEEP_EVENTS", 100)
    ts = load_rows([str(FIG13 / "desktop")], metrics=True)
    assert ts.fetch is not None and ts.fetch.func is _read_back  # type: ignore[attr-defined]
    assert len(ts.timeline_traces(2)) == 2


def test_flow_runs_read_each_flow_log_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """IMC'17 Table 4 runs: the fairness view's traces come from the flows' sets, not a second read."""
    from quicsm.compare.fairness import compare_flow_runs

    runs = sorted(str(p) for p in (ROOT / "traces" / "table4" / "quicgo-tcp2").iterdir())[:3]
    logs = {os.path.abspath(p) for r in runs for p in _inputs(Path(r)) if "server.log" in p}
    assert len(logs) == 9
    opened = _counting(monkeypatch, logs)
    fc = compare_flow_runs(runs, CompareOptions(resamples=0, engine="dfg"))
    monkeypatch.undo()
    assert sorted(opened) == sorted(logs)  # once each
    assert fc.comparison is not None and all(f.trace is not None for r in fc.runs for f in r.flows)
