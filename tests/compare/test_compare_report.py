"""Outputs of a comparison: JSON schema, CSV, Markdown, text, SVG figures and the HTML report."""

from __future__ import annotations

import csv
import io
import json
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from compare_fixtures import make_set, make_traces

from quicsm.compare import CompareOptions, TraceSet, compare
from quicsm.compare.html import heatmap, to_html
from quicsm.compare.report import CSV_COLUMNS, to_csv, to_json_text, to_markdown
from quicsm.compare.svg import timeline_svg

STATE_KEYS = {
    "state",
    "mean_a",
    "mean_b",
    "difference",
    "p_value",
    "p_corrected",
    "significant",
    "test",
    "statistic",
    "effect_size",
    "effect_measure",
    "n_a",
    "n_b",
    "visited_a",
    "visited_b",
    "note",
}
EDGE_KEYS = {
    "src",
    "dst",
    "prob_a",
    "prob_b",
    "difference",
    "p_value",
    "p_corrected",
    "significant",
    "test",
    "count_a",
    "count_b",
    "out_a",
    "out_b",
    "only_in",
    "note",
}


@pytest.fixture(scope="module")
def result():
    return compare(
        [make_set("desktop", 10, 0.08, seed=1), make_set("mobile", 10, 0.55, seed=2, recovery=False)],
        CompareOptions(resamples=200),
    )


def _no_nan(token: str) -> None:
    raise AssertionError(f"{token} in JSON")


def test_json_schema(result) -> None:
    text = to_json_text(result)
    d = json.loads(text, parse_constant=_no_nan)
    assert d["format"] == "quicsm-compare" and d["format_version"] == 1
    assert {s["name"] for s in d["sets"]} == {"desktop", "mobile"}
    assert d["options"]["test"] == "welch" and d["options"]["alpha"] == 0.01
    assert isinstance(d["warnings"], list) and any("Recovery" in w for w in d["warnings"])
    assert set(d["occupancy"]) == {"desktop", "mobile"}
    (cmp,) = d["comparisons"]
    assert cmp["a"] == "desktop" and cmp["b"] == "mobile"
    for s in cmp["states"]:
        assert set(s) == STATE_KEYS
        assert isinstance(s["significant"], bool)
        assert s["p_value"] is None or 0 <= s["p_value"] <= s["p_corrected"] <= 1
        assert s["difference"] == pytest.approx(s["mean_b"] - s["mean_a"], abs=2e-6)
    for e in cmp["edges"]:
        assert set(e) == EDGE_KEYS
    al = next(s for s in cmp["states"] if s["state"] == "ApplicationLimited")
    assert al["significant"] and al["difference"] > 0.3
    assert cmp["models"]["states_only_in_a"] == ["Recovery"]
    assert {"accepted_by_a_not_b", "accepted_by_b_not_a", "edges_only_in_a"} <= set(cmp["models"])


def test_csv_and_markdown(result) -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(result))))
    assert list(rows[0]) == CSV_COLUMNS
    states = [r for r in rows if r["kind"] == "state"]
    assert len(states) == len(result.states)
    al = next(r for r in states if r["item"] == "ApplicationLimited")
    assert al["significant"] == "True" and float(al["value_b"]) > float(al["value_a"])
    assert any(r["kind"] == "edge" and "only in desktop" in r["note"] for r in rows)
    md = to_markdown(result)
    assert "| ApplicationLimited |" in md and "## mobile vs desktop: states" in md and "**warning**" in md


def test_timeline_svg_is_valid_and_shaded() -> None:
    t = make_traces("x", 1, 0.4, seed=3)[0]
    svg = timeline_svg(t)
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    titles = [el.text for el in root.iter() if el.tag.endswith("title")]
    assert any(x and x.startswith("ApplicationLimited") for x in titles)
    assert svg.count("<path") == 2  # cwnd and bytes in flight


def test_heatmap_marks_significant_cells(result) -> None:
    svg = heatmap(result)
    ET.fromstring(svg)
    al_mobile = next(s for s in result.summaries["mobile"] if s.state == "ApplicationLimited")
    assert f"{100 * al_mobile.mean:.1f}%*" in svg


def test_pick_timelines_spreads_over_durations() -> None:
    traces = make_traces("x", 9, 0.3, seed=4)
    picked = TraceSet.from_traces("x", traces).timeline_traces(3)
    assert len(picked) == 3 and len({t.id for t in picked}) == 3
    durations = sorted(t.duration_us for t in traces)
    assert picked[0].duration_us == durations[4]  # the median connection first


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz not installed")
def test_html_report_holds_tables_and_inline_svg(result) -> None:
    html = to_html(replace(result, timelines={s.name: s.timeline_traces(2) for s in result.trace_sets}))
    assert html.startswith("<!DOCTYPE html>") and "<?xml" not in html
    assert html.count("<table>") >= 4
    assert "ApplicationLimited" in html and "Warnings" in html
    assert html.count('class="timeline"') == 4
    assert 'class="heatmap"' in html
    assert html.count("<svg") >= 4 + 1 + 2  # timelines, heatmap, side-by-side, diff diagram
    assert "change desktop → mobile" in html or "change desktop &#8594; mobile" in html
    assert "http://" not in html.replace("http://www.w3.org", "")  # self-contained


def test_html_report_without_models_still_renders() -> None:
    c = compare(
        [make_set("a", 4, 0.1, seed=1), make_set("b", 4, 0.5, seed=2)],
        CompareOptions(resamples=0, models=False, timelines=1),
    )
    html = to_html(c)
    assert 'class="heatmap"' in html and "Models side by side" not in html


def test_model_heading_lists_node_counts_in_the_heading_order() -> None:
    """'b vs a: models (engine, n_b vs n_a nodes)': the counts follow the names (they were swapped)."""
    from quicsm.compare.report import model_lines

    m = {
        "a": "desktop",
        "b": "mobile",
        "engine": "synoptic",
        "nodes": {"a": 11, "b": 9},
        "states_only_in_a": [],
        "states_only_in_b": [],
        "edges_only_in_a": [],
        "edges_only_in_b": [],
        "accepted_by_a_not_b": [],
        "accepted_by_b_not_a": [],
        "traces_rejected": {},
        "identical_language": False,
        "notes": [],
    }
    head = model_lines(m, lambda s: s)[0]
    assert head == "mobile vs desktop: models (synoptic, 9 vs 11 nodes)"
