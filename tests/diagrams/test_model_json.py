"""The model JSON (docs/model-format.md): lossless round trip, invariants, clear errors for bad files."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from annotate_oracle import annotate
from diagram_fixtures import make_model, make_traces, model_of
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.errors import InputError
from quicsm.inference import infer_sequences
from quicsm.inference.annotate import AnnotatedModel, load_model, save_model
from quicsm.traces.events import StateView, Trace, TraceEvent


def test_round_trip_is_lossless() -> None:
    am = make_model(25, seed=31)
    back = AnnotatedModel.from_json(am.to_json())
    assert back == am
    assert back.to_json() == am.to_json()
    assert back.model.edges == am.model.edges and back.model.params == am.model.params


def test_save_and_load_through_files_stdin_and_gzip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    am = model_of(make_traces(10, seed=32), meta={"cc": "cubic", "labels": {"client": "mobile"}, "version": "v0.43"})
    path = tmp_path / "sub" / "model.json"
    save_model(am, str(path))
    assert load_model(str(path)) == am
    assert [p.name for p in path.parent.iterdir()] == ["model.json"]
    text = path.read_text()
    save_model(load_model(str(path)), str(path))
    assert path.read_text() == text
    gz = tmp_path / "model.json.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert load_model(str(gz)) == am


def _states_to_traces(seqs: list[list[str]], gaps: list[int]) -> list[Trace]:
    traces = []
    for i, seq in enumerate(seqs):
        t, events, prev = 0, [], "Init"
        for j, s in enumerate(seq):
            t += gaps[(i + j) % len(gaps)]
            events.append(TraceEvent(t, s, prev=prev))
            prev = s
        events.append(TraceEvent(t + gaps[i % len(gaps)], prev, kind="close"))
        traces.append(Trace(f"t{i}", "cubic", events))
    return traces


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(["SlowStart", "CongestionAvoidance", "Recovery", "ApplicationLimited"]),
            min_size=1,
            max_size=8,
        ),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.integers(0, 10**6), min_size=1, max_size=5),
)
def test_any_annotated_model_round_trips_and_keeps_invariants(seqs: list[list[str]], gaps: list[int]) -> None:
    traces = _states_to_traces(seqs, gaps)
    view = StateView()
    am = annotate(infer_sequences([t.states(view) for t in traces], "dfg"), traces, view)
    data = json.loads(json.dumps(am.to_json()))
    back = AnnotatedModel.from_json(data)
    assert back == am
    assert sum(n["time_fraction"] for n in data["nodes"] if n["kind"] == "state") == pytest.approx(1.0)


Mutation = Callable[[dict[str, Any]], None]


def _node(data: dict[str, Any], state: str) -> dict[str, Any]:
    return next(n for n in data["nodes"] if n["state"] == state)


def _set(path: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *head, last = path.split(".")
        target: Any = data
        for key in head:
            target = target[int(key)] if key.isdigit() else target[key]
        target[int(last) if last.isdigit() else last] = value

    return mutate


def _scale_share(data: dict[str, Any]) -> None:
    _node(data, "SlowStart")["time_fraction"] += 0.1


def _prob_off(data: dict[str, Any]) -> None:
    data["edges"][1]["probability"] *= 0.5


def _swap_probs(data: dict[str, Any]) -> None:
    """Two edges of one node trade probabilities: sums still 1, but no longer count / outgoing."""
    by_src: dict[int, list[dict[str, Any]]] = {}
    for e in data["edges"]:
        by_src.setdefault(e["src"], []).append(e)
    a, b = next(es for es in by_src.values() if len(es) > 1 and es[0]["count"] != es[1]["count"])[:2]
    a["probability"], b["probability"] = b["probability"], a["probability"]


def _second_initial(data: dict[str, Any]) -> None:
    data["nodes"][1].update(state="INITIAL", kind="initial", initial=True, time_fraction=0.0)


def _edge_into_initial(data: dict[str, Any]) -> None:
    data["edges"][1]["dst"] = 0


def _duplicate_edge(data: dict[str, Any]) -> None:
    data["edges"].append(dict(data["edges"][0]))


def _drop(key: str) -> Mutation:
    return lambda data: data.pop(key)


BAD: list[tuple[str, Mutation, str]] = [
    ("format", _set("format", "quicsm-trace"), r"format: expected 'quicsm-model'"),
    ("version", _set("format_version", 99), r"format_version: 99 is newer"),
    ("missing nodes", _drop("nodes"), r"bad.json: nodes: required key missing"),
    ("traces not int", _set("traces", "many"), r"traces: expected `int`, got `str`"),
    ("bool as int", _set("events", True), r"events: expected `int`, got `bool`"),
    ("node id", _set("nodes.2.id", 7), r"nodes\[2\]\.id: is 7"),
    ("share range", _set("nodes.2.time_fraction", 1.7), r"nodes\[2\]\.time_fraction: expected `float` <= 1\.0"),
    ("share sum", _scale_share, r"nodes: time_fraction over state nodes sums to 1\.1"),
    ("kind", _set("nodes.2.kind", "initial"), r"nodes\[2\]\.kind: is \"initial\" but state"),
    ("negative visits", _set("nodes.3.visits", -1), r"nodes\[3\]\.visits: expected `int` >= 0"),
    ("total time", _set("total_time_us", 5), r"total_time_us: 5 is not the sum"),
    ("two INITIAL", _second_initial, r"need exactly one INITIAL node, found 2"),
    ("edge to nowhere", _set("edges.0.dst", 99), r"edges\[0\]\.dst: node 99 does not exist"),
    ("edge into INITIAL", _edge_into_initial, r"edges\[1\]: edge .* enters INITIAL"),
    ("duplicate edge", _duplicate_edge, r"duplicate edge"),
    ("zero count", _set("edges.0.count", 0), r"edges\[0\]\.count: expected `int` >= 1"),
    ("probability sum", _prob_off, r"edges: probabilities out of node \d+ \(\w+\) sum to 0\.\d+, not 1"),
    ("probability vs count", _swap_probs, r"edges\[\d+\]\.probability: .* is not count/outgoing"),
]


@pytest.mark.parametrize("name,mutate,message", BAD, ids=[b[0] for b in BAD])
def test_bad_model_files_are_refused_naming_file_and_field(
    tmp_path: Path, name: str, mutate: Mutation, message: str
) -> None:
    data = copy.deepcopy(make_model(12, seed=33).to_json())
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data, indent=2))
    with pytest.raises(InputError, match=message) as info:
        load_model(str(path))
    assert str(info.value).startswith(f"{path}: ")


def test_probabilities_out_of_a_node_must_sum_to_one() -> None:
    data = make_model(12, seed=34).to_json()
    src = next(e["src"] for e in data["edges"] if data["nodes"][e["src"]]["state"] == "SlowStart")
    for e in data["edges"]:
        if e["src"] == src:
            e["probability"] *= 0.9
    with pytest.raises(
        InputError, match=rf"^model\.json: edges: probabilities out of node {src} \(SlowStart\) sum to 0\.9"
    ):
        AnnotatedModel.from_json(data, source="model.json")


def test_not_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "format": "quicsm-model",\n  "nodes": [,]\n}\n')
    with pytest.raises(InputError, match=rf"{path}:3: not valid JSON"):
        load_model(str(path))
    with pytest.raises(InputError, match="no such file"):
        load_model(str(tmp_path / "absent.json"))
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(InputError, match="not a model JSON file"):
        load_model(str(path))
    with pytest.raises(InputError, match="must hold a JSON object"):
        AnnotatedModel.from_json([1, 2], source="list.json")
