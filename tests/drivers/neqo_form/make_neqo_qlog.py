"""Write qlogs in neqo 0.7's documented form, for quicsm's tests (neqo is on no package registry).

neqo's qlog (JSON-SEQ, ``.sqlog``) logs ``recovery:congestion_state_updated`` only when the state
changes, with ``old`` and ``new`` (``slow_start``, ``congestion_avoidance``, ``recovery``,
``persistent_congestion``), and ``recovery:metrics_updated`` samples. This script does not run neqo:
it steps a small model of a window-based sender (NewReno or Cubic decrease and growth) over a
tail-drop bottleneck, one RTT a step, and writes what neqo would log for it. The state story (slow
start, then loss episodes in recovery and congestion avoidance between them) is what the tests need.

usage: python3 make_neqo_qlog.py {cubic|newreno} OUT.sqlog [--rtts N]
"""

from __future__ import annotations

import argparse
import gzip
import json

MSS = 1200
RTT_MS = 20.0
BDP = 50 * MSS  # the path holds this much, plus the queue, before it drops
QUEUE = 30 * MSS


def records(cc: str, rtts: int) -> list[dict]:
    header = {
        "qlog_version": "0.3",
        "qlog_format": "JSON-SEQ",
        "title": "neqo-server trace",
        "description": f"written by tests/drivers/neqo_form/make_neqo_qlog.py in neqo's form ({cc})",
        "trace": {"vantage_point": {"name": "neqo-server", "type": "server"}, "common_fields": {"ODCID": "0e0"}},
    }
    out: list[dict] = [header]
    cwnd, ssthresh, state = 10 * MSS, None, "slow_start"
    w_max = 0.0
    t = 0.0

    def change(new: str, at: float) -> None:
        nonlocal state
        out.append(
            {"time": round(at, 3), "name": "recovery:congestion_state_updated", "data": {"old": state, "new": new}}
        )
        state = new

    for i in range(rtts):
        t = i * RTT_MS
        out.append({"time": round(t + 0.5, 3), "name": "transport:packet_sent", "data": {"raw": {"length": MSS}}})
        metrics = {
            "congestion_window": int(cwnd),
            "bytes_in_flight": int(min(cwnd, BDP + QUEUE)),
            "smoothed_rtt": RTT_MS,
        }
        if ssthresh is not None:
            metrics["ssthresh"] = int(ssthresh)
        out.append({"time": round(t + 1.0, 3), "name": "recovery:metrics_updated", "data": metrics})
        if state == "recovery":
            change("congestion_avoidance", t + RTT_MS * 0.9)
            continue
        if cwnd > BDP + QUEUE:  # tail drop: one loss episode, one RTT in recovery
            w_max = cwnd
            cwnd = max(2 * MSS, cwnd * (0.7 if cc == "cubic" else 0.5))
            ssthresh = cwnd
            change("recovery", t + 2.0)
            continue
        if state == "slow_start":
            cwnd *= 2
        elif cc == "cubic":
            k = ((w_max * 0.3) / (0.4 * MSS)) ** (1 / 3) * 1000.0
            cwnd = max(cwnd + MSS, w_max + 0.4 * MSS * ((t % 2000.0) / 1000.0 - k / 1000.0) ** 3)
        else:
            cwnd += MSS
    out.append({"time": round(t + RTT_MS, 3), "name": "transport:packet_received", "data": {}})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cc", choices=["cubic", "newreno"])
    ap.add_argument("out")
    ap.add_argument("--rtts", type=int, default=120)
    a = ap.parse_args()
    data = b"".join(b"\x1e" + json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records(a.cc, a.rtts))
    opener = gzip.open if a.out.endswith(".gz") else open
    with opener(a.out, "wb") as fh:
        fh.write(data)


if __name__ == "__main__":
    main()
