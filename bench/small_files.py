"""Many small inputs, as a fleet leaves them: per-host folders of short server logs, or one qlog per connection.

``make_text_logs(root, n)`` writes ``n`` text logs of about 0.5-1 KB (2-5 contract lines of one
connection among Chromium-style noise lines, ``ssthresh=inf`` until the first loss as the patched senders
print it) spread over 50 host folders; ``make_qlogs(root, n)``
writes ``n`` JSON-SEQ qlogs of about 1 KB as quic-go's ``QLOGDIR`` does (one file per connection,
a header record, congestion-state and metrics events, a few packet events). Both are deterministic.
"""

from __future__ import annotations

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
from bench_parse import NOISE

from quicsm.traces.contract import format_line
from quicsm.traces.events import SSTHRESH_INF

HOSTS = 50
CUBIC = ["SlowStart", "CongestionAvoidance", "ApplicationLimited", "Recovery"]
QLOG_STATES = ["slow_start", "congestion_avoidance", "application_limited", "recovery"]


def host_dirs(root: str) -> list[str]:
    dirs = [os.path.join(root, f"host{h:02d}") for h in range(HOSTS)]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    return dirs


def make_text_logs(root: str, n: int, seed: int = 1) -> int:
    """``n`` logs under ``root/hostNN/``; returns their total size in bytes."""
    rng = random.Random(seed)
    dirs = host_dirs(root)
    total = 0
    for i in range(n):
        t = rng.randrange(10**6)
        state = "Init"
        lines = []
        conn = f"0x{0x55D0C81E0000 + i:x}"
        ssthresh = SSTHRESH_INF  # as the patched senders print it until the first loss: ssthresh=inf
        for _ in range(rng.randint(2, 5)):
            t += rng.randrange(1, 20000)
            nxt = "SlowStart" if state == "Init" else rng.choice([s for s in CUBIC if s != state])
            cwnd = rng.randrange(14600, 10**6)
            if nxt == "Recovery":
                ssthresh = cwnd // 2
            lines.append(
                "[31337:31355:1122/143015.123456:VERBOSE1:tcp_cubic_sender_bytes.cc(334)] "
                + format_line(conn=conn, t_us=t, cc="cubic", frm=state, to=nxt, cwnd=cwnd, ssthresh=ssthresh)
            )
            state = nxt
            if rng.random() < 0.5:
                lines.append(rng.choice(NOISE).format(us=rng.randrange(10**6), n=rng.randrange(10**6)))
        text = ("\n".join(lines) + "\n").encode()
        path = os.path.join(dirs[i % HOSTS], f"server-{i:07d}.log")
        with open(path, "wb") as fh:
            fh.write(text)
        total += len(text)
    return total


def make_qlogs(root: str, n: int, seed: int = 2) -> int:
    """``n`` JSON-SEQ qlogs (``<odcid>_server.sqlog``) under ``root/hostNN/``; returns their total size."""
    rng = random.Random(seed)
    dirs = host_dirs(root)
    total = 0
    for i in range(n):
        odcid = f"{rng.getrandbits(64):016x}"
        header = {
            "qlog_version": "0.3",
            "qlog_format": "JSON-SEQ",
            "title": "quic-go qlog",
            "trace": {
                "common_fields": {"ODCID": odcid, "time_format": "relative"},
                "vantage_point": {"type": "server"},
            },
        }
        recs: list[dict[str, object]] = [header]
        t = 0.0
        state = None
        for _ in range(rng.randint(2, 4)):
            t += rng.uniform(0.5, 20)
            nxt = "slow_start" if state is None else rng.choice([s for s in QLOG_STATES if s != state])
            recs.append({"time": round(t, 3), "name": "recovery:congestion_state_updated", "data": {"new": nxt}})
            state = nxt
            t += rng.uniform(0.1, 5)
            recs.append(
                {
                    "time": round(t, 3),
                    "name": "recovery:metrics_updated",
                    "data": {"congestion_window": rng.randrange(14600, 10**6), "bytes_in_flight": rng.randrange(10**5)},
                }
            )
            recs.append(
                {
                    "time": round(t + 0.01, 3),
                    "name": "transport:packet_sent",
                    "data": {"header": {"packet_type": "1RTT", "packet_number": rng.randrange(10**4)}},
                }
            )
        data = b"".join(b"\x1e" + json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in recs)
        path = os.path.join(dirs[i % HOSTS], f"{odcid}_server.sqlog")
        with open(path, "wb") as fh:
            fh.write(data)
        total += len(data)
    return total


if __name__ == "__main__":
    kind, where, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    size = (make_text_logs if kind == "text" else make_qlogs)(where, count)
    print(f"{count} {kind} files, {size / 1e6:.2f} MB under {where}")
