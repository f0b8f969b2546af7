"""The summary path gives the same annotated model as annotating every trace, for every engine and view.

The oracle annotates every trace object (tests/annotate_oracle.py); quicsm learns
from summaries only (:func:`quicsm.pipeline.learn`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_fixtures import make_fleet_dir

from quicsm.compare.stays import connections, rows_summary
from quicsm.pipeline import learn
from quicsm.traces import parse_inputs
from quicsm.traces.events import StateView, Trace
from quicsm.traces.summary import Summary
from quicsm.traces.summary import summarize as summarize_inputs


def per_trace(traces: list[Trace], engine: str, view: StateView) -> object:
    """The oracle: the model annotated trace by trace."""
    from collections import Counter

    from annotate_oracle import annotate, infer

    stays = [t.visits(view) for t in traces]
    result = infer(traces, engine, view, sequences=[[v.state for v in s] for s in stays])
    meta: dict[str, object] = {}
    for key in ("cc", "implementation", "version"):
        values = Counter(str(getattr(t, key)) for t in traces if getattr(t, key))
        if values:
            meta[key] = ", ".join(sorted(values))
    common = dict(traces[0].labels)
    for t in traces[1:]:
        common = {k: v for k, v in common.items() if t.labels.get(k) == v}
    if common:
        meta["labels"] = common
    meta["inference_seconds"] = 0.0
    return annotate(result, traces, view, meta=meta, stays_per_trace=stays)


fleet_dir = pytest.fixture(name="fleet_dir")(make_fleet_dir)


def _model(am: object) -> dict:
    d = am.to_json()  # type: ignore[attr-defined]
    d["meta"].pop("inference_seconds")
    return d


@pytest.mark.parametrize("engine", ["synoptic", "ktails", "dfg"])
@pytest.mark.parametrize("view", [StateView(), StateView(phases=False)])
def test_summary_model_equals_per_trace_model(fleet_dir: Path, engine: str, view: StateView) -> None:
    traces = parse_inputs([str(fleet_dir)]).traces
    summary = summarize_inputs([str(fleet_dir)], view=view)
    assert summary.traces == len(traces) == 240
    assert len(summary.sequences) < summary.traces / 4  # bounded by distinct behaviour
    assert _model(learn(summary, engine)) == _model(per_trace(traces, engine, view))


@pytest.mark.parametrize("engine", ["synoptic", "ktails", "dfg"])
def test_model_from_stays_folds_repeats_and_equals_per_trace_model(fleet_dir: Path, engine: str) -> None:
    """compare learns from connection rows: repeated sequences are folded before the engine runs (the
    fleet has 240 connections and far fewer distinct sequences) and the model is unchanged."""
    view = StateView()
    traces = parse_inputs([str(fleet_dir)]).traces
    rows = connections(traces, view)
    assert len({r.states for r in rows}) < len(rows) / 4
    got = learn(rows_summary(rows, view), engine)
    assert _model(got) == _model(per_trace(traces, engine, view))


def test_merge_order_and_reports(fleet_dir: Path, tmp_path: Path) -> None:
    bad = fleet_dir / "server9.log"
    bad.write_text("QUICSM v=1 conn=0x1 t_us=oops cc=cubic to=SlowStart\n")
    s = summarize_inputs([str(fleet_dir)])
    assert s.report.files == 7 and s.report.total_issues == 1
    assert str(s.report.issues[0]).startswith(f"{bad}:1: ")
    files = sorted(str(p) for p in fleet_dir.iterdir())
    halves = [summarize_inputs(files[i::7], require_transitions=False) for i in range(7)]
    merged = Summary()
    for h in halves:
        merged.merge(h)
    assert list(merged.sequences) == list(s.sequences)
    assert {k: (v.count, v.durations_us) for k, v in merged.sequences.items()} == {
        k: (v.count, v.durations_us) for k, v in s.sequences.items()
    }


@pytest.mark.parametrize("fold_every", [1, 3, 50])
def test_summary_folded_as_it_goes_equals_one_fold_at_the_end(
    fleet_dir: Path, monkeypatch: pytest.MonkeyPatch, fold_every: int
) -> None:
    """Sequences are folded into the distinct ones every FOLD_EVERY traces (memory: the distinct few, not
    one a trace): the same sequences, counts, stays and events, in the same order, and the same model."""
    import numpy as np

    from quicsm.traces import summary as summary_module

    once = summarize_inputs([str(fleet_dir)])
    monkeypatch.setattr(summary_module, "FOLD_EVERY", fold_every)
    folded = summarize_inputs([str(fleet_dir)])
    a, b = once.packed(), folded.packed()
    assert once.names == folded.names and len(a) == len(b) < once.traces
    for field in ("codes", "offsets", "counts", "events", "durations_us"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    assert _model(learn(folded, "synoptic")) == _model(learn(once, "synoptic"))


@pytest.mark.parametrize("chunk, dense", [(1, True), (7, False), (1000, False)])
def test_annotation_in_chunks_equals_annotation_at_once(
    fleet_dir: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, dense: bool
) -> None:
    """Annotation sums over distinct paths a bounded number of steps at a time; the split must not show."""
    from quicsm.inference import annotate

    summary = summarize_inputs([str(fleet_dir)])
    whole = _model(learn(summary, "ktails"))
    monkeypatch.setattr(annotate, "_STEPS_PER_CHUNK", chunk)
    if not dense:
        monkeypatch.setattr(annotate, "_DENSE_CELLS", 0)
    assert _model(learn(summary, "ktails")) == whole
    assert whole["edges"] and whole["nodes"]
