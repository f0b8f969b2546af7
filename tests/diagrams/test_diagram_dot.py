"""DOT text of annotated models: states, shares, probabilities, options, legend, overlays, side by side."""

from __future__ import annotations

import html
import re
import subprocess

import pytest
from annotate_oracle import annotate, model_from_paths
from diagram_fixtures import make_model, make_traces, model_of
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from quicsm.diagrams import Delta, DotOptions, Overlay, find_dot, render_side_by_side, run_dot, to_dot
from quicsm.diagrams.style import FAMILY_STYLES, SHARE_COLOR, wrap_state
from quicsm.errors import RenderError
from quicsm.inference import infer_sequences
from quicsm.inference.annotate import AnnotatedModel
from quicsm.inference.model import INITIAL, TERMINAL
from quicsm.traces.events import StateView, Trace, TraceEvent
from quicsm.traces.states import state_family

_NODE = re.compile(r"^\s*(\w+) \[label=<(.*)>, style=", re.M)
_EDGE = re.compile(r'^\s*(\w+) -> (\w+) \[label=" ([^"]+) "', re.M)
_SHARE = re.compile(rf'<FONT COLOR="{SHARE_COLOR}"><B>([^<]+)%</B></FONT>')


def state_nodes(dot: str) -> dict[str, tuple[str, float]]:
    """DOT id -> (state name as drawn, share in percent as drawn)."""
    out = {}
    for dot_id, label in _NODE.findall(dot):
        name_part, _, rest = label.partition(f'<BR/><FONT COLOR="{SHARE_COLOR}">')
        name = re.sub(r" <FONT[^>]*>#\d+</FONT>", "", name_part).replace("<BR/>", "")
        share = _SHARE.search(label)
        assert share is not None, label
        out[dot_id] = (name, float(share.group(1).lstrip("<")))
    return out


def edges(dot: str) -> dict[tuple[str, str], str]:
    return {(s, d): p for s, d, p in _EDGE.findall(dot)}


def test_every_state_share_and_edge_probability_is_drawn() -> None:
    am = make_model(20, seed=3)
    dot = to_dot(am)
    drawn = state_nodes(dot)
    states = [n for n in am.nodes if n.kind == "state"]
    assert len(states) >= 6
    assert set(drawn) == {f"n{n.id}" for n in states}
    for n in states:
        name, share = drawn[f"n{n.id}"]
        assert name == n.state
        assert share == pytest.approx(100 * n.time_fraction, abs=0.051)
    drawn_edges = edges(dot)
    assert len(drawn_edges) == len(am.edges) > 10
    for e in am.edges:
        assert float(drawn_edges[(f"n{e.src}", f"n{e.dst}")]) == pytest.approx(e.probability, abs=0.0051)
    assert sum(share for _, share in drawn.values()) == pytest.approx(100, abs=0.06 * len(drawn))


def test_edge_pen_width_grows_with_probability() -> None:
    am = make_model(20, seed=4)
    widths = {
        (s, d): float(w) for s, d, w in re.findall(r'(\w+) -> (\w+) \[label="[^"]+", penwidth="([\d.]+)"', to_dot(am))
    }
    by_prob = sorted(am.edges, key=lambda e: e.probability)
    low, high = by_prob[0], by_prob[-1]
    assert low.probability < high.probability
    assert widths[(f"n{low.src}", f"n{low.dst}")] < widths[(f"n{high.src}", f"n{high.dst}")]


def test_terminals_are_small_point_and_doublecircle_and_can_be_hidden() -> None:
    am = make_model(8, seed=1)
    ini, term = am.model.initial, am.model.terminal
    dot = to_dot(am)
    assert re.search(rf'^\s*n{ini} \[label="", shape="point"', dot, re.M)
    assert re.search(rf'^\s*n{term} \[label="", shape="doublecircle"', dot, re.M)
    hidden = to_dot(am, DotOptions(terminals=False))
    assert not re.search(rf"\bn({ini}|{term})\b", hidden)
    kept = [e for e in am.edges if ini not in (e.src, e.dst) and term not in (e.src, e.dst)]
    assert len(edges(hidden)) == len(kept) > 0
    assert "connection start/end not drawn" in hidden


