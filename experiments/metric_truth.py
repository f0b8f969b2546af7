"""How well quicsm reads congestion states from qlog metrics, against instrumented truth (issue 35).

Each connection is read three ways through quicsm's own reader: its qlog with the state events set
aside (``states="metrics"``: what a stack that logs no state gives), the same qlog's logged states
(``states="logged"``), and, for testbed runs, the instrumented server's contract lines (``server.log``),
whose clock is aligned to the qlog's by the sender's first state (both written when the sender is made).

Scores per connection: per state, the time-share error (inferred share - true share over the same
span); per transition, matched one to one between the same two states within ``max(2 ms, min RTT / 4)``.
Per state over all connections: the share of connections with |error| <= 0.02, precision and recall of
the transitions into that state, and a confusion matrix of time (true state x inferred state).

    python3 experiments/metric_truth.py --out experiments/metric_truth TUNING... --heldout HELDOUT...

Inputs: testbed run directories (a ``qlog/`` folder beside ``server.log``) and qlog files with states
(quiche's, quic-go's own). A stack whose qlog logs no state (quinn) is scored against its contract lines
only, its clock aligned by its first inferred state. Two sets: the tuning set (the rules were studied on
it) and ``--heldout`` (connections no rule was studied on, never read before they are scored), each reported
on its own. Writes OUT.md (tables) and OUT_confusion.svg.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from quicsm.traces import parse_inputs
from quicsm.traces.events import Trace

TOL = 0.02
MERGE_QLOG = {
    "CongestionAvoidanceMaxed": "CongestionAvoidance",
    **{f"ProbeBw.{p}": "ProbeBw" for p in ("Up", "Down", "Cruise", "Refill")},
}
"""States the truth and the reader name apart but which are one state here."""
TIMEOUTS = ("ProbeTimeout", "RetransmissionTimeout", "TailLossProbe")


@dataclass
class Seq:
    """A connection's states as (entry time, state), over [start, end]."""

    t: np.ndarray
    s: list[str]
    start: int
    end: int
    min_rtt_us: int = 0

    @classmethod
    def of(cls, tr: Trace, merge: dict[str, str], drop: tuple[str, ...] = (), shift: int = 0) -> Seq:
        ev = [e for e in tr.events if e.kind == "transition"]
        t: list[int] = []
        s: list[str] = []
        for e in ev:
            name = merge.get(e.state, e.state)
            if name in drop:  # a timeout the truth does not log: the state before it goes on
                continue
            if s and s[-1] == name:
                continue
            t.append(e.t_us - shift)
            s.append(name)
        mins = [e.min_rtt_us for e in tr.events if e.min_rtt_us]
        return cls(np.asarray(t, np.int64), s, tr.start_us - shift, tr.end_us - shift, min(mins) if mins else 0)

    def shares(self, start: int, end: int) -> dict[str, float]:
        times = np.clip(np.append(self.t, end), start, end)
        out: dict[str, float] = defaultdict(float)
        for i, name in enumerate(self.s):
            out[name] += float(times[i + 1] - times[i])
        total = max(end - start, 1)
        return {k: v / total for k, v in out.items()}

    def transitions(self) -> list[tuple[int, str, str]]:
        return [(int(self.t[i]), self.s[i - 1], self.s[i]) for i in range(1, len(self.s))]


@dataclass
class Tally:
    within: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    tp: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    n_truth: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    n_inferred: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    confusion: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    connections: int = 0
    all_within: int = 0
    wrong: Counter[str] = field(default_factory=Counter)
    """Inferred transitions no truth transition matched ("A->B"), by kind."""
    missed: Counter[str] = field(default_factory=Counter)
    """Truth transitions no inferred one matched, by kind."""


def match(
    truth: Seq, inferred: Seq, tol: int
) -> tuple[list[tuple[int, str, str]], list[tuple[int, str, str]], list[tuple[int, str, str]]]:
    """The inferred transitions that match a truth transition (same states, within ``tol``, one to one),
    the inferred ones that match none, and the truth ones left unmatched."""
    pool = truth.transitions()
    used = [False] * len(pool)
    hits, wrong = [], []
    for t, a, b in inferred.transitions():
        best, bestd = -1, tol + 1
        for k, (u, x, y) in enumerate(pool):
            if not used[k] and x == a and y == b and abs(u - t) < bestd:
                best, bestd = k, abs(u - t)
        if best >= 0:
            used[best] = True
            hits.append((t, a, b))
        else:
            wrong.append((t, a, b))
    return hits, wrong, [p for k, p in enumerate(pool) if not used[k]]


