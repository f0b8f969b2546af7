"""Writers for a :class:`Comparison`: JSON (docs/compare.md), CSV, Markdown and a terminal table.

All numbers go out as finite floats or ``null``; ``json.dumps(..., allow_nan=False)`` enforces it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from typing import Any

from quicsm.compare.comparison import Comparison, EdgeRow, StateRow

__all__ = [
    "COMPARE_FORMAT_VERSION",
    "WRITERS",
    "fmt_p",
    "model_lines",
    "to_csv",
    "to_json",
    "to_json_text",
    "to_markdown",
    "to_text",
]

COMPARE_FORMAT_VERSION = 1


def _num(x: float | None, digits: int = 6) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), digits)


def _p(x: float | None) -> float | None:
    """p-values keep their magnitude (1e-12 must not round to 0)."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.4g}")


def _state_json(r: StateRow) -> dict[str, Any]:
    return {
        "state": r.state,
        "mean_a": _num(r.mean_a),
        "mean_b": _num(r.mean_b),
        "difference": _num(r.difference),
        "p_value": _p(r.result.p_value),
        "p_corrected": _p(r.p_corrected),
        "significant": r.significant,
        "test": r.result.test,
        "statistic": _num(r.result.statistic, 4),
        "effect_size": _num(r.result.effect_size, 4),
        "effect_measure": r.result.effect_measure,
        "n_a": r.n_a,
        "n_b": r.n_b,
        "visited_a": r.visited_a,
        "visited_b": r.visited_b,
        "note": r.result.note or None,
    }


def _edge_json(r: EdgeRow) -> dict[str, Any]:
    return {
        "src": r.src,
        "dst": r.dst,
        "prob_a": _num(r.prob_a),
        "prob_b": _num(r.prob_b),
        "difference": _num(r.difference),
        "p_value": _p(r.result.p_value),
        "p_corrected": _p(r.p_corrected),
        "significant": r.significant,
        "test": r.result.test,
        "count_a": r.count_a,
        "count_b": r.count_b,
        "out_a": r.out_a,
        "out_b": r.out_b,
        "only_in": r.only_in,
        "note": r.result.note or None,
    }


def to_json(c: Comparison) -> dict[str, Any]:
    """The documented ``quicsm-compare`` JSON (docs/compare.md)."""
    return {
        "format": "quicsm-compare",
        "format_version": COMPARE_FORMAT_VERSION,
        "options": c.options.to_json(),
        "sets": [
            {
                "name": s.name,
                "origin": s.origin,
                "traces": s.traces,
                "connections": s.connections,
                "dropped": s.dropped,
                "controllers": list(s.controllers),
                "implementations": list(s.implementations),
                "versions": list(s.versions),
                "sources": s.sources,
                **(
                    {"skipped": {"records": s.skipped_records, "files": list(s.skipped_files)}}
                    if s.skipped_records or s.skipped_files
                    else {}
                ),
            }
            for s in c.sets
        ],
        "warnings": list(c.warnings),
        "occupancy": {
            name: [
                {
                    "state": s.state,
                    "n": s.n,
                    "visited": s.visited,
                    "mean": _num(s.mean),
                    "median": _num(s.median),
                    "ci_low": _num(s.ci_low),
                    "ci_high": _num(s.ci_high),
                    "pooled": _num(s.pooled),
                }
                for s in rows
            ]
            for name, rows in c.summaries.items()
        },
        "comparisons": [
            {
                "a": p.a,
                "b": p.b,
                "states": [_state_json(r) for r in p.states],
                "edges": [_edge_json(r) for r in p.edges],
                "models": p.models.to_json() if p.models else None,
            }
            for p in c.pairs
        ],
    }


def to_json_text(c: Comparison) -> str:
    return json.dumps(to_json(c), indent=2, allow_nan=False) + "\n"


CSV_COLUMNS = [
    "kind",
    "a",
    "b",
    "item",
    "value_a",
    "value_b",
    "difference",
    "p_value",
    "p_corrected",
    "significant",
    "test",
    "effect_size",
    "effect_measure",
    "n_a",
    "n_b",
    "note",
]


