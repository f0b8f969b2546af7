"""IMC'17 Table 4 and Fig. 5: QUIC against 1, 2 and 4 TCP flows on one 5 Mbit/s bottleneck with a
30 KB drop-tail buffer and 36 ms RTT, every flow a long transfer started together.

    sudo python3 experiments/table4_fairness.py run [--only quicgo] [--runs 10]
    python3 experiments/table4_fairness.py analyse
    python3 experiments/table4_fairness.py figures    # only the pictures, from traces/table4

Runs go to /tmp/qsm-exp/table4/<scenario>-NN (each a `quicsm.testbed.flows` run); the report is
experiments/table4_fairness.md with figures experiments/table4_*.svg, traces bundled under
traces/table4/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _flows import run_series

from quicsm.testbed.flows import FlowScenario, FlowSpec
from quicsm.testbed.tcp import TcpTuning

HERE = Path(__file__).resolve().parent
OUT = Path("/tmp/qsm-exp/table4")
LINK = {"rate_mbps": 5.0, "rtt_ms": 36.0, "queue": "30kb", "duration_s": 25.0}


def _tcp(n: int, cc: str = "cubic") -> tuple[FlowSpec, ...]:
    return tuple(FlowSpec("tcp", cc, name=f"tcp{k + 1}") for k in range(n))


SCENARIOS = {
    "quicgo-tcp1": (FlowSpec("quic-go", "cubic", name="quic"), *_tcp(1)),
    "quicgo-tcp2": (FlowSpec("quic-go", "cubic", name="quic"), *_tcp(2)),
    "quicgo-tcp4": (FlowSpec("quic-go", "cubic", name="quic"), *_tcp(4)),
    "quiche-tcp1": (FlowSpec("quiche", "cubic", name="quic"), *_tcp(1)),
    "quiche-tcp2": (FlowSpec("quiche", "cubic", name="quic"), *_tcp(2)),
    "quiche-tcp4": (FlowSpec("quiche", "cubic", name="quic"), *_tcp(4)),
    "bbr2-tcpbbr": (FlowSpec("quiche", "bbr2", name="quic"), *_tcp(1, "bbr")),
    "bbr2-tcpcubic": (FlowSpec("quiche", "bbr2", name="quic"), *_tcp(1, "cubic")),
    "quicgo-paced-tcp1": (FlowSpec("quic-go", "cubic", name="quic"), *_tcp(1)),
    "tcp-tcp": _tcp(2),
    "quicgo-quicgo": (FlowSpec("quic-go", "cubic", name="quic1"), FlowSpec("quic-go", "cubic", name="quic2")),
}


TUNING = {"quicgo-paced-tcp1": TcpTuning(pacing=True)}
"""Control: the same link with the kernel's internal TCP pacing on (quic-go paces, Linux Cubic does not)."""


def scenario(name: str) -> FlowScenario:
    return FlowScenario(flows=SCENARIOS[name], name=name, tuning=TUNING.get(name, TcpTuning()), **LINK)  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "analyse", "figures"))
    ap.add_argument("--only", default="", help="comma-separated scenario name prefixes")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    names = [n for n in SCENARIOS if not args.only or any(n.startswith(p) for p in args.only.split(","))]
    out = Path(args.out)
    if args.what == "run":
        for n in names:
            counts = run_series(scenario(n), out, args.runs)
            print(f"{n}: {counts}", file=sys.stderr)
        return
    from table4_report import figures, report

    if args.what == "figures":
        figures(names)
    else:
        report(out, names)


if __name__ == "__main__":
    main()
