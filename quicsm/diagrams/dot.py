"""DOT text of annotated models in the style of the IMC'17 figures (jinja2 templates, Graphviz lays out).

Nodes show the state name and, in red, the share of time spent in it; edges show, in black, the
probability of leaving a state along them, with pen width growing with it. Nodes are coloured by state
family; a legend says what the colours and numbers mean and what the model was learned from.

Output depends only on the model and the options: nodes and edges in id order, numbers through the
fixed formatters of :mod:`quicsm.diagrams.style`, no dates, no run timings.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import jinja2

from quicsm.diagrams.gvlib import MAX_PNG_SIDE
from quicsm.diagrams.overlay import Delta, Overlay
from quicsm.diagrams.style import (
    EDGE_COLOR,
    FAMILY_STYLES,
    SHARE_COLOR,
    FamilyStyle,
    edge_penwidth,
    family_style,
    fmt_duration,
    fmt_prob,
    fmt_share,
    legend_states,
    tooltip_state,
    wrap_state,
)
from quicsm.errors import RenderError
from quicsm.inference.annotate import AnnotatedModel, EdgeStats, NodeStats
from quicsm.inference.model import INITIAL, TERMINAL
from quicsm.textsafe import html as escape
from quicsm.textsafe import terminal
from quicsm.traces.states import state_family

__all__ = ["DotOptions", "RANKDIRS", "to_dot", "render_side_by_side", "legend_facts", "Html"]

RANKDIRS = ("TB", "LR", "BT", "RL")
LARGE_MODEL_STATES = 40
"""Above this many state nodes a diagram is laid out for speed, not the paper's look: straight edges
(``splines=line``: dot's spline routing took most of the layout of dense models, e.g. 199 states and 858
edges: >100 s of CPU with curves, 4.6 s straight) and bounded crossing/position passes (``mclimit``,
``nslimit``, ``nslimit1``, no second crossing pass). Smaller models keep the paper's curved style."""
_SYNTHETIC = (INITIAL, TERMINAL)
_VOLATILE_META = ("inference_seconds",)
"""Metadata that changes from run to run (timings, any ``*_seconds``): never drawn, so the same data
gives the same bytes."""


@dataclass(frozen=True, slots=True)
class DotOptions:
    """What to draw and how; the CLI's ``--min-prob``, ``--no-terminals``, ``--rankdir``, ``--title``."""

    min_prob: float = 0.0
    """Edges with a lower probability are left out (their states stay)."""
    terminals: bool = True
    """Draw the synthetic INITIAL (small dot) and TERMINAL (small double circle) nodes and their edges."""
    rankdir: str = "TB"
    title: str | None = None
    legend: bool = True
    tooltips: bool = True
    """Hover texts in SVG (visits, dwell times, counts)."""
    font: str = "Helvetica"
    prob_decimals: int = 2

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_prob <= 1.0:
            raise RenderError(f"min_prob must be between 0 and 1, got {self.min_prob}")
        if self.rankdir.upper() not in RANKDIRS:
            raise RenderError(f"rankdir must be one of {', '.join(RANKDIRS)}, got {self.rankdir!r}")
        if not 0 <= self.prob_decimals <= 6:
            raise RenderError(f"prob_decimals must be 0..6, got {self.prob_decimals}")


class Html(str):
    """An attribute value that is a Graphviz HTML-like label (written ``<...>``, not quoted)."""


@dataclass(frozen=True, slots=True)
class _Item:
    """A DOT node (``dst`` empty) or edge, with its attributes in the order they are written."""

    src: str
    attrs: dict[str, str]
    dst: str = ""


@dataclass(slots=True)
class _Part:
    """One model's nodes and edges as DOT items (a whole graph, or one cluster of a side-by-side)."""

    name: str
    label: str | None
    nodes: list[_Item] = field(default_factory=list)
    edges: list[_Item] = field(default_factory=list)
    families: dict[str, set[str]] = field(default_factory=dict)
    """State family -> the states of this diagram in it (for the legend)."""
    hidden_edges: int = 0
    ranks: list[list[str]] = field(default_factory=list)
    """Side-by-side only: DOT ids per rank (rank 0 first), tied to an invisible ruler so clusters align."""


@dataclass(frozen=True, slots=True)
class _Legend:
    families: list[tuple[str, FamilyStyle]]
    """(HTML text of the row, style): the family's word and the diagram's own states in it."""
    facts: list[tuple[str, str]]
    notes: list[str]