def score(truth: Seq, inferred: Seq, tally: Tally) -> dict[str, float]:
    start, end = truth.start, truth.end
    a, b = truth.shares(start, end), inferred.shares(start, end)
    errs = {k: b.get(k, 0.0) - a.get(k, 0.0) for k in set(a) | set(b) if k != "Init"}
    for k, e in errs.items():
        tally.errors[k].append(e)
        tally.within[k].append(abs(e) <= TOL)
    tally.connections += 1
    tally.all_within += all(abs(e) <= TOL for e in errs.values())
    tol = max(2000, truth.min_rtt_us // 4)
    for _, _, to in truth.transitions():
        tally.n_truth[to] += 1
    for _, _, to in inferred.transitions():
        tally.n_inferred[to] += 1
    hits, wrong, missed = match(truth, inferred, tol)
    for _, _, to in hits:
        tally.tp[to] += 1
    tally.wrong.update(f"{a}->{b}" for _, a, b in wrong)
    tally.missed.update(f"{a}->{b}" for _, a, b in missed)
    cuts = np.unique(np.clip(np.concatenate([truth.t, inferred.t, [start, end]]), start, end))
    mid = (cuts[:-1] + cuts[1:]) / 2
    ti = np.searchsorted(truth.t, mid, side="right") - 1
    ii = np.searchsorted(inferred.t, mid, side="right") - 1
    for d, x, y in zip(np.diff(cuts).tolist(), ti.tolist(), ii.tolist()):
        if x >= 0 and y >= 0 and d > 0:
            tally.confusion[(truth.s[x], inferred.s[y])] += d
    return errs


def one(path: str, states: str) -> Trace | None:
    got = parse_inputs([path], states=states, require_transitions=False).traces
    return got[0] if len(got) == 1 else None


def connections(inputs: list[str]) -> list[tuple[str, str, str | None]]:
    """(label, qlog path, contract log path or None) for every input."""
    out: list[tuple[str, str, str | None]] = []
    for root in inputs:
        p = Path(root)
        if p.is_file():
            out.append((p.parent.name, str(p), None))
            continue
        for run in sorted(d for d in p.iterdir() if d.is_dir()):
            qlogs = sorted((run / "qlog").glob("*.sqlog")) if (run / "qlog").is_dir() else []
            if len(qlogs) == 1 and (run / "server.log").exists():
                meta = json.loads((run / "meta.json").read_text()) if (run / "meta.json").exists() else {}
                if meta.get("status", "ok") not in ("ok",) and not meta.get("ok", True):
                    continue
                out.append((f"{p.name}/{run.name.rsplit('-', 1)[0]}", str(qlogs[0]), str(run / "server.log")))
    return out


def table(tally: Tally, title: str) -> list[str]:
    states = sorted(set(tally.within) | set(tally.n_truth) | set(tally.n_inferred))
    lines = [
        f"### {title}",
        "",
        f"{tally.connections} connections; all states within {TOL} on {tally.all_within} "
        f"({100 * tally.all_within / max(tally.connections, 1):.1f} %).",
        "",
        "| state | connections | within 0.02 | median error | worst error | transitions in (truth) | precision | recall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in states:
        w = tally.within.get(s, [])
        e = tally.errors.get(s, [])
        nt, ni, tp = tally.n_truth.get(s, 0), tally.n_inferred.get(s, 0), tally.tp.get(s, 0)
        prec = f"{tp / ni:.3f}" if ni else "-"
        rec = f"{tp / nt:.3f}" if nt else "-"
        share = f"{100 * sum(w) / len(w):.1f} %" if w else "-"
        med = f"{np.median(e):+.4f}" if e else "-"
        worst = f"{max(e, key=abs):+.4f}" if e else "-"
        lines.append(f"| {s} | {len(w)} | {share} | {med} | {worst} | {nt} | {prec} | {rec} |")
    tp, nt, ni = sum(tally.tp.values()), sum(tally.n_truth.values()), sum(tally.n_inferred.values())
    lines += [
        "",
        f"All transitions: precision {tp / max(ni, 1):.3f} ({tp}/{ni}), recall {tp / max(nt, 1):.3f} ({tp}/{nt}).",
        "",
    ]
    if tally.wrong or tally.missed:
        lines += [
            "Transitions that did not match, by kind (the most frequent; a wrong one is read where the truth has",
            "none of that kind within the tolerance, a missed one is the truth's with no inferred match): wrong "
            + ", ".join(f"{k} {v}" for k, v in tally.wrong.most_common(6))
            + "; missed "
            + ", ".join(f"{k} {v}" for k, v in tally.missed.most_common(6))
            + ".",
            "",
        ]
    return lines


def confusion_svg(tallies: list[tuple[str, Tally]], path: Path) -> None:
    """One heatmap per comparison: rows the true state, columns the inferred one, cells the share of the
    row's time (darker = more)."""
    cell, pad, label_w = 46, 14, 190
    blocks = []
    x0 = 0
    height = 0
    for title, tally in tallies:
        states = sorted({a for a, _ in tally.confusion} | {b for _, b in tally.confusion})
        n = len(states)
        w = label_w + n * cell + pad
        h = 40 + 150 + n * cell + pad
        height = max(height, h)
        parts = [f'<text x="{x0 + 4}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
        parts.append(f'<text x="{x0 + label_w}" y="32" font-size="11">inferred state</text>')
        for j, s in enumerate(states):
            cx = x0 + label_w + j * cell + cell / 2
            parts.append(f'<text x="{cx}" y="186" font-size="11" transform="rotate(-60 {cx} 186)">{escape(s)}</text>')
        for i, a in enumerate(states):
            row = sum(tally.confusion.get((a, b), 0.0) for b in states)
            y = 190 + i * cell
            parts.append(
                f'<text x="{x0 + label_w - 6}" y="{y + cell / 2 + 4}" font-size="11" text-anchor="end">{escape(a)}</text>'
            )
            for j, b in enumerate(states):
                v = tally.confusion.get((a, b), 0.0) / row if row else 0.0
                shade = int(255 - 215 * v)
                color = f"rgb({shade},{shade},255)" if a == b else f"rgb(255,{shade},{shade})"
                x = x0 + label_w + j * cell
                parts.append(f'<rect x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{color}"/>')
                ink = "white" if v > 0.6 else "black"
                parts.append(
                    f'<text x="{x + cell / 2 - 1}" y="{y + cell / 2 + 4}" font-size="10" text-anchor="middle" '
                    f'fill="{ink}">{v:.3f}</text>'
                )
        blocks.append("\n".join(parts))
        x0 += w + 30
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{x0}" height="{height + 30}" font-family="sans-serif">\n'
        f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(blocks) + "\n"
        f'<text x="4" y="{height + 20}" font-size="11">rows: true state (instrumented); cells: share of that state\'s time '
        "the metric reader put in each state (blue: agreement, red: confusion)</text>\n</svg>\n"
    )
    path.write_text(svg)


@dataclass
class Scored:
    """One set of connections scored three ways (see the module docstring)."""

    vs_qlog: Tally = field(default_factory=Tally)
    vs_contract: Tally = field(default_factory=Tally)
    bbr_vs_contract: Tally = field(default_factory=Tally)
    """BBR senders (quinn) against their contract lines, apart from the loss-based ones."""
    logged_vs_contract: Tally = field(default_factory=Tally)
    per_scenario: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    refused: list[str] = field(default_factory=list)
    """Connections the reader refused to read states from (quinn's BBR), with its reason."""
    worst: list[tuple[str, str, float]] = field(default_factory=list)


def score_inputs(inputs: list[str]) -> Scored:
    out = Scored()
    for label, qlog, log in connections(inputs):
        parsed = parse_inputs([qlog], states="metrics", require_transitions=False)
        inferred = parsed.traces[0] if len(parsed.traces) == 1 else None
        logged = one(qlog, "logged")
        if inferred is None:
            why = [i.reason for i in parsed.report.issues if i.reason.startswith("states not read")]
            if why:
                out.refused.append(f"{label}: {why[0]}")
            continue
        if logged is not None:
            truth = Seq.of(logged, MERGE_QLOG)
            got = Seq.of(inferred, MERGE_QLOG, drop=TIMEOUTS)
            errs = score(truth, got, out.vs_qlog)
            score(truth, got, out.per_scenario[label])
            out.worst.append((label, Path(qlog).name, max((abs(v) for v in errs.values()), default=0.0)))
        contract = one(log, "auto") if log is not None else None
        if contract is None:
            continue
        # clocks: both write the sender's first state when the sender is made (a stack whose qlog logs
        # no state: its first inferred state, held from the connection's first event)
        first = logged if logged is not None else inferred
        shift = contract.events[0].t_us - first.events[0].t_us
        truth = Seq.of(contract, MERGE_QLOG, shift=shift)
        tally = out.bbr_vs_contract if contract.cc == "bbr" else out.vs_contract
        errs = score(truth, Seq.of(inferred, MERGE_QLOG), tally)
        if logged is not None:
            # the ceiling: the stack's own qlog states against its contract lines (no timeouts in qlog)
            score(
                Seq.of(contract, MERGE_QLOG, drop=TIMEOUTS, shift=shift),
                Seq.of(logged, MERGE_QLOG),
                out.logged_vs_contract,
            )
        else:
            score(truth, Seq.of(inferred, MERGE_QLOG), out.per_scenario[label])
            out.worst.append((label, Path(qlog).name, max((abs(v) for v in errs.values()), default=0.0)))
    return out


def report(scored: Scored, title: str) -> list[str]:
    lines = [f"## {title}", ""]
    if scored.vs_qlog.connections:
        lines += table(
            scored.vs_qlog, "Against the states the stack logged in the same qlog (timeouts set aside: qlog logs none)"
        )
    if scored.vs_contract.connections:
        lines += table(
            scored.vs_contract,
            "Loss-based senders against the instrumented server's contract lines (ProbeTimeout included)",
        )
    if scored.bbr_vs_contract.connections:
        lines += table(scored.bbr_vs_contract, "BBR (quinn) against the instrumented server's contract lines")
    if scored.logged_vs_contract.connections:
        lines += table(
            scored.logged_vs_contract,
            "For scale: the stack's own qlog states against its contract lines (two instruments of one sender)",
        )
    if scored.refused:
        reasons = sorted({r.split(": ", 1)[1] for r in scored.refused})
        lines += [
            f"{len(scored.refused)} connections refused by the reader (no states read): " + "; ".join(reasons),
            "",
        ]
    lines += ["### Per scenario", ""]
    lines += [
        "| scenario | connections | all states within 0.02 | transitions precision | recall |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, t in sorted(scored.per_scenario.items()):
        tp, nt, ni = sum(t.tp.values()), sum(t.n_truth.values()), sum(t.n_inferred.values())
        lines.append(f"| {name} | {t.connections} | {t.all_within} | {tp / max(ni, 1):.3f} | {tp / max(nt, 1):.3f} |")
    worst = sorted(scored.worst, key=lambda r: -r[2])[:5]
    lines += [
        "",
        "Worst connections (largest |error| of any state): " + "; ".join(f"{a} {b} {c:.3f}" for a, b, c in worst),
        "",
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", help="the tuning set: connections the rules were studied on")
    ap.add_argument(
        "--heldout", nargs="*", default=[], help="connections no rule was studied on, never read before this scoring"
    )
    ap.add_argument(
        "--section",
        nargs="+",
        action="append",
        default=[],
        metavar="TITLE INPUT",
        help="another set scored and reported on its own (a title, then its inputs; repeatable)",
    )
    ap.add_argument("--out", required=True, help="prefix of OUT.md and OUT_confusion.svg")
    a = ap.parse_args()
    tuning = score_inputs(a.inputs)
    heldout = score_inputs(a.heldout) if a.heldout else None
    load = os.getloadavg()
    out = Path(a.out)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    n_held = heldout.vs_qlog.connections + heldout.bbr_vs_contract.connections if heldout else 0
    n_tuning = tuning.vs_qlog.connections + tuning.bbr_vs_contract.connections
    lines = [
        "# Congestion states read from qlog metrics, against instrumented truth",
        "",
        "Written by `python3 experiments/metric_truth.py` (its docstring says how it scores; the runs and the",
        "reading: metric_truth.notes.md); "
        f"{n_tuning} connections in the tuning set, {n_held} held out; machine load"
        f" {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} when scored (quicsm {head}).",
        "",
        f"The confusion picture `{out.name}_confusion.svg` (time of each true state by the state the reader gave)",
        f"is made by the same command: `python3 experiments/metric_truth.py --out experiments/{out.name} INPUTS"
        " --heldout INPUTS`.",
        "",
    ]
    lines += report(tuning, "Tuning set (the rules were studied on these)")
    if heldout is not None:
        lines += report(heldout, "Held-out set (no rule was studied on it; never read before this scoring)")
    for title, *inputs in a.section:
        lines += report(score_inputs(inputs), title)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    tallies = [("tuning set: vs logged qlog states", tuning.vs_qlog)]
    if heldout is not None and heldout.vs_qlog.connections:
        tallies.append(("held out: vs logged qlog states", heldout.vs_qlog))
    if heldout is not None and heldout.vs_contract.connections:
        tallies.append(("held out: vs contract lines", heldout.vs_contract))
    if heldout is not None and heldout.bbr_vs_contract.connections:
        tallies.append(("held out: quinn BBR vs contract lines", heldout.bbr_vs_contract))
    confusion_svg(tallies, out.parent / f"{out.name}_confusion.svg")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