def test_min_prob_hides_only_unlikely_edges_and_says_how_many() -> None:
    am = make_model(20, seed=5)
    threshold = sorted(e.probability for e in am.edges)[len(am.edges) // 2]
    dot = to_dot(am, DotOptions(min_prob=threshold))
    kept = {(f"n{e.src}", f"n{e.dst}") for e in am.edges if e.probability >= threshold}
    assert set(edges(dot)) == kept
    hidden = len(am.edges) - len(kept)
    assert hidden > 0
    assert f"{hidden} edges with p &lt; " in dot
    assert set(state_nodes(dot)) == {f"n{n.id}" for n in am.nodes if n.kind == "state"}


def test_rankdir_title_and_escaping() -> None:
    am = make_model(6, seed=2)
    dot = to_dot(am, DotOptions(rankdir="lr", title='cubic <50 Mbit/s> & "desktop"'))
    assert "rankdir=LR" in dot
    assert "<B>cubic &lt;50 Mbit/s&gt; &amp; &quot;desktop&quot;</B>" in dot
    with pytest.raises(RenderError, match="rankdir"):
        DotOptions(rankdir="XY")
    with pytest.raises(RenderError, match="min_prob"):
        DotOptions(min_prob=1.5)


def test_colour_per_state_family_and_legend_lists_only_families_used() -> None:
    am = make_model(20, seed=6)
    dot = to_dot(am)
    used = {state_family(n.state) for n in am.nodes if n.kind == "state"}
    for n in am.nodes:
        if n.kind == "state":
            style = FAMILY_STYLES[state_family(n.state)]
            assert re.search(rf'^\s*n{n.id} \[.*fillcolor="{style.fill}", color="{style.border}"', dot, re.M)
    legend = dot[dot.index("subgraph cluster_legend") :]
    for family, style in FAMILY_STYLES.items():
        assert (style.legend.replace("&", "&amp;") in legend) == (family in used), family


def test_legend_box_has_connections_sources_time_engine_and_labels_but_no_timings() -> None:
    traces = make_traces(9, seed=7, files=3)
    am = model_of(traces, meta={"cc": "cubic", "labels": {"client": "mobile"}, "inference_seconds": 0.123})
    legend = to_dot(am)[to_dot(am).index("cluster_legend") :]
    assert f'>connections</FONT></TD><TD ALIGN="LEFT">{len(traces)}<' in legend
    assert ">3 files<" in legend
    assert f">{am.total_time_us / 1e6:.3f} s<" in legend
    assert ">dfg<" in legend and ">client=mobile<" in legend
    assert "inference_seconds" not in legend and "0.123" not in legend


def test_same_model_same_bytes_and_json_round_trip_same_picture() -> None:
    am = make_model(15, seed=8)
    again = make_model(15, seed=8)
    assert to_dot(am) == to_dot(again)
    assert to_dot(AnnotatedModel.from_json(am.to_json())) == to_dot(am)
    assert to_dot(am) != to_dot(make_model(15, seed=9))


def test_several_nodes_of_one_state_get_id_suffixes() -> None:
    def conn(name: str, recovery_at: int, end: int) -> Trace:
        events = [TraceEvent(0, "SlowStart", prev="Init"), TraceEvent(recovery_at, "Recovery")]
        return Trace(name, "cubic", [*events, TraceEvent(end, "Recovery", kind="close")])

    traces = [conn("a", 100, 300), conn("b", 50, 60)]
    labels = [INITIAL, "SlowStart", "Recovery", "Recovery", TERMINAL]
    result = model_from_paths("split", labels, [[0, 1, 2, 4], [0, 1, 3, 4]])
    am = annotate(result, traces, StateView())
    dot = to_dot(am)
    assert "#2</FONT>" in dot and "#3</FONT>" in dot and "#1</FONT>" not in dot
    drawn = state_nodes(dot)
    assert drawn["n2"] == ("Recovery", pytest.approx(100 * am.nodes[2].time_fraction, abs=0.051))


def test_long_names_wrap_onto_lines() -> None:
    assert wrap_state("CongestionAvoidanceMaxed") == ["Congestion", "AvoidanceMaxed"]
    assert wrap_state("ProbeBw.Refill/Growth") == ["ProbeBw", ".Refill", "/Growth"]
    assert wrap_state("SlowStart") == ["SlowStart"]


def test_overlay_colours_and_widths_follow_values() -> None:
    am = make_model(20, seed=10)
    ca = next(n for n in am.nodes if n.state == "CongestionAvoidance")
    al = next(n for n in am.nodes if n.state == "ApplicationLimited")
    big = next(e for e in am.edges if am.nodes[e.src].kind == "state" and am.nodes[e.dst].kind == "state")
    overlay = Overlay(
        nodes={
            "ApplicationLimited": Delta(0.5, text="+50.0 pp"),
            ca.id: Delta(-0.1),
            "Recovery": Delta(0.3, significant=False),
        },
        edges={
            (big.src, big.dst): Delta(0.4),
            ("RetransmissionTimeout", "ApplicationLimited"): Delta(0.2, text="only in B"),
        },
        caption="B - A",
    )
    dot = to_dot(am, overlay=overlay)
    line = lambda dot_id: re.search(rf"^\s*{dot_id} \[.*$", dot, re.M).group(0)  # noqa: E731
    assert "+50.0 pp" in line(f"n{al.id}") and f'color="{overlay.color(Delta(0.5))}"' in line(f"n{al.id}")
    assert 'penwidth="4.00"' in line(f"n{al.id}")  # the largest node |value| is full scale
    assert overlay.color(Delta(0.5)) != overlay.color(Delta(-0.1))
    assert "-0.10" in line(f"n{ca.id}")
    rec = next(n for n in am.nodes if n.state == "Recovery")
    assert 'style="filled,dashed"' in line(f"n{rec.id}") and f'color="{overlay.muted}"' in line(f"n{rec.id}")
    edge_line = re.search(rf"^\s*n{big.src} -> n{big.dst} \[.*$", dot, re.M).group(0)
    assert 'penwidth="5.00"' in edge_line  # the largest |value| is full scale
    rto = next(n for n in am.nodes if n.state == "RetransmissionTimeout")
    assert re.search(rf'^\s*n{rto.id} -> n{al.id} \[.*only in B.*style="dashed"', dot, re.M)
    assert "B - A" in dot


def _positions(dot: str) -> dict[str, tuple[float, float]]:
    plain = subprocess.run([find_dot(), "-Tplain"], input=dot.encode(), capture_output=True, check=True).stdout.decode()
    return {f[1]: (float(f[2]), float(f[3])) for f in (line.split() for line in plain.splitlines()) if f[0] == "node"}


def test_side_by_side_aligns_equal_states_in_one_cluster_per_model() -> None:
    a = make_model(15, seed=11)
    b = make_model(15, seed=12, app_limited_weight=6)
    b_states = {n.state for n in b.nodes}
    dot = render_side_by_side([("desktop", a), ("mobile", b)], DotOptions(title="Fig. 13"))
    assert "subgraph cluster_m0n" in dot and "subgraph cluster_m1n" in dot
    assert "<B>desktop</B>" in dot and "<B>mobile</B>" in dot
    for i, am in enumerate((a, b)):
        drawn = {k: v for k, v in state_nodes(dot).items() if k.startswith(f"m{i}n")}
        for n in am.nodes:
            if n.kind == "state":
                assert drawn[f"m{i}n{n.id}"] == (n.state, pytest.approx(100 * n.time_fraction, abs=0.051))
    pos = _positions(dot)
    a_ids = {n.state: f"m0n{n.id}" for n in a.nodes}
    b_ids = {n.state: f"m1n{n.id}" for n in b.nodes}
    common = set(a_ids) & b_states
    assert len(common) >= 6
    for state in common:
        assert pos[a_ids[state]][1] == pytest.approx(pos[b_ids[state]][1], abs=0.01), state
    assert max(x for x, _ in (pos[a_ids[s]] for s in common)) < min(x for x, _ in (pos[b_ids[s]] for s in common))
    assert render_side_by_side([("desktop", a), ("mobile", b)], DotOptions(title="Fig. 13")) == dot


def test_side_by_side_keeps_a_place_for_states_one_model_lacks() -> None:
    a = make_model(20, seed=13)
    traces = [t for t in make_traces(30, seed=14) if "RetransmissionTimeout" not in t.states()]
    b = model_of(traces)
    assert "RetransmissionTimeout" in {n.state for n in a.nodes} - {n.state for n in b.nodes}
    dot = render_side_by_side([("A", a), ("B", b)], DotOptions(terminals=False))
    placeholder = re.search(r'^\s*(m1p\d+) \[label="([^"]*)", style="invis"\]', dot, re.M)
    assert placeholder is not None and placeholder.group(2).startswith("Retransmission")
    pos = _positions(dot)
    rto = next(n for n in a.nodes if n.state == "RetransmissionTimeout")
    assert pos[f"m0n{rto.id}"][1] == pytest.approx(pos[placeholder.group(1)][1], abs=0.01)
    with pytest.raises(RenderError):
        render_side_by_side([])


def test_side_by_side_labels_flat_edges_outside_the_ranking() -> None:
    """Edges between states of one shared rank carry their probability as ``xlabel``: with ``label``,
    dot 2.42/2.43 failed 12 of 300 random side-by-sides ("trouble in init_rank"), this pair among them."""
    a, b = make_model(8, seed=1), make_model(9, seed=2)
    dot = render_side_by_side([("a", a), ("b", b)])
    rank_of = {
        node: r
        for r, group in enumerate(re.findall(r'\{ rank="same"; m\dnr(\d+); ([^}]*)\}', dot))
        for node in group[1].replace(";", " ").split()
    }
    edges = re.findall(r"^\s*(m\dn\d+) -> (m\dn\d+) \[(x?label)=", dot, re.M)
    flat = [(s, d) for s, d, attr in edges if attr == "xlabel"]
    assert flat and len(flat) < len(edges)
    for s, d, attr in edges:
        assert (attr == "xlabel") == (rank_of.get(s) is not None and rank_of.get(s) == rank_of.get(d)), (s, d)
    svg = run_dot(dot, "svg").decode()  # raised RenderError (init_rank) with label on the flat edges
    assert svg.count('class="edge"') >= len(edges)


def _one_trace_model(names: list[str]) -> AnnotatedModel:
    events = [TraceEvent(10 * i, n, prev="Init" if i == 0 else None) for i, n in enumerate(names)]
    trace = Trace("t", "cubic", [*events, TraceEvent(10 * len(names) + 5, names[-1], kind="close")])
    return annotate(infer_sequences([trace.states()], "dfg"), [trace], StateView())


def test_state_names_are_escaped_for_dot_and_html() -> None:
    names = ['we"ird', "a<b>&c", "back\\slash", "ünï→", "{x;y}", "\\N", "tab\there"]
    svg = run_dot(
        render_side_by_side([('A "1"', _one_trace_model(names)), ("<B>", _one_trace_model(names[:2]))]), "svg"
    )
    text = svg.decode()
    for name in names[:-1]:
        assert html.escape(name) in text, name
    assert "tab\\there" in text  # shown escaped (quicsm.textsafe.terminal)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=4, unique=True))
def test_any_state_name_gives_a_drawable_diagram(names: list[str]) -> None:
    names = [n for n in names if n not in (INITIAL, TERMINAL)]
    assume(names)
    svg = run_dot(to_dot(_one_trace_model(names)), "svg")
    states = set(names)  # the first transition leaves Init, the start marker, not a state
    assert svg.count(b'class="node"') == len(states) + 3  # + INITIAL, TERMINAL, legend


def test_overlay_legend_lists_every_state_family_in_the_diagram() -> None:
    """Regression: with a diff overlay the legend listed only families of nodes the overlay left alone."""
    am = make_model(20, seed=6)
    used = {state_family(n.state) for n in am.nodes if n.kind == "state"}
    assert len(used) > 2
    overlay = Overlay(nodes={n.state: Delta(0.1, significant=(n.id % 2 == 0)) for n in am.nodes if n.kind == "state"})
    legend = to_dot(am, overlay=overlay)
    legend = legend[legend.index("subgraph cluster_legend") :]
    for family, style in FAMILY_STYLES.items():
        assert (style.legend.replace("&", "&amp;") in legend) == (family in used), family


def test_not_significant_node_style_is_clean_filled_dashed() -> None:
    am = make_model(12, seed=1)
    dot = to_dot(am, overlay=Overlay(nodes={"SlowStart": Delta(0.01, False, "12.4%→10.3% (p=0.41)")}))
    line = next(ln for ln in dot.splitlines() if ln.lstrip().startswith("n") and "SlowStart<BR/>" in ln)
    assert 'style="filled,dashed"' in line
    assert re.search(r'style="[^"]*\)', dot) is None


def _legend_rows(dot: str) -> list[str]:
    legend = dot[dot.index("subgraph cluster_legend") :]
    return re.findall(r'FIXEDSIZE="TRUE"></TD><TD ALIGN="LEFT">([^<]*)</TD>', legend)


def test_legend_names_the_controllers_own_states() -> None:
    """Regression (issue 22): a BBR2 diagram's legend listed Cubic's SlowStart and CongestionAvoidance."""
    walk = ["Startup", "Drain", "ProbeBw.Down", "ProbeBw.Cruise", "ProbeBw.Refill", "ProbeBw.Up", "ProbeRtt"]
    walk += ["ProbeBw.Cruise", "ApplicationLimited", "ProbeBw.Cruise"]
    events = [TraceEvent(1000 * i, s, prev="Init" if i == 0 else None) for i, s in enumerate(walk)]
    bbr2 = Trace("b", "bbr2", [*events, TraceEvent(1000 * len(walk), walk[-1], kind="close")])
    rows = _legend_rows(to_dot(model_of([bbr2], meta={"cc": "bbr2"})))
    assert "start-up: Startup" in rows
    assert "steady: ProbeBw.Cruise/Down/Refill/Up" in rows
    assert "RTT probe: ProbeRtt" in rows and "drain: Drain" in rows
    assert not any("SlowStart" in r or "CongestionAvoidance" in r for r in rows)
    cubic_rows = _legend_rows(to_dot(make_model(20, seed=6)))
    assert any(r.startswith("start-up: ") and "SlowStart" in r for r in cubic_rows)
    assert not any("Startup" in r or "ProbeBw" in r for r in cubic_rows)


def test_side_by_side_of_bbr_long_flows_renders_with_states_aligned() -> None:
    """quinn's BBR desktop vs mobile (traces/bbr-long, directly-follows models): four states share a rank
    with flat edges between them in both clusters; Graphviz 2.43 failed on it ('trouble in init_rank')."""
    from pathlib import Path

    from quicsm.traces import parse_inputs

    root = Path(__file__).resolve().parents[2] / "traces" / "bbr-long"
    models = []
    for name in ("quinn-desktop", "quinn-mobile"):
        traces = parse_inputs(sorted(str(p) for p in (root / name).glob("*/server.log.gz"))).traces
        assert len(traces) >= 5, name
        models.append((name, annotate(infer_sequences([t.states() for t in traces], "dfg"), traces, StateView())))
    dot = render_side_by_side(models, DotOptions(min_prob=0.0))
    plain = subprocess.run([find_dot(), "-Tplain"], input=dot.encode(), capture_output=True).stdout.decode()
    assert plain.startswith("graph "), plain[:200]  # dot exits 1 with no layout on 'trouble in init_rank'
    width_in = float(plain.split()[2])
    assert 8 < width_in < 33, width_in  # two clusters of one node per state, not one node per history
    pos = {f[1]: (float(f[2]), float(f[3])) for f in (line.split() for line in plain.splitlines()) if f[0] == "node"}
    ids = [{n.state: f"m{i}n{n.id}" for n in am.nodes if n.kind == "state"} for i, (_, am) in enumerate(models)]
    common = set(ids[0]) & set(ids[1])
    assert {"Startup", "ProbeBw.Up", "ProbeBw.Down", "ProbeBw.Cruise", "ProbeRtt"} <= common
    for state in common:
        assert pos[ids[0][state]][1] == pytest.approx(pos[ids[1][state]][1], abs=0.01), state


def test_a_state_name_over_graphvizs_html_limit_is_drawn_shortened() -> None:
    """A 17,000-character state name is legal by the contract; Graphviz refuses HTML labels over 16,384
    characters. The node shows head ... tail, the tooltip the first 1,000 characters and the length."""
    long = "S" + "x" * 16_998 + "E"
    svg = run_dot(to_dot(_one_trace_model(["SlowStart", long, "Recovery"])), "svg").decode()
    assert "Sxxxxxxxxxxxxxxxxxxxxxx\u2026xxxxxxxxxxxxxxxxxxxxxxE" in svg
    assert "17,000 characters; whole in the model JSON" in svg
    assert "x" * 1_001 not in svg


def test_a_legend_row_lists_a_dozen_states_then_counts_the_rest() -> None:
    names = [f"Recovery{i:03d}" for i in range(30)]
    dot = to_dot(_one_trace_model(names), DotOptions())
    assert "and 18 more" in dot and "Recovery011" in dot[dot.index("cluster_legend") :]


def test_large_models_are_laid_out_for_speed_small_ones_keep_the_paper_style() -> None:
    small = to_dot(_one_trace_model([f"S{i}" for i in range(40)]))
    large = to_dot(_one_trace_model([f"S{i}" for i in range(41)]))
    assert 'splines="line"' not in small and "edges drawn straight" not in small
    assert 'splines="line"' in large and "41 states: edges drawn straight" in large
    assert "a PNG scaled to at most 4,096 px a side" in large
    assert run_dot(large, "svg").count(b'class="node"') == 41 + 3