# ---------------------------------------------------------------------------------------------- text


def _quote(value: str) -> str:
    if isinstance(value, Html):
        return f"<{value}>"
    lines = terminal(value, lines=True).split("\n")  # names shown escaped; Graphviz and XML refuse controls
    return '"' + "\\n".join(line.replace("\\", "\\\\").replace('"', '\\"') for line in lines) + '"'


def _attrs(attrs: dict[str, str]) -> str:
    return ", ".join(f"{k}={_quote(v)}" for k, v in attrs.items())


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("quicsm.diagrams", "templates"),
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        # compiled templates kept between runs (keyed by their source; 10-15 ms of every diagram)
        bytecode_cache=jinja2.FileSystemBytecodeCache(),
    )
    env.filters["attrs"] = _attrs
    env.filters["q"] = _quote
    return env


# --------------------------------------------------------------------------------------------- parts


def _display_names(am: AnnotatedModel) -> dict[int, tuple[list[str], str]]:
    """Node id -> (name lines, ``#id`` suffix when several nodes stand for the same state)."""
    per_state = Counter(n.state for n in am.nodes)
    return {n.id: (wrap_state(n.state), f"#{n.id}" if per_state[n.state] > 1 else "") for n in am.nodes}


def _node_label(lines: list[str], suffix: str, share: str, extra: tuple[str, str] | None) -> Html:
    name = "<BR/>".join(escape(line) for line in lines)
    if suffix:
        name += f' <FONT POINT-SIZE="9" COLOR="#555555">{escape(suffix)}</FONT>'
    label = f'{name}<BR/><FONT COLOR="{SHARE_COLOR}"><B>{escape(share)}</B></FONT>'
    if extra is not None:
        label += f'<BR/><FONT POINT-SIZE="10" COLOR="{extra[1]}"><B>{escape(extra[0])}</B></FONT>'
    return Html(label)


def _node_item(
    n: NodeStats, dot_id: str, names: dict[int, tuple[list[str], str]], opts: DotOptions, overlay: Overlay | None
) -> _Item:
    if n.kind == "initial":
        attrs = {"label": "", "shape": "point", "width": "0.15", "color": "#333333"}
    elif n.kind == "terminal":
        attrs = {
            "label": "",
            "shape": "doublecircle",
            "width": "0.12",
            "fixedsize": "true",
            "style": "filled",
            "fillcolor": "#333333",
            "color": "#333333",
        }
    else:
        attrs = _state_attrs(n, names[n.id], overlay)
    if opts.tooltips:
        attrs["tooltip"] = _node_tooltip(n)
    return _Item(dot_id, attrs)


def _state_attrs(n: NodeStats, name: tuple[list[str], str], overlay: Overlay | None) -> dict[str, str]:
    """A state node: family colours, or the overlay's direction colour and strength if it has a value."""
    lines, suffix = name
    share = fmt_share(n.time_fraction)
    delta = overlay.node_delta(n.id, n.state) if overlay is not None else None
    if overlay is None or delta is None:
        style = family_style(state_family(n.state))
        return {
            "label": _node_label(lines, suffix, share, None),
            "style": "filled",
            "fillcolor": style.fill,
            "color": style.border,
        }
    return {
        "label": _node_label(lines, suffix, share, (overlay.text(delta), overlay.color(delta))),
        "style": "filled" if delta.significant else "filled,dashed",
        "fillcolor": overlay.fill(delta),
        "color": overlay.color(delta),
        "penwidth": f"{1.0 + 3.0 * overlay.strength(delta):.2f}" if delta.significant else "1.00",
    }


def _node_tooltip(n: NodeStats) -> str:
    if n.kind != "state":
        return f"{tooltip_state(n.state)}: {n.visits} connections"
    return (
        f"{tooltip_state(n.state)} (node {n.id}): {n.visits} visits, {fmt_duration(n.time_us)} in state "
        f"({fmt_share(n.time_fraction)}), mean stay {fmt_duration(round(n.mean_dwell_us))}"
    )


def _edge_item(
    e: EdgeStats,
    src: NodeStats,
    dst: NodeStats,
    ids: dict[int, str],
    out_count: int,
    opts: DotOptions,
    overlay: Overlay | None,
) -> _Item:
    prob = fmt_prob(e.probability, opts.prob_decimals)
    attrs = {
        "label": f" {prob} ",
        "penwidth": edge_penwidth(e.probability),
        "weight": str(1 + round(9 * e.probability)),
    }
    delta = overlay.edge_delta((src.id, src.state), (dst.id, dst.state)) if overlay is not None else None
    if delta is not None and overlay is not None:
        attrs.update(_delta_edge_attrs(delta, overlay, prob))
    if opts.tooltips:
        attrs["tooltip"] = (
            f"{tooltip_state(src.state)} -> {tooltip_state(dst.state)}: {e.count} of {out_count} transitions (p={e.probability:.4f})"
        )
    return _Item(ids[e.src], attrs, ids[e.dst])


