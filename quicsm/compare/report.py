"""Writers for a :class:`Comparison`: JSON (docs/compare.md), CSV, Markdown and a terminal table.

All numbers go out as finite floats or ``null``; ``json.dumps(..., allow_nan=False)`` enforces it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import msgspec

from quicsm.compare.comparison import Comparison, EdgeRow, OptionsRecord, SetInfo, StateRow
from quicsm.textsafe import csv_cell, md_name, md_text, terminal

__all__ = [
    "COMPARE_FORMAT_VERSION",
    "WRITERS",
    "by_corrected_p",
    "edge_record",
    "fmt_pct",
    "fmt_pp",
    "json_number",
    "json_p",
    "state_record",
    "fmt_p",
    "model_lines",
    "to_csv",
    "to_json",
    "to_json_text",
    "to_markdown",
    "to_text",
]

COMPARE_FORMAT_VERSION = 1
R = TypeVar("R", StateRow, EdgeRow)
Rec = TypeVar("Rec")


def json_number(x: float | None, digits: int = 6) -> float | None:
    """A number as the JSON reports carry it (compare's and check's): rounded, null when not finite."""
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), digits)


def json_p(x: float | None) -> float | None:
    """p-values keep their magnitude (1e-12 must not round to 0)."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.4g}")


class StateRecord(msgspec.Struct):
    """A state test as every writer shows it: the JSON as is; CSV, text, Markdown and HTML format it."""

    state: str
    mean_a: float | None
    """Mean per-connection share of time in the state in set a (0..1)."""
    mean_b: float | None
    difference: float | None
    """``mean_b - mean_a``."""
    p_value: float | None
    p_corrected: float | None
    significant: bool
    test: str
    statistic: float | None
    effect_size: float | None
    effect_measure: str
    n_a: int
    n_b: int
    visited_a: int
    visited_b: int
    note: str | None
    """Why no test ran, or a caveat."""

    def rounded(self) -> StateRecord:
        """As the JSON and CSV carry it: p-values to 4 significant digits, statistics to 4 decimals, the
        rest to 6 (the text and HTML tables format the unrounded record)."""
        return msgspec.structs.replace(
            self,
            **{k: json_number(getattr(self, k)) for k in ("mean_a", "mean_b", "difference")},
            **{k: json_number(getattr(self, k), 4) for k in ("statistic", "effect_size")},
            **{k: json_p(getattr(self, k)) for k in ("p_value", "p_corrected")},
        )


class EdgeRecord(msgspec.Struct):
    """An edge test as every writer shows it (see :class:`StateRecord`)."""

    src: str
    dst: str
    prob_a: float | None
    """Probability of leaving ``src`` along this edge in set a; null when ``src`` was never left there."""
    prob_b: float | None
    difference: float | None
    p_value: float | None
    p_corrected: float | None
    significant: bool
    test: str
    count_a: int
    count_b: int
    out_a: int
    out_b: int
    only_in: str | None
    note: str | None

    def rounded(self) -> EdgeRecord:
        """As the JSON and CSV carry it (see :meth:`StateRecord.rounded`)."""
        return msgspec.structs.replace(
            self,
            **{k: json_number(getattr(self, k)) for k in ("prob_a", "prob_b", "difference")},
            **{k: json_p(getattr(self, k)) for k in ("p_value", "p_corrected")},
        )


class SkippedRecord(msgspec.Struct):
    records: int
    files: list[str]


class SetRecord(msgspec.Struct):
    name: str
    origin: str
    traces: int
    connections: int
    dropped: int
    controllers: list[str]
    implementations: list[str]
    versions: list[str]
    sources: int
    skipped: SkippedRecord | msgspec.UnsetType = msgspec.UNSET
    """Present only when some input records or files were skipped."""
    states_inferred: int | msgspec.UnsetType = msgspec.UNSET
    """Present only when some connections' states were inferred from qlog metrics (not logged)."""


class OccupancyRecord(msgspec.Struct):
    state: str
    n: int
    visited: int
    mean: float | None
    median: float | None
    ci_low: float | None
    ci_high: float | None
    pooled: float | None


