"""Analysis of the Table 4 / Fig. 5 runs (see table4_fairness.py): tables with statistics, the
Fig. 5 timeline, and the traces bundled under traces/table4/."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, welch_p, write_report
from _flows import load_series

from quicsm.compare.fairness import FlowRun, fairness, fairness_markdown, flows_timeline_svg, load_flow_run
from quicsm.traces.events import StateView

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PAPER = {
    "tcp1": {"quic": (2.71, 0.46), "tcp1": (1.62, 1.27)},
    "tcp2": {"quic": (2.8, 1.16), "tcp1": (0.7, 0.21), "tcp2": (0.96, 0.3)},
    "tcp4": {
        "quic": (2.75, 1.2),
        "tcp1": (0.45, 0.14),
        "tcp2": (0.36, 0.09),
        "tcp3": (0.41, 0.11),
        "tcp4": (0.45, 0.13),
    },
}
TITLES = {
    "quicgo": "quic-go v0.65.0 Cubic vs Linux TCP Cubic",
    "quiche": "Cloudflare quiche 0.30.0 Cubic vs Linux TCP Cubic",
    "bbr2-tcpbbr": "quiche BBR2 vs Linux TCP BBR (v1)",
    "bbr2-tcpcubic": "quiche BBR2 vs Linux TCP Cubic",
    "quicgo-paced-tcp1": "quic-go Cubic vs Linux TCP Cubic with internal pacing (control)",
    "tcp-tcp": "Linux TCP Cubic vs Linux TCP Cubic (baseline)",
    "quicgo-quicgo": "quic-go Cubic vs quic-go Cubic (baseline)",
}


def _title(name: str) -> str:
    if name in TITLES:
        return TITLES[name]
    for k, v in TITLES.items():
        if name.startswith(k):
            return v + (
                f", {name.rsplit('-', 1)[1].replace('tcp', '')} TCP flow(s)" if k in ("quicgo", "quiche") else ""
            )
    return name


def _bundle(runs: list[Path], dest: Path, keep_qlog: Path | None) -> None:
    """meta.json of each run and each flow, every flow's server.log gzipped (mtime 0)."""
    for run in runs:
        out = dest / run.name
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        shutil.copy(run / "meta.json", out / "meta.json")
        for fdir in sorted(run.glob("flow-*")):
            fo = out / fdir.name
            fo.mkdir()
            shutil.copy(fdir / "meta.json", fo / "meta.json")
            with open(fdir / "server.log", "rb") as src, gzip.GzipFile(fo / "server.log.gz", "wb", mtime=0) as gz:
                shutil.copyfileobj(src, gz)
            if keep_qlog == run and (fdir / "qlog").is_dir():
                for q in (fdir / "qlog").iterdir():
                    (fo / "qlog").mkdir(exist_ok=True)
                    with open(q, "rb") as src, gzip.GzipFile(fo / "qlog" / (q.name + ".gz"), "wb", mtime=0) as gz:
                        shutil.copyfileobj(src, gz)


def _state_shares(runs: list[FlowRun]) -> str:
    """Per flow: mean share of the measurement window in each state and entries per second, so BBR
    modes (ProbeBw phases, ProbeRtt) can be read side by side for QUIC and the kernel's TCP."""
    shares: dict[str, dict[str, list[float]]] = {}
    rates: dict[str, dict[str, list[float]]] = {}
    for r in runs:
        lo, hi = r.window_s
        for f in r.flows:
            if f.trace is None or f.offset_s is None:
                continue
            sh: dict[str, float] = {}
            n: dict[str, int] = {}
            for v in f.trace.visits(StateView()):
                a, b = max(lo, f.t(v.start_us)), min(hi, f.t(v.end_us))
                if b > a:
                    sh[v.state] = sh.get(v.state, 0.0) + b - a
                    if f.t(v.start_us) >= lo:
                        n[v.state] = n.get(v.state, 0) + 1
            tot = sum(sh.values())
            if tot <= 0:
                continue
            for st, v in sh.items():
                shares.setdefault(f.name, {}).setdefault(st, []).append(v / tot)
                rates.setdefault(f.name, {}).setdefault(st, []).append(n.get(st, 0) / tot)
    states = sorted({st for d in shares.values() for st in d})
    if not states:
        return ""
    rows = ["| flow | " + " | ".join(states) + " |", "|---|" + "---:|" * len(states)]
    for name, d in shares.items():
        cells = []
        for st in states:
            xs = d.get(st, [])
            # a run where the flow never entered the state counts as 0
            m = sum(xs) / len(runs) if xs else 0.0
            e = sum(rates[name].get(st, [])) / len(runs)
            cells.append(f"{m:.1%} ({e:.2f}/s)" if xs else "-")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "Time share of each state over the window, mean over runs (entries per second):\n\n" + "\n".join(rows) + "\n"


def _draw(name: str, first: FlowRun) -> None:
    """``table4_NAME.svg`` from a scenario's first run, and Fig. 5 (``fig5_cwnd.svg``) from quicgo-tcp1's."""
    (HERE / f"table4_{name}.svg").write_text(
        flows_timeline_svg(first, title=f"{name}: {_title(name)} ({first.path.name})")
    )
    if name == "quicgo-tcp1":
        (HERE / "fig5_cwnd.svg").write_text(
            flows_timeline_svg(
                first, title=f"Fig. 5: cwnd of one QUIC (quic-go Cubic) and one TCP Cubic flow ({first.path.name})"
            )
        )