def _delta_edge_attrs(delta: Delta, overlay: Overlay, prob: str | None) -> dict[str, str]:
    color = overlay.color(delta, edge=True)
    text = escape(overlay.text(delta))
    label = f"{escape(prob)}<BR/>" if prob is not None else ""
    attrs = {
        "label": Html(f'{label}<FONT COLOR="{color}" POINT-SIZE="9">{text}</FONT>'),
        "color": color,
        "fontcolor": EDGE_COLOR,
    }
    if delta.significant:
        attrs["penwidth"] = f"{1.0 + 4.0 * overlay.strength(delta, edge=True):.2f}"
    else:
        attrs.update(penwidth="0.80", style="dashed")
    return attrs


def _extra_overlay_edges(
    am: AnnotatedModel, ids: dict[int, str], shown: set[tuple[int, int]], overlay: Overlay
) -> list[_Item]:
    """Edges the overlay names by state that the model has not: drawn dashed, without a probability."""
    first: dict[str, int] = {}
    for n in am.nodes:
        if n.id in ids:
            first.setdefault(n.state, n.id)
    out = []
    existing = {(am.nodes[e.src].state, am.nodes[e.dst].state) for e in am.edges}
    for key, delta in sorted(overlay.edges.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        s, d = key
        if not (isinstance(s, str) and isinstance(d, str)) or (s, d) in existing:
            continue
        if s in first and d in first and (first[s], first[d]) not in shown:
            attrs = _delta_edge_attrs(delta, overlay, None)
            attrs["style"] = "dashed"
            attrs["tooltip"] = f"{tooltip_state(s)} -> {tooltip_state(d)}: not taken in this model"
            out.append(_Item(ids[first[s]], attrs, ids[first[d]]))
    return out


def _part(
    am: AnnotatedModel, opts: DotOptions, overlay: Overlay | None, prefix: str = "n", label: str | None = None
) -> _Part:
    part = _Part(prefix, label)
    names = _display_names(am)
    ids = {n.id: f"{prefix}{n.id}" for n in am.nodes if opts.terminals or n.kind == "state"}
    for n in am.nodes:
        if n.id in ids:
            part.nodes.append(_node_item(n, ids[n.id], names, opts, overlay))
            if n.kind == "state":
                part.families.setdefault(state_family(n.state), set()).add(n.state)
    out_count: Counter[int] = Counter()
    for e in am.edges:
        out_count[e.src] += e.count
    shown: set[tuple[int, int]] = set()
    for e in am.edges:
        if e.src not in ids or e.dst not in ids:
            continue
        if e.probability < opts.min_prob:
            part.hidden_edges += 1
            continue
        shown.add((e.src, e.dst))
        part.edges.append(_edge_item(e, am.nodes[e.src], am.nodes[e.dst], ids, out_count[e.src], opts, overlay))
    if overlay is not None:
        part.edges.extend(_extra_overlay_edges(am, ids, shown, overlay))
    return part


# -------------------------------------------------------------------------------------------- legend


def legend_facts(am: AnnotatedModel) -> list[tuple[str, str]]:
    """What the model was learned from, for the legend box: connections, sources, time, engine, metadata."""
    engine = am.model.engine
    params = ", ".join(f"{k}={_param(v)}" for k, v in sorted(am.model.params.items()))
    facts = [
        ("connections", str(am.traces)),
        ("sources", f"{am.sources} file{'s' if am.sources != 1 else ''}"),
        ("events", str(am.events)),
        ("time in states", fmt_duration(am.total_time_us)),
        ("engine", f"{engine} ({params})" if params else engine),
    ]
    for key in sorted(am.meta):
        if key in _VOLATILE_META or key.endswith("_seconds"):
            continue
        value = am.meta[key]
        if isinstance(value, dict):
            text = ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
        elif isinstance(value, (list, tuple)):
            text = ", ".join(str(v) for v in value)
        else:
            text = _param(value)
        facts.append((str(key), text if len(text) <= 60 else text[:57] + "..."))
    return facts


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _legend(families: dict[str, set[str]], facts: list[tuple[str, str]], notes: list[str]) -> _Legend:
    """One row per family used, naming the controller's own states in it (not a fixed list of every
    controller's names: a BBR2 diagram's legend must not say SlowStart)."""
    order = list(FAMILY_STYLES)
    used = sorted(families, key=lambda f: (order.index(f) if f in order else len(order), f))
    rows = []
    for f in used:
        style = family_style(f)
        states = legend_states(families[f])
        rows.append((escape(f"{style.legend}: {states}" if states else style.legend), style))
    return _Legend(rows, facts, notes)


def _notes(opts: DotOptions, hidden: int, overlay: Overlay | None, states: int = 0) -> list[str]:
    notes = []
    if states > LARGE_MODEL_STATES:
        notes.append(
            f"{states} states: edges drawn straight, layout effort bounded (over {LARGE_MODEL_STATES}); "
            f"a PNG scaled to at most {MAX_PNG_SIDE:,} px a side (SVG, PDF: full size)"
        )
    if hidden:
        notes.append(f"{hidden} edge{'s' if hidden != 1 else ''} with p &lt; {opts.min_prob:g} hidden")
    if not opts.terminals:
        notes.append("connection start/end not drawn")
    if overlay is not None and overlay.caption:
        inc, dec = overlay.increase, overlay.decrease
        notes.append(
            f'{escape(overlay.caption)}: <FONT COLOR="{inc}"><B>increase</B></FONT> / '
            f'<FONT COLOR="{dec}"><B>decrease</B></FONT>, grey dashed = not significant'
        )
    return notes


# ---------------------------------------------------------------------------------------------- API


def to_dot(model: AnnotatedModel, options: DotOptions = DotOptions(), overlay: Overlay | None = None) -> str:
    """DOT text of one annotated model.

    ``to_dot(model, DotOptions(min_prob=0.05, rankdir="LR", title="quic-go cubic"), overlay=None) -> str``.
    With an :class:`~quicsm.diagrams.overlay.Overlay`, nodes and edges it names are coloured and
    sized by its values (a diff diagram); the rest keep the normal look.
    """
    part = _part(model, options, overlay)
    states = sum(1 for n in model.nodes if n.kind == "state")
    notes = _notes(options, part.hidden_edges, overlay, states)
    legend = _legend(part.families, legend_facts(model), notes)
    return _render("model.dot.j2", options, legend, part=part, large=states > LARGE_MODEL_STATES)


def render_side_by_side(
    models: Sequence[tuple[str, AnnotatedModel]],
    options: DotOptions = DotOptions(),
) -> str:
    """DOT text with one cluster per ``(title, model)``, side by side, as in the paper's Fig. 13.

    ``render_side_by_side([("desktop", a), ("mobile", b)], DotOptions(min_prob=0.01)) -> str``.
    A state sits at the same rank in every cluster (ranks come from the union of all models' edges,
    breadth-first from INITIAL), and a state missing from one model leaves an invisible placeholder
    there, so equal states line up.
    """
    if not models:
        raise RenderError("render_side_by_side needs at least one model")
    ranks = _union_ranks([m for _, m in models])
    slots = _union_slots([m for _, m in models], ranks)
    parts = [_aligned_part(i, title, am, options, ranks, slots) for i, (title, am) in enumerate(models)]
    families: dict[str, set[str]] = {}
    for p in parts:
        for fam, states in p.families.items():
            families.setdefault(fam, set()).update(states)
    facts = [] if len(models) > 1 else legend_facts(models[0][1])
    drawn = sum(1 for _, am in models for n in am.nodes if n.kind == "state")
    legend = _legend(families, facts, _notes(options, sum(p.hidden_edges for p in parts), None, drawn))
    return _render("side_by_side.dot.j2", options, legend, parts=parts, large=drawn > LARGE_MODEL_STATES)


def _render(template: str, options: DotOptions, legend: _Legend, **context: Any) -> str:
    return (
        _env()
        .get_template(template)
        .render(
            opts=options,
            rankdir=options.rankdir.upper(),
            title=Html(f"<B>{escape(options.title)}</B>") if options.title else None,
            legend=legend if options.legend else None,
            share_color=SHARE_COLOR,
            edge_color=EDGE_COLOR,
            **context,
        )
    )


def _aligned_part(
    index: int,
    title: str,
    am: AnnotatedModel,
    options: DotOptions,
    ranks: dict[str, int],
    slots: list[tuple[str, int]],
) -> _Part:
    """One cluster of a side-by-side: nodes in the shared slot order, grouped by the shared ranks.

    The shared ranks come from breadth-first search over the union of edges, so no real edge goes more
    than one rank down and the edges may keep constraining the layout (with ``constraint=false`` on
    them, Graphviz 2.43 fails with "trouble in init_rank" on two clusters of BBR models, whose states
    share ranks with many flat edges between them); slots this model lacks get an invisible node of
    about the same size.
    """
    part = _part(am, options, None, prefix=f"m{index}n", label=_cluster_label(title, am))
    drawn = {item.src: item for item in part.nodes}
    slot_ids = {slot: f"m{index}n{node_id}" for node_id, slot in _slots_of(am).items()}
    shift = 0 if options.terminals else 1
    ordered: list[_Item] = []
    groups: dict[int, list[str]] = {}
    for j, key in enumerate(slots):
        if key[0] in _SYNTHETIC and not options.terminals:
            continue
        item = drawn.get(slot_ids.get(key, ""))
        if item is None:
            text = "\n".join(wrap_state(key[0])) + ("" if key[0] in _SYNTHETIC else "\n100.0%")
            item = _Item(f"m{index}p{j}", {"label": text, "style": "invis"})
        ordered.append(item)
        groups.setdefault(ranks[key[0]] - shift, []).append(item.src)
    part.nodes = ordered
    part.ranks = [groups.get(r, []) for r in range(max(groups, default=-1) + 1)]
    rank_of = {src: r for r, group in enumerate(part.ranks) for src in group}
    part.edges = [_flat_label(e) if rank_of.get(e.src, -1) == rank_of.get(e.dst, -2) else e for e in part.edges]
    return part


def _flat_label(edge: _Item) -> _Item:
    """An edge between two states of one shared rank, labelled outside the ranking (``xlabel``): dot
    makes room for a flat edge's ``label`` with a rank of its own, and with the shared ranks held by
    ``rank=same`` that fails as "trouble in init_rank" (Graphviz 2.42/2.43; 12 of 300 random
    side-by-sides of 2-4 models, none with ``xlabel``)."""
    if "label" not in edge.attrs:
        return edge
    attrs = {("xlabel" if k == "label" else k): v for k, v in edge.attrs.items()}
    return _Item(edge.src, attrs, edge.dst)


def _cluster_label(title: str, am: AnnotatedModel) -> Html:
    facts = dict(legend_facts(am))
    line = f"{facts['connections']} connections, {facts['time in states']}, {facts['engine']}"
    if "states" in facts:  # read from metrics, not logged (quicsm.traces.metric_states): said on every set
        line += f"; states {facts['states']}"
    return Html(f'<B>{escape(title)}</B><BR/><FONT POINT-SIZE="10">{escape(line)}</FONT>')


def _slots_of(am: AnnotatedModel) -> dict[int, tuple[str, int]]:
    """Node id -> (state, k): the k-th node (by id) of its state, so models with split states line up."""
    seen: Counter[str] = Counter()
    out = {}
    for n in am.nodes:
        out[n.id] = (n.state, seen[n.state])
        seen[n.state] += 1
    return out


def _union_slots(models: Sequence[AnnotatedModel], ranks: dict[str, int]) -> list[tuple[str, int]]:
    """Every (state, k) any model has, in rank order: the node order of every cluster."""
    slots = {slot for am in models for slot in _slots_of(am).values()}
    return sorted(slots, key=lambda sk: (ranks[sk[0]], sk))


def _union_ranks(models: Sequence[AnnotatedModel]) -> dict[str, int]:
    """State -> rank: breadth-first distance from INITIAL over all models' edges; TERMINAL last."""
    succ: dict[str, set[str]] = {}
    states: set[str] = set()
    for am in models:
        states.update(n.state for n in am.nodes)
        for e in am.edges:
            succ.setdefault(am.nodes[e.src].state, set()).add(am.nodes[e.dst].state)
    rank = {INITIAL: 0}
    queue = deque([INITIAL])
    while queue:
        s = queue.popleft()
        for d in sorted(succ.get(s, ())):
            if d not in rank and d != TERMINAL:
                rank[d] = rank[s] + 1
                queue.append(d)
    deepest = max(rank.values())
    for s in sorted(states - set(rank) - {TERMINAL}):
        rank[s] = deepest + 1
    rank[TERMINAL] = max(rank.values()) + 1
    return rank
