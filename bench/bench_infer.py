"""Inference time and memory per engine for 10^4 ... 10^7 events, against dfg as the baseline.

The state sequences are Cubic-like: a Markov chain over the canonical Cubic states, with two kinds
of connection as in the IMC'17 Fig. 13 experiment: unthrottled clients, which reach
CongestionAvoidanceMaxed but never ApplicationLimited, and CPU-throttled ones, which go
ApplicationLimited but never CongestionAvoidanceMaxed. That hidden mode gives invariants the
directly-follows graph breaks, so Synoptic really has to refine. Connection lengths are geometric.

Every (size, engine) runs in a forked child, so the time and the peak RSS (VmHWM) are that engine's
alone; the ratio is against dfg on the same sequences in the same run.

    python bench/bench_infer.py                      # 10^4 .. 10^7 events
    python bench/bench_infer.py --max-events 1e6 --engines dfg,synoptic
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from quicsm.inference import infer_sequences
from quicsm.traces.states import CUBIC_STATES

STATES = tuple(s for s in CUBIC_STATES if s != "ProbeTimeout")

_DESKTOP = {
    "Init": {"SlowStart": 1.0},
    "SlowStart": {"CongestionAvoidance": 0.55, "Recovery": 0.45},
    "CongestionAvoidance": {"Recovery": 0.6, "CongestionAvoidanceMaxed": 0.25, "TailLossProbe": 0.15},
    "CongestionAvoidanceMaxed": {"CongestionAvoidance": 0.7, "Recovery": 0.3},
    "Recovery": {"CongestionAvoidance": 0.9, "TailLossProbe": 0.1},
    "TailLossProbe": {"Recovery": 0.5, "RetransmissionTimeout": 0.2, "CongestionAvoidance": 0.3},
    "RetransmissionTimeout": {"SlowStart": 1.0},
}
_THROTTLED = {
    "Init": {"SlowStart": 1.0},
    "SlowStart": {"CongestionAvoidance": 0.4, "Recovery": 0.2, "ApplicationLimited": 0.4},
    "CongestionAvoidance": {"Recovery": 0.3, "ApplicationLimited": 0.6, "TailLossProbe": 0.1},
    "ApplicationLimited": {"CongestionAvoidance": 0.75, "SlowStart": 0.25},
    "Recovery": {"CongestionAvoidance": 0.9, "TailLossProbe": 0.1},
    "TailLossProbe": {"Recovery": 0.5, "RetransmissionTimeout": 0.2, "CongestionAvoidance": 0.3},
    "RetransmissionTimeout": {"SlowStart": 1.0},
}


def _cumulative(chain: dict[str, dict[str, float]]) -> np.ndarray:
    m = np.zeros((len(STATES), len(STATES)))
    for a, row in chain.items():
        for b, p in row.items():
            m[STATES.index(a), STATES.index(b)] = p
    m[m.sum(axis=1) == 0, 0] = 1.0
    return np.cumsum(m / m.sum(axis=1, keepdims=True), axis=1)


def synth(events: int, mean_length: int = 100, throttled: float = 0.3, seed: int = 7) -> list[list[str]]:
    """About ``events`` state visits in connections of geometric length (mean ``mean_length``)."""
    rng = np.random.default_rng(seed)
    lengths = []
    total = 0
    while total < events:
        batch = np.minimum(
            rng.geometric(1 / mean_length, size=max(16, (events - total) // mean_length + 1)) + 1, 20 * mean_length
        )
        take = np.searchsorted(np.cumsum(batch), events - total) + 1
        lengths.extend(batch[:take].tolist())
        total += int(batch[:take].sum())
    lengths_a = np.asarray(lengths, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths_a)])
    mode = (rng.random(len(lengths_a)) < throttled).astype(np.int64)
    cum = np.stack([_cumulative(_DESKTOP), _cumulative(_THROTTLED)])
    codes = np.zeros(int(offsets[-1]), dtype=np.int8)
    state = np.zeros(len(lengths_a), dtype=np.int64)
    active = np.arange(len(lengths_a))
    step = 1
    while True:
        active = active[lengths_a[active] > step]
        if not len(active):
            break
        u = rng.random(len(active))
        rows = cum[mode[active], state[active]]
        nxt = np.minimum((u[:, None] > rows).sum(axis=1), len(STATES) - 1)
        state[active] = nxt
        codes[offsets[active] + step] = nxt
        step += 1
    names = np.array(STATES, dtype=object)
    return [names[codes[s:e]].tolist() for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def _hwm_kb() -> tuple[int, int]:
    hwm = rss = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return hwm, rss


def measure(seqs: list[list[str]], engine: str) -> dict[str, float]:
    """Run one engine in a forked child; its seconds, peak RSS and growth over the inherited RSS."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # reset VmHWM to the current RSS
        except OSError:
            pass
        _, rss0 = _hwm_kb()
        t = time.perf_counter()
        res = infer_sequences(seqs, engine)
        seconds = time.perf_counter() - t
        hwm, _ = _hwm_kb()
        out = {
            "seconds": seconds,
            "peak_mb": hwm / 1024,
            "grow_mb": (hwm - rss0) / 1024,
            "nodes": len(res.model.nodes),
            "edges": len(res.model.edges),
        }
        os.write(wfd, json.dumps(out).encode())
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd) as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        raise SystemExit(f"{engine}: child failed (status {status})")
    result: dict[str, float] = json.loads(data)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-events", type=float, default=1e7)
    ap.add_argument("--min-events", type=float, default=1e4)
    ap.add_argument("--engines", default="dfg,ktails,synoptic")
    ap.add_argument("--mean-length", type=int, default=100, help="mean visits per connection")
    args = ap.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if "dfg" not in engines:
        engines.insert(0, "dfg")
    sizes = [10**p for p in range(4, 8) if args.min_events <= 10**p <= args.max_events]
    print(
        f"{'events':>10} {'traces':>7} {'engine':>9} {'seconds':>8} {'events/s':>11} {'peak MB':>8} {'+MB':>7} "
        f"{'nodes':>6} {'edges':>6} {'x dfg':>6}"
    )
    for n in sizes:
        t = time.perf_counter()
        seqs = synth(n, args.mean_length)
        gen = time.perf_counter() - t
        events = sum(map(len, seqs))
        base = None
        for engine in engines:
            r = measure(seqs, engine)
            base = base or r["seconds"]
            print(
                f"{events:>10} {len(seqs):>7} {engine:>9} {r['seconds']:>8.3f} {events / r['seconds']:>11,.0f} "
                f"{r['peak_mb']:>8.0f} {r['grow_mb']:>7.0f} {r['nodes']:>6} {r['edges']:>6} {r['seconds'] / base:>6.2f}",
                flush=True,
            )
        print(f"{'':>10} (synthesis took {gen:.1f} s)", flush=True)
        del seqs


if __name__ == "__main__":
    main()