class WitnessRecord(msgspec.Struct):
    sequence: list[str]
    length: int
    divergence: str


class RejectedRecord(msgspec.Struct):
    count: int
    of: int
    example: str | None
    example_states: list[str] | None


class NodeCounts(msgspec.Struct):
    a: int
    b: int


class ModelDiffRecord(msgspec.Struct):
    a: str
    b: str
    engine: str
    nodes: NodeCounts
    identical_language: bool
    states_only_in_a: list[str]
    states_only_in_b: list[str]
    edges_only_in_a: list[tuple[str, str]]
    edges_only_in_b: list[tuple[str, str]]
    accepted_by_a_not_b: list[WitnessRecord]
    accepted_by_b_not_a: list[WitnessRecord]
    traces_rejected: dict[Literal["a_by_b", "b_by_a"], RejectedRecord]
    notes: list[str]


class PairRecord(msgspec.Struct):
    a: str
    b: str
    states: list[StateRecord]
    edges: list[EdgeRecord]
    models: ModelDiffRecord | None


class CompareFile(msgspec.Struct, forbid_unknown_fields=True):
    """The ``quicsm-compare`` JSON (docs/compare.md); :func:`to_json` writes it."""

    format: Literal["quicsm-compare"]
    format_version: int
    options: OptionsRecord
    sets: list[SetRecord]
    warnings: list[str]
    occupancy: dict[str, list[OccupancyRecord]]
    """Per set, every state's occupancy summary."""
    comparisons: list[PairRecord]


def state_record(r: StateRow) -> StateRecord:
    """The one record of a state test (unrounded: :meth:`StateRecord.rounded` for the JSON's values)."""
    res = r.result
    return StateRecord(
        *(r.state, r.mean_a, r.mean_b, r.difference, res.p_value, r.p_corrected, r.significant, res.test),
        *(res.statistic, res.effect_size, res.effect_measure, r.n_a, r.n_b, r.visited_a, r.visited_b, res.note or None),
    )


def edge_record(r: EdgeRow) -> EdgeRecord:
    """The one record of an edge test (unrounded: :meth:`EdgeRecord.rounded` for the JSON's values)."""
    res = r.result
    return EdgeRecord(
        *(r.src, r.dst, r.prob_a, r.prob_b, r.difference, res.p_value, r.p_corrected, r.significant, res.test),
        *(r.count_a, r.count_b, r.out_a, r.out_b, r.only_in, res.note or None),
    )


def _set_record(s: SetInfo) -> SetRecord:
    skipped = SkippedRecord(s.skipped_records, list(s.skipped_files))
    return SetRecord(
        *(s.name, s.origin, s.traces, s.connections, s.dropped, list(s.controllers), list(s.implementations)),
        *(list(s.versions), s.sources, skipped if s.skipped_records or s.skipped_files else msgspec.UNSET),
        s.inferred or msgspec.UNSET,
    )


def to_json(c: Comparison) -> dict[str, Any]:
    """The documented ``quicsm-compare`` JSON (docs/compare.md)."""
    return {
        "format": "quicsm-compare",
        "format_version": COMPARE_FORMAT_VERSION,
        "options": c.options.to_json(),
        "sets": [msgspec.to_builtins(_set_record(s)) for s in c.sets],
        "warnings": list(c.warnings),
        "occupancy": {
            name: [
                msgspec.to_builtins(
                    OccupancyRecord(
                        s.state, s.n, s.visited, *map(json_number, (s.mean, s.median, s.ci_low, s.ci_high, s.pooled))
                    )
                )
                for s in rows
            ]
            for name, rows in c.summaries.items()
        },
        "comparisons": [
            {
                "a": p.a,
                "b": p.b,
                "states": [msgspec.to_builtins(state_record(r).rounded()) for r in p.states],
                "edges": [msgspec.to_builtins(edge_record(r).rounded()) for r in p.edges],
                "models": p.models.to_json() if p.models else None,
            }
            for p in c.pairs
        ],
    }


