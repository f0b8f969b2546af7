"""Parse throughput against grep on the same file, and memory, for a large synthetic contract log.

The log mixes contract lines with realistic noise (Chromium and Abseil prefixes, other QUIC debug lines)
at a chosen ratio, across many interleaved connections with reused keys. Prints MB/s and lines/s for
``grep -c QUICSM`` (the baseline, same file, same process tree) and for quicsm's streaming parse, and
their ratio, which is the figure that matters (target >= 0.5x grep on one core).

    python bench/bench_parse.py --mb 200 --noise 9
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import tempfile
import time

from quicsm.traces import iter_traces
from quicsm.traces.contract import format_line
from quicsm.traces.report import ParseReport

CUBIC = ["SlowStart", "CongestionAvoidance", "ApplicationLimited", "Recovery", "CongestionAvoidanceMaxed"]
NOISE = [
    "[31337:31355:1122/143015.{us:06d}:VERBOSE2:quic_connection.cc(2211)] Server: Sending packet {n} : "
    "retransmittable frames: STREAM_FRAME, encryption level: FORWARD_SECURE, length: 1350",
    "I1122 14:30:15.{us:06d}   31355 quic_sent_packet_manager.cc:1045] Server: Received ack for {n} "
    "largest_observed: {n} ack_delay_time: 5ms",
    "[1122/143015.{us:06d}:INFO:quic_dispatcher.cc(520)] Processing packet of length {n} from 127.0.0.1:4433",
]


def make_log(path: str, megabytes: float, noise_per_record: int, seed: int = 1) -> int:
    """Write the synthetic log; return its number of contract lines."""
    rng = random.Random(seed)
    target = int(megabytes * 1e6)
    written = records = 0
    conns: dict[int, tuple[str, int]] = {}
    with open(path, "w") as fh:
        while written < target:
            c = rng.randrange(64)
            state, t = conns.get(c, ("Init", rng.randrange(10**6)))
            t += rng.randrange(1, 20000)
            nxt = "SlowStart" if state == "Init" else rng.choice([s for s in CUBIC if s != state])
            prefix = "[31337:31355:1122/143015.123456:VERBOSE1:tcp_cubic_sender_bytes.cc(334)] "
            line = prefix + format_line(
                conn=f"0x{0x55D0C81E0000 + c:x}",
                t_us=t,
                cc="cubic",
                frm=state,
                to=nxt,
                cwnd=rng.randrange(14600, 10**6),
                inflight=rng.randrange(10**6),
                trigger="ack",
            )
            conns[c] = ("Init", t) if rng.random() < 0.02 else (nxt, t)
            chunk = [line]
            for _ in range(noise_per_record):
                chunk.append(rng.choice(NOISE).format(us=rng.randrange(10**6), n=rng.randrange(10**6)))
            text = "\n".join(chunk) + "\n"
            fh.write(text)
            written += len(text)
            records += 1
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=200.0, help="log size in MB")
    ap.add_argument("--noise", type=int, default=9, help="noise lines per contract line")
    ap.add_argument("--keep", help="keep the log at this path")
    args = ap.parse_args()
    path = args.keep or os.path.join(tempfile.mkdtemp(), "bench.log")
    records = make_log(path, args.mb, args.noise)
    size = os.path.getsize(path)
    with open(path, "rb") as fh:  # warm the page cache for both contenders
        while fh.read(1 << 24):
            pass
    t0 = time.perf_counter()
    out = subprocess.run(["grep", "-c", "QUICSM", path], capture_output=True, text=True, check=True).stdout
    t_grep = time.perf_counter() - t0
    lines = sum(1 for _ in open(path, "rb"))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    report = ParseReport()
    ntr = nev = 0
    for tr in iter_traces([path], report=report):
        ntr += 1
        nev += len(tr.events)
    t_parse = time.perf_counter() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert int(out) == records == report.records == nev, (out, records, report.records, nev)
    mb = size / 1e6
    print(f"file: {mb:.1f} MB, {lines} lines, {records} contract lines, {ntr} connections")
    print(f"grep -c QUICSM : {t_grep:7.3f} s  {mb / t_grep:8.1f} MB/s  {lines / t_grep / 1e6:6.2f} M lines/s")
    print(
        f"quicsm parse   : {t_parse:7.3f} s  {mb / t_parse:8.1f} MB/s  {lines / t_parse / 1e6:6.2f} M lines/s"
        f"  {records / t_parse / 1e3:7.1f} k records/s"
    )
    print(f"ratio quicsm/grep throughput: {t_grep / t_parse:.2f}x")
    print(f"peak RSS growth during parse: {(rss1 - rss0) / 1024:.1f} MB (parse holds open connections only)")


if __name__ == "__main__":
    main()