def figures(names: list[str]) -> None:
    """Redraw the pictures from the bundled traces (``traces/table4/NAME/NAME-NN``), leaving the report as
    it is: the runs' directories (and their redo counts) are not needed."""
    for name in names:
        runs = sorted((ROOT / "traces" / "table4" / name).glob(f"{name}-[0-9][0-9]"))
        if runs:
            _draw(name, load_flow_run(runs[0]))


def report(out: Path, names: list[str]) -> None:
    sections = []
    summary_rows = []
    for name in names:
        paths = load_series(out, name)
        if not paths:
            continue
        runs = [load_flow_run(p) for p in paths]
        late = failed = 0
        for rej in (out / "_rejected").glob(f"{name}-[0-9][0-9]-attempt*"):
            try:
                m = json.loads((rej / "meta.json").read_text())
            except (OSError, ValueError):
                failed += 1
                continue
            if m.get("result", {}).get("ok"):
                late += 1
            else:
                failed += 1
        measured = fairness(runs)
        sums = measured.flows
        quic = next((s for s in sums if s.name.startswith("quic")), None)
        tcps = [s for s in sums if s.name.startswith("tcp")]
        text = [
            f"### {name}: {_title(name)}",
            "",
            f"{len(runs)} runs ({late + failed} redone: {late} with the emulator late, {failed} failed).",
            "",
        ]
        text.append(fairness_markdown(measured))
        if "bbr" in name:
            text.append(_state_shares(runs))
        key = name.rsplit("-", 1)[1]
        if quic and key in PAPER and name.startswith(("quicgo", "quiche")):
            text.append("| flow | this testbed Mbit/s mean (sd) | paper (QUIC 34, Linux TCP Cubic) |")
            text.append("|---|---:|---:|")
            for s in sums:
                p = PAPER[key].get(s.name)
                text.append(
                    f"| {s.name} | {s.mean_mbps:.2f} ({s.sd_mbps:.2f}) | {p[0]} ({p[1]}) |"
                    if p
                    else f"| {s.name} | {s.mean_mbps:.2f} | - |"
                )
            text.append("")
        if quic and tcps:
            q = [f.throughput_mbps for r in runs for f in r.flows if f.name == quic.name]
            t_all = [sum(f.throughput_mbps for f in r.flows if f.name.startswith("tcp")) for r in runs]
            fair = 1 / (1 + len(tcps))
            p = welch_p(q, [x / len(tcps) for x in t_all])
            text.append(
                f"QUIC vs the mean TCP flow: {statistics.fmean(q):.2f} vs {statistics.fmean(t_all) / len(tcps):.2f} Mbit/s "
                f"(Welch p = {fmt_p(p)}); QUIC's share {quic.share:.1%} against a fair {fair:.1%}."
            )
            text.append("")
            summary_rows.append(
                f"| {name} | {len(runs)} | {quic.mean_mbps:.2f} ({quic.sd_mbps:.2f}) | "
                f"{statistics.fmean(t_all):.2f} | {quic.share:.1%} | {fair:.1%} | "
                f"{statistics.fmean(r.jain for r in runs):.3f} | {fmt_p(p)} |"
            )
        _draw(name, runs[0])
        text.append(f"![{name}](table4_{name}.svg)")
        text.append("")
        sections.append("\n".join(text))
        _bundle(paths, ROOT / "traces" / "table4" / name, paths[0] if name == "quicgo-tcp1" else None)
    head = f"""# IMC'17 Table 4 and Fig. 5: QUIC against TCP on one 5 Mbit/s bottleneck

Setup as in the paper: 5 Mbit/s bottleneck (tc tbf), 30 KB drop-tail buffer, 36 ms RTT (IP-layer
relay, 18 ms each way), every flow a long HTTP download started at the same time and stopped after
25 s; throughput is each flow's bytes at the bottleneck's egress (the relay's per-flow 100 ms bins)
from 2 s to 25 s. QUIC servers: quic-go v0.65.0 and Cloudflare quiche 0.30.0, both instrumented
(quicsm patch sets); TCP: the kernel's (Linux {_kernel()}) TCP behind a Go HTTP/2 + TLS 1.3 server,
traced with bpftrace (docs/log-format.md, "Kernel TCP"); clients: the Go HTTP/3 and HTTP/2 clients.
Runs whose relay sent 1 % of packets more than 2 ms late were redone. p: Welch's t-test.

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/table4_fairness.py analyse` (repo {git_rev()}).
Fig. 5 (`fig5_cwnd.svg`): cwnd of the QUIC and the TCP flow of the first `quicgo-tcp1` run, drawn by the same command.

## Summary

| scenario | runs | QUIC Mbit/s mean (sd) | all TCP Mbit/s | QUIC share | fair share | Jain | p (QUIC vs mean TCP flow) |
|---|---:|---:|---:|---:|---:|---:|---:|
"""
    text = head + "\n".join(summary_rows) + "\n\n## Per scenario\n\n" + "\n".join(sections)
    write_report(HERE / "table4_fairness.md", text, HERE / "table4_fairness.notes.md")


def _kernel() -> str:
    import platform

    return platform.release()
