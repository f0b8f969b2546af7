"""ANRW'19 "TCP+TLS+HTTP/2 vs. QUIC": page load time of QUIC against stock TCP and against TCP tuned
the way QUIC is (IW 32, pacing, no slow start after idle, large buffers), on the paper's network
settings cut to what runs here in under 30 minutes.

    sudo python3 experiments/anrw19_tuned_tcp.py run [--runs 5]
    python3 experiments/anrw19_tuned_tcp.py analyse

Protocols (the paper's Table 1): QUIC = quic-go v0.65.0 Cubic (IW 32, paced, as Google QUIC);
TCP = stock Linux Cubic (IW 10, no pacing, slow start after idle); TCP+ = IW 32 (route initcwnd),
internal TCP pacing (SO_MAX_PACING_RATE: this kernel has no fq qdisc), tcp_slow_start_after_idle=0,
16 MB buffers, Cubic; TCP+BBR = TCP+ with BBR. All TLS 1.3 (Go's crypto/tls), HTTP/2 for TCP.
Networks (the paper's Table 2): DSL 25/5 Mbit/s, 24 ms, 12 ms queue; LTE 10.5/2.8 Mbit/s, 74 ms,
200 ms queue; DA2GC 0.468 Mbit/s, 262 ms, 3.3 % loss, 200 ms queue. MSS (1.89 Mbit/s, 760 ms,
6 % loss) is left out: one load there takes minutes. The loss is set so that a request and its
response both arrive with probability 1 - p, as in the paper: each direction drops 1 - sqrt(1 - p).
Page: 10 objects of 50 KB (500 KB), loaded by the Go HTTP/3 or HTTP/2 client (one connection,
all objects in parallel): page load time = the client's time to the last byte.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, welch_p, write_report
from _flows import load_series, run_series

from quicsm.compare.fairness import load_flow_run
from quicsm.testbed.flows import FlowScenario, FlowSpec
from quicsm.testbed.tcp import TcpTuning

HERE = Path(__file__).resolve().parent
OUT = Path("/tmp/qsm-exp/anrw19")
NETWORKS = {
    # name: (down Mbit/s, up Mbit/s, RTT ms, loss, queue ms)
    "DSL": (25.0, 5.0, 24.0, 0.0, 12.0),
    "LTE": (10.5, 2.8, 74.0, 0.0, 200.0),
    "DA2GC": (0.468, 0.468, 262.0, 0.033, 200.0),
}
PROTOCOLS = {
    "QUIC": (FlowSpec("quic-go", "cubic", name="page"), TcpTuning()),
    "TCP": (FlowSpec("tcp", "cubic", name="page"), TcpTuning()),
    "TCP+": (FlowSpec("tcp", "cubic", name="page"), TcpTuning.tuned()),
    "TCP+BBR": (FlowSpec("tcp", "bbr", name="page"), TcpTuning.tuned()),
}
OBJECTS, SIZE = 10, 50_000


def scenario(net: str, proto: str) -> FlowScenario:
    down, up, rtt, loss, queue_ms = NETWORKS[net]
    flow, tuning = PROTOCOLS[proto]
    per_dir = 1 - math.sqrt(1 - loss)
    return FlowScenario(
        flows=(flow,),
        rate_mbps=down,
        up_rate_mbps=up,
        rtt_ms=rtt,
        queue=str(max(int(down * 1e6 / 8 * queue_ms / 1000), 4 * 1514)),
        loss=per_dir,
        duration_s=120.0,
        objects=OBJECTS,
        size=SIZE,
        tuning=tuning,
        trace_tcp=False,
        qlog=False,
        name=f"{net}-{proto.replace('+', 'plus')}",
    )


def _plts(out: Path, sc: FlowScenario) -> list[float]:
    plts = []
    for p in load_series(out, sc.name):
        run = load_flow_run(p)
        client = run.meta.flows[0].client or {}
        if client.get("ok") and client.get("plt_ms"):
            plts.append(float(client["plt_ms"]))
    return plts


def _setup() -> str:
    """The module docstring without its usage lines: the setup, for the report."""
    doc = __doc__ or ""
    return "\n".join(ln for ln in doc.splitlines() if not ln.startswith("    ")).strip()


def analyse(out: Path) -> None:
    rows = [
        "| network | protocol | runs | PLT ms mean (sd) | gain vs TCP | p vs TCP | gain vs TCP+ | p vs TCP+ |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    closed = []
    for net in NETWORKS:
        plt = {p: _plts(out, scenario(net, p)) for p in PROTOCOLS}
        base, tuned = plt["TCP"], plt["TCP+"]
        for proto, xs in plt.items():
            if not xs:
                continue
            m = statistics.fmean(xs)
            sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
            g_tcp = (m - statistics.fmean(base)) / statistics.fmean(base) if base and proto != "TCP" else None
            g_tp = (
                (m - statistics.fmean(tuned)) / statistics.fmean(tuned)
                if tuned and proto not in ("TCP", "TCP+")
                else None
            )
            rows.append(
                f"| {net} | {proto} | {len(xs)} | {m:.0f} ({sd:.0f}) | "
                f"{'' if g_tcp is None else f'{g_tcp:+.1%}'} | {'' if g_tcp is None else fmt_p(welch_p(xs, base))} | "
                f"{'' if g_tp is None else f'{g_tp:+.1%}'} | {'' if g_tp is None else fmt_p(welch_p(xs, tuned))} |"
            )
        if base and tuned and plt["QUIC"]:
            b, t, q = (statistics.fmean(plt[k]) for k in ("TCP", "TCP+", "QUIC"))
            if b != q:
                closed.append(
                    f"- {net}: tuning closes {(b - t) / (b - q):.0%} of the TCP-QUIC gap ({b:.0f} -> {t:.0f} ms; QUIC {q:.0f} ms)."
                )
    text = f"""# ANRW'19 reproduced (cut down): QUIC vs stock TCP vs tuned TCP, page load time

{_setup()}

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/anrw19_tuned_tcp.py analyse` (repo {git_rev()}).
Gain = (PLT - PLT of the reference) / PLT of the reference, as the paper's "performance gain"
(negative: faster). p: Welch's t-test of the page load times.

{chr(10).join(rows)}

{chr(10).join(closed)}
"""
    write_report(HERE / "anrw19_tuned_tcp.md", text, HERE / "anrw19_tuned_tcp.notes.md")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "analyse"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--protocols", default=",".join(PROTOCOLS), help="comma-separated subset of " + ", ".join(PROTOCOLS)
    )
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    out = Path(args.out)
    if args.what == "run":
        for net in NETWORKS:
            for proto in args.protocols.split(","):
                counts = run_series(scenario(net, proto), out, args.runs, per_lock=5)
                print(f"{net} {proto}: {counts}", file=sys.stderr)
        return
    analyse(out)


if __name__ == "__main__":
    main()
