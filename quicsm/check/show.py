"""What ``quicsm baseline show`` prints: per set its connections, versions, mean occupancy and visits."""

from __future__ import annotations

from typing import Any

import numpy as np

from quicsm.check.bundle import Baseline
from quicsm.compare.occupancy import occupancy_table
from quicsm.textsafe import terminal

__all__ = ["summary", "summary_text"]


def summary(b: Baseline) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source": b.source,
        "tool": b.tool,
        "engine": b.engine,
        "view": {"phases": b.view.phases, "recovery": b.view.recovery},
        "split_by": b.split_by,
        "connections": b.connections,
        "sets": [],
    }
    for s in b.sets:
        occ = occupancy_table(s.rows)
        states = []
        for j, st in enumerate(occ.states):
            states.append(
                {
                    "state": st,
                    "mean_share": round(float(occ.shares[:, j].mean()), 4) if occ.n else 0.0,
                    "visited": occ.visited(st),
                    "mean_visits": round(float(occ.visits[:, j].mean()), 3) if occ.n else 0.0,
                }
            )
        m = s.model
        out["sets"].append(
            {
                "name": s.name,
                "origin": s.origin,
                "connections": len(s.rows),
                "controllers": sorted({r.trace.cc for r in s.rows if r.trace.cc}),
                "implementations": sorted({r.trace.implementation for r in s.rows if r.trace.implementation}),
                "versions": sorted({r.trace.version for r in s.rows if r.trace.version}),
                "mean_duration_ms": round(float(np.mean([r.duration_us for r in s.rows])) / 1000, 1),
                "states": states,
                "model": {"engine": m.model.engine, "nodes": len(m.model.nodes), "edges": len(m.model.edges)},
            }
        )
    return out


def summary_text(b: Baseline) -> str:
    """The summary for a terminal: names from the bundle (states, sets, versions, paths) shown escaped."""
    d = summary(b)
    t = terminal
    view = ("PROBE_BW phases" if b.view.phases else "phases folded") + (
        ", BBR recovery states" if b.view.recovery else ""
    )
    lines = [
        f"{t(d['source'])}: baseline bundle written by {t(d['tool'])}; {d['connections']} connection(s) in "
        f"{len(d['sets'])} set(s){f', split by {t(b.split_by)}' if b.split_by else ''}; engine {t(b.engine)}; {view}"
    ]
    for s in d["sets"]:
        lines.append("")
        lines.append(
            f"set {t(s['name'])}: {s['connections']} connection(s), "
            f"{t(' '.join(s['implementations'] + s['versions'])) or '?'}, "
            f"cc {t(', '.join(s['controllers'])) or '?'}, mean length {s['mean_duration_ms']} ms; "
            f"model {s['model']['nodes']} nodes, {s['model']['edges']} edges"
        )
        lines.append(f"  from {t(s['origin'])}")
        names = [t(x["state"]) for x in s["states"]]
        width = max(map(len, names), default=5)
        lines.append(f"  {'state'.ljust(width)}  mean share  visited  entries/conn")
        for name, x in zip(names, s["states"]):
            lines.append(
                f"  {name.ljust(width)}  {100 * x['mean_share']:9.1f}%  {x['visited']:7d}  {x['mean_visits']:12.2f}"
            )
    return "\n".join(lines) + "\n"