def to_json_text(c: Comparison) -> str:
    return json.dumps(to_json(c), indent=2, allow_nan=False) + "\n"


CSV_COLUMNS = (
    "kind a b item value_a value_b difference p_value p_corrected significant test effect_size effect_measure n_a n_b note"
).split()


def to_csv(c: Comparison) -> str:
    """One row per state test (kind=state, values are mean shares) and per edge (kind=edge, probabilities).
    Text from the inputs (set, state names, notes) is formula-safe (:func:`quicsm.textsafe.csv_cell`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")  # None is written as an empty cell
    w.writerow(CSV_COLUMNS)
    for p in c.pairs:
        a, b = csv_cell(p.a), csv_cell(p.b)
        for j in (state_record(r).rounded() for r in p.states):
            w.writerow(
                ["state", a, b, csv_cell(j.state), j.mean_a, j.mean_b, j.difference, j.p_value, j.p_corrected]
                + [j.significant, j.test, j.effect_size, j.effect_measure, j.n_a, j.n_b, csv_cell(j.note or "")]
            )
        for e in (edge_record(r).rounded() for r in p.edges):
            w.writerow(
                ["edge", a, b, csv_cell(f"{e.src}->{e.dst}"), e.prob_a, e.prob_b, e.difference, e.p_value]
                + [e.p_corrected, e.significant, e.test, e.difference, "difference", e.out_a, e.out_b]
                + [csv_cell(_notes(e.note, _only(e)))]
            )
    return buf.getvalue()


def by_corrected_p(rows: Sequence[R], record: Callable[[R], Rec]) -> list[Rec]:
    """The rows' records, the smallest corrected p first, those without one last (the report tables' order)."""
    return [record(r) for r in sorted(rows, key=lambda r: (r.p_corrected is None, r.p_corrected or 0.0))]


def _only(e: EdgeRecord) -> str:
    return f"only in {e.only_in}" if e.only_in else ""


def _notes(*notes: str | None) -> str:
    return "; ".join(n for n in notes if n)


def fmt_p(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.3f}"


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def fmt_pp(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f} pp"


def _signed(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}"


def _ci(lo: float | None, hi: float | None) -> str:
    return "n/a" if lo is None or hi is None else f"[{100 * lo:.1f}, {100 * hi:.1f}]"


def _sig(flag: bool) -> str:
    return "*" if flag else ""


def _table(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        return out + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _render(c: Comparison, markdown: bool) -> str:
    o = c.options
    h = (lambda t: f"## {t}") if markdown else (lambda t: f"{t}\n{'=' * len(t)}")
    # text from the inputs: one escaped line on a terminal; in Markdown names are code spans, sentences escaped
    safe = md_text if markdown else terminal
    name = (lambda t: md_name(t, in_table=True)) if markdown else terminal
    out: list[str] = []
    if markdown:
        out.append("# quicsm compare\n")
    sets_rows = [
        [name(s.name), str(s.connections), str(s.traces), safe(", ".join(s.controllers)) or "?", safe(s.origin)]
        for s in c.sets
    ]
    out += _table(["set", "connections", "traces", "cc", "origin"], sets_rows, markdown)
    out.append("")
    out.append(
        f"test: {o.test}, {o.correction} correction, alpha {o.alpha}; edges: {o.edge_test}; "
        f"{int(o.confidence * 100)}% bootstrap CI ({o.resamples} resamples, seed {o.seed}); * = significant"
    )
    if c.warnings:
        out.append("")
        out += [f"warning: {safe(w)}" if not markdown else f"- **warning**: {safe(w)}" for w in c.warnings]
    out += ["", h("Occupancy (mean share of connection time)")]
    header = ["state"] + [name(n) for n in c.summaries] + [f"{name(n)} CI" for n in c.summaries]
    rows = []
    for k, st in enumerate(c.states):
        rows.append(
            [name(st)]
            + [fmt_pct(c.summaries[n][k].mean) for n in c.summaries]
            + [_ci(c.summaries[n][k].ci_low, c.summaries[n][k].ci_high) for n in c.summaries]
        )
    out += _table(header, rows, markdown)
    for p in c.pairs:
        a, b = name(p.a), name(p.b)
        out += ["", h(f"{safe(p.b)} vs {safe(p.a)}: states")]
        rows = [
            [
                name(j.state),
                fmt_pct(j.mean_a),
                fmt_pct(j.mean_b),
                fmt_pp(j.difference),
                fmt_p(j.p_value),
                fmt_p(j.p_corrected) + _sig(j.significant),
                _signed(j.effect_size),
                safe(j.note or ""),
            ]
            for j in by_corrected_p(p.states, state_record)
        ]
        out += _table(["state", a, b, "diff", "p", "p adj", "effect", "note"], rows, markdown)
        out += ["", h(f"{safe(p.b)} vs {safe(p.a)}: transitions")]
        erows = [e for e in p.edges if e.result.p_value is not None or e.only_in]
        rows = [
            [
                name(f"{j.src} -> {j.dst}"),
                fmt_pct(j.prob_a),
                fmt_pct(j.prob_b),
                fmt_pp(j.difference),
                fmt_p(j.p_value),
                fmt_p(j.p_corrected) + _sig(j.significant),
                safe(_only(j) or j.note or ""),
            ]
            for j in by_corrected_p(erows, edge_record)
        ]
        out += _table(["edge", a, b, "diff", "p", "p adj", "note"], rows, markdown)
        hidden = len(p.edges) - len(erows)
        if hidden:
            out.append(f"({hidden} edge(s) with the same fixed probability in both sets not listed)")
        if p.models:
            out += ["", *model_lines(p.models.to_json(), h, safe)]
    return "\n".join(out) + "\n"


def model_lines(m: dict[str, Any], h: Callable[[str], str], safe: Callable[[str], str] = str) -> list[str]:
    """The model differences as lines; ``safe`` makes text from the inputs safe where the lines go
    (:mod:`quicsm.textsafe`; the HTML writer's templates escape on their own)."""
    out = [h(f"{safe(m['b'])} vs {safe(m['a'])}: models ({m['engine']}, {m['nodes']['b']} vs {m['nodes']['a']} nodes)")]
    for kind in ("states", "edges"):
        for side in ("a", "b"):
            if items := m[f"{kind}_only_in_{side}"]:
                shown = items if kind == "states" else [f"{s}->{d}" for s, d in items]
                out.append(f"{kind} only in {safe(m[side])}: {safe(', '.join(shown))}")
    for key, who, other in (("accepted_by_a_not_b", m["a"], m["b"]), ("accepted_by_b_not_a", m["b"], m["a"])):
        for w in m[key]:
            seq = safe(" ".join(w["sequence"])) or "(empty)"
            out.append(f"accepted by {safe(who)}, not {safe(other)}: {seq}  [{safe(w['divergence'])}]")
    for key, who, other in (("a_by_b", m["a"], m["b"]), ("b_by_a", m["b"], m["a"])):
        r = m["traces_rejected"].get(key)
        if r and r["count"]:
            out.append(
                f"{r['count']} of {r['of']} {safe(who)} connection(s) impossible in the {safe(other)} model "
                f"(e.g. {safe(r['example'])})"
            )
    if m["identical_language"] and not any(
        m[k] for k in ("states_only_in_a", "states_only_in_b", "edges_only_in_a", "edges_only_in_b")
    ):
        out.append("the two models are identical in structure and accepted sequences")
    out += [f"note: {safe(n)}" for n in m["notes"]]
    return out


def to_text(c: Comparison) -> str:
    return _render(c, markdown=False)


def to_markdown(c: Comparison) -> str:
    return _render(c, markdown=True)


WRITERS: dict[str, Callable[[Comparison], str]] = {
    "text": to_text,
    "json": to_json_text,
    "csv": to_csv,
    "markdown": to_markdown,
}
"""``--format`` name -> writer; HTML lives in :mod:`quicsm.compare.html` (it needs Graphviz)."""