def to_csv(c: Comparison) -> str:
    """One row per state test (kind=state, values are mean shares) and per edge (kind=edge, probabilities)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)

    def blank(x):
        return "" if x is None else x

    for p in c.pairs:
        for r in p.states:
            j = _state_json(r)
            w.writerow(
                [
                    "state",
                    p.a,
                    p.b,
                    r.state,
                    j["mean_a"],
                    j["mean_b"],
                    j["difference"],
                    blank(j["p_value"]),
                    blank(j["p_corrected"]),
                    r.significant,
                    j["test"],
                    blank(j["effect_size"]),
                    j["effect_measure"],
                    r.n_a,
                    r.n_b,
                    r.result.note,
                ]
            )
        for e in p.edges:
            j = _edge_json(e)
            w.writerow(
                [
                    "edge",
                    p.a,
                    p.b,
                    f"{e.src}->{e.dst}",
                    blank(j["prob_a"]),
                    blank(j["prob_b"]),
                    blank(j["difference"]),
                    blank(j["p_value"]),
                    blank(j["p_corrected"]),
                    e.significant,
                    j["test"],
                    blank(j["difference"]),
                    "difference",
                    e.out_a,
                    e.out_b,
                    "; ".join(x for x in (e.result.note, f"only in {e.only_in}" if e.only_in else "") if x),
                ]
            )
    return buf.getvalue()


def fmt_p(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.3f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


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
    out: list[str] = []
    if markdown:
        out.append("# quicsm compare\n")
    sets_rows = [[s.name, str(s.connections), str(s.traces), ", ".join(s.controllers) or "?", s.origin] for s in c.sets]
    out += _table(["set", "connections", "traces", "cc", "origin"], sets_rows, markdown)
    out.append("")
    out.append(
        f"test: {o.test}, {o.correction} correction, alpha {o.alpha}; edges: {o.edge_test}; "
        f"{int(o.confidence * 100)}% bootstrap CI ({o.resamples} resamples, seed {o.seed}); * = significant"
    )
    if c.warnings:
        out.append("")
        out += [f"warning: {w}" if not markdown else f"- **warning**: {w}" for w in c.warnings]
    out.append("")
    out.append(h("Occupancy (mean share of connection time)"))
    header = ["state"] + [f"{n}" for n in c.summaries] + [f"{n} CI" for n in c.summaries]
    rows = []
    for k, st in enumerate(c.states):
        rows.append(
            [st]
            + [_pct(c.summaries[n][k].mean) for n in c.summaries]
            + [_ci(c.summaries[n][k].ci_low, c.summaries[n][k].ci_high) for n in c.summaries]
        )
    out += _table(header, rows, markdown)
    for p in c.pairs:
        out.append("")
        out.append(h(f"{p.b} vs {p.a}: states"))
        rows = [
            [
                r.state,
                _pct(r.mean_a),
                _pct(r.mean_b),
                f"{100 * r.difference:+.1f} pp",
                fmt_p(r.result.p_value),
                fmt_p(r.p_corrected) + _sig(r.significant),
                "n/a" if r.result.effect_size is None else f"{r.result.effect_size:+.2f}",
                r.result.note,
            ]
            for r in sorted(p.states, key=lambda r: (r.p_corrected is None, r.p_corrected or 0.0))
        ]
        out += _table(["state", p.a, p.b, "diff", "p", "p adj", "effect", "note"], rows, markdown)
        out.append("")
        out.append(h(f"{p.b} vs {p.a}: transitions"))
        erows = [e for e in p.edges if e.result.p_value is not None or e.only_in]
        rows = [
            [
                f"{e.src} -> {e.dst}",
                _pct(e.prob_a),
                _pct(e.prob_b),
                "n/a" if e.difference is None else f"{100 * e.difference:+.1f} pp",
                fmt_p(e.result.p_value),
                fmt_p(e.p_corrected) + _sig(e.significant),
                f"only in {e.only_in}" if e.only_in else e.result.note,
            ]
            for e in sorted(erows, key=lambda e: (e.p_corrected is None, e.p_corrected or 0.0))
        ]
        out += _table(["edge", p.a, p.b, "diff", "p", "p adj", "note"], rows, markdown)
        hidden = len(p.edges) - len(erows)
        if hidden:
            out.append(f"({hidden} edge(s) with the same fixed probability in both sets not listed)")
        if p.models:
            out.append("")
            out += model_lines(p.models.to_json(), h)
    return "\n".join(out) + "\n"


def model_lines(m: dict[str, Any], h: Callable[[str], str]) -> list[str]:
    out = [h(f"{m['b']} vs {m['a']}: models ({m['engine']}, {m['nodes']['b']} vs {m['nodes']['a']} nodes)")]
    for key, label in (
        ("states_only_in_a", f"states only in {m['a']}"),
        ("states_only_in_b", f"states only in {m['b']}"),
    ):
        if m[key]:
            out.append(f"{label}: {', '.join(m[key])}")
    for key, label in (("edges_only_in_a", f"edges only in {m['a']}"), ("edges_only_in_b", f"edges only in {m['b']}")):
        if m[key]:
            out.append(f"{label}: {', '.join(f'{s}->{d}' for s, d in m[key])}")
    for key, who, other in (("accepted_by_a_not_b", m["a"], m["b"]), ("accepted_by_b_not_a", m["b"], m["a"])):
        for w in m[key]:
            out.append(f"accepted by {who}, not {other}: {' '.join(w['sequence']) or '(empty)'}  [{w['divergence']}]")
    for key, who, other in (("a_by_b", m["a"], m["b"]), ("b_by_a", m["b"], m["a"])):
        r = m["traces_rejected"].get(key)
        if r and r["count"]:
            out.append(
                f"{r['count']} of {r['of']} {who} connection(s) impossible in the {other} model (e.g. {r['example']})"
            )
    if m["identical_language"] and not any(
        m[k] for k in ("states_only_in_a", "states_only_in_b", "edges_only_in_a", "edges_only_in_b")
    ):
        out.append("the two models are identical in structure and accepted sequences")
    out += [f"note: {n}" for n in m["notes"]]
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
