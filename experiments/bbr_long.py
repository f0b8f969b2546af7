"""BBR on long flows, three implementations: the whole cycle (bbr2_cycle.md) and Fig. 13 for BBR
(fig13_bbr_long.md).

    sudo python3 experiments/bbr_long.py                  # runs in locked stretches, bundle, analyse, draw
    sudo python3 experiments/bbr_long.py --only quiche    # only the scenarios whose name starts so
    python3 experiments/bbr_long.py --analyse-only        # analyse runs already made (or the bundle)

Scenarios (``experiments/bbr_long.toml``): Cloudflare quiche 0.30.0 BBR2 and quinn-proto 0.11.19 BBR (v1)
behind the same path (50 Mbit/s, 36 ms RTT, 1-BDP queue), the Go client streaming for ``duration``
seconds, unthrottled (desktop) and under a 10 % CPU quota (mobile); the same under a Fig. 11 rate schedule
and an RTT step. ``experiments/bbr_long_tcp.toml`` has the same for the kernel's TCP BBR (v1), which needs
the IP-layer relay (its scenarios run with ``QUICSM_EMULATOR=ip``).

Runs are made until each scenario has its ``runs`` good runs, one or two runs per stretch under the
testbed lock (``flock /tmp/quicsm-testbed.lock``) so other users get turns; a run the emulator was late
for (or that failed) is redone up to twice, the bad attempt kept under ``<out>/_rejected/`` and counted in
the report. Good runs are bundled into ``traces/bbr-long/<scenario>/`` and everything is computed from
the bundle.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bbr import cycle_stats, mode_visits, summarise
from _common import fmt_p, git_rev, mean_sd, read_meta, table
from bundle_traces import bundle

from quicsm.traces import Trace, parse_inputs

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent / "traces" / "bbr-long"
LOCK = "/tmp/quicsm-testbed.lock"
SCENARIO_FILES = {HERE / "bbr_long.toml": "udp", HERE / "bbr_long_tcp.toml": "ip"}
"""Scenario file -> emulator mode its runs need (the kernel's TCP needs the IP-layer relay)."""
IMPLS = {
    "quiche": ("Cloudflare quiche 0.30.0", "BBR2"),
    "quinn": ("quinn-proto 0.11.19", "BBR (v1)"),
    "tcp": ("Linux kernel tcp_bbr", "BBR (v1)"),
}
NAMES = {"quiche": "quiche BBR2", "quinn": "quinn BBR", "tcp": "Linux TCP BBR"}
"""Set names in the side-by-side comparison."""
SHARE_STATES = ("Startup", "Drain", "ProbeBw.Down", "ProbeBw.Cruise", "ProbeBw.Refill", "ProbeBw.Up", "ProbeRtt")

# Design values, from the sources (experiments/bbr_implementations.md): what the cycle should look like at
# 50 Mbit/s and 36 ms RTT.
DESIGN = {
    "quiche": {
        "cruise": "≈ 2.0 s (probe wait 2 s from ProbeBw.Down; Reno bound min(63, BDP/MSS) rounds ≈ 2.3 s)",
        "up": "≥ 1 round (36 ms); ends on 2 rounds of queue or on loss > 1.5 %",
        "down": "until inflight ≤ target (≤ 1 round when the queue drains)",
        "refill": "1 round (≈ 36 ms)",
        "cycle": "≈ 2.1 s (Down + Cruise + Refill + Up)",
        "ups_per_cycle": "1",
        "downs_per_cycle": "1",
        "probe_rtt_first": "≈ 10 s after the last min-RTT sample",
        "probe_rtt_interval": "10 s unless a lower RTT sample refreshes the min RTT",
        "probe_rtt": "200 ms + 1 round at 0.5 BDP",
    },
    "quinn": {
        "cruise": "6 steps of ≥ 1 min RTT: ≈ 216 ms",
        "up": "≥ 1 min RTT (36 ms), held until inflight ≥ 1.25 BDP unless loss",
        "down": "≤ 1 min RTT, ends early at inflight ≤ BDP",
        "refill": "— (no such phase in v1)",
        "cycle": "8 steps of ≥ 1 min RTT: ≈ 0.29 s",
        "ups_per_cycle": "1",
        "downs_per_cycle": "1",
        "probe_rtt_first": "first round (the 10 s timer starts expired)",
        "probe_rtt_interval": "10 s from the last ProbeRtt start, whatever the RTT samples",
        "probe_rtt": "200 ms at 0.75 BDP",
    },
    "tcp": {
        "cruise": "6 phases of ≥ 1 min RTT: ≈ 216 ms",
        "up": "≥ 1 min RTT (36 ms), held until inflight ≥ 1.25 BDP unless loss",
        "down": "≤ 1 min RTT, ends early at inflight ≤ BDP",
        "refill": "— (no such phase in v1)",
        "cycle": "8 phases of ≥ 1 min RTT: ≈ 0.29 s",
        "ups_per_cycle": "1",
        "downs_per_cycle": "1",
        "probe_rtt_first": "≈ 10 s (min-RTT filter expires 10 s after the last sample at or below it)",
        "probe_rtt_interval": "10 s from the last ProbeRtt's end, unless an RTT sample at or below the min RTT",
        "probe_rtt": "max(200 ms, 1 round) at ≤ 4 packets, after inflight drains to 4 packets",
    },
}
ROWS = [
    ("cruise", "ProbeBw.Cruise stay"),
    ("up", "ProbeBw.Up stay"),
    ("down", "ProbeBw.Down stay"),
    ("refill", "ProbeBw.Refill stay"),
    ("cycle", "cycle (Up entry to Up entry)"),
    ("ups_per_cycle", "Up stays per cycle"),
    ("downs_per_cycle", "Down stays per cycle"),
    ("probe_rtt_first", "first ProbeRtt entry"),
    ("probe_rtt_interval", "ProbeRtt entry to the next"),
    ("probe_rtt", "ProbeRtt stay"),
]


def _quicsm(*args: str) -> str:
    """``quicsm ARGS`` from the repository's root, so the paths it writes into reports are relative."""
    root = HERE.parent
    return subprocess.run(
        [sys.executable, "-m", "quicsm", *args], check=True, capture_output=True, text=True, cwd=root
    ).stdout


def _rel(path: Path) -> str:
    return str(path.relative_to(HERE.parent))


def load(group: Path) -> list[tuple[Trace, dict[str, Any]]]:
    """(longest trace, meta) of every run bundled in ``group``."""
    out = []
    for log in sorted(group.glob("*/server.log.gz")):
        traces = parse_inputs([str(log)], require_transitions=False).traces
        if traces:
            out.append((max(traces, key=lambda t: t.duration_us), read_meta(log.parent)))
    return out


def shares(trace: Trace) -> dict[str, float]:
    """Time share per state of one connection (ApplicationLimited kept as its own state)."""
    total = max(trace.duration_us, 1)
    out: dict[str, float] = {}
    for v in trace.visits():
        out[v.state] = out.get(v.state, 0.0) + v.duration_us / total
    return out


def mode_shares(trace: Trace) -> dict[str, float]:
    """Time share per BBR mode state, ApplicationLimited folded into the mode underneath."""
    total = max(trace.duration_us, 1)
    out: dict[str, float] = {}
    for v in mode_visits(trace):
        out[v.state] = out.get(v.state, 0.0) + v.duration_us / total
    return out


def acks_per_data(meta: dict[str, Any]) -> float | None:
    """Data packets per ACK-carrying packet through the relay (down received / up received)."""
    relay = (meta.get("emulator") or {}).get("relay") or {}
    up, down = (relay.get("up") or {}).get("received"), (relay.get("down") or {}).get("received")
    return down / up if up and down else None


def fmt_ms(x: float) -> str:
    return f"{1000 * x:.0f}"


def cycle_report(groups: dict[str, list[tuple[Trace, dict[str, Any]]]]) -> str:
    """Each measure of the cycle, one row per implementation: measured on the desktop runs, and the
    design value from its source."""
    got = {
        impl: summarise(cycle_stats(t) for t, _ in groups[f"{impl}-desktop"])
        for impl in IMPLS
        if groups.get(f"{impl}-desktop")
    }
    rows = [[label, NAMES[impl], got[impl][key], DESIGN[impl][key]] for key, label in ROWS for impl in got]
    return table(["measure", "implementation", "measured: median (min–max), n", "design value (from its source)"], rows)


def schedule_report(groups: dict[str, list[tuple[Trace, dict[str, Any]]]]) -> str:
    """Per rate period of the schedule (pooled over runs): how often Up is entered and how much of the
    period Up takes, by bottleneck rate band; and the correlation of rate with each, per stack."""
    import numpy as np

    rows = []
    for impl in IMPLS:
        runs = groups.get(f"{impl}-schedule", [])
        periods: list[tuple[float, float, float]] = []  # (rate Mbit/s, Up entries per s, Up share)
        for trace, meta in runs:
            log = (meta.get("emulator") or {}).get("rate_log") or []
            visits = mode_visits(trace)
            t0 = trace.start_us
            ends = [t for t, _ in log[1:]] + [trace.duration_us / 1e6]
            for (start, rate), end in zip(log, ends, strict=False):
                if end <= start:
                    continue
                ups = [v for v in visits if v.state == "ProbeBw.Up"]
                n = sum(start <= (v.start_us - t0) / 1e6 < end for v in ups)
                up_time = sum(
                    max(0.0, min(end, (v.end_us - t0) / 1e6) - max(start, (v.start_us - t0) / 1e6)) for v in ups
                )
                periods.append((rate / 1e6, n / (end - start), up_time / (end - start)))
        if len(periods) < 3:
            continue
        a = np.array(periods)
        for lo, hi in ((10, 40), (40, 70), (70, 101)):
            sel = a[(a[:, 0] >= lo) & (a[:, 0] < hi)]
            if len(sel):
                rows.append([impl, f"{lo}–{hi} Mbit/s", len(sel), f"{sel[:, 1].mean():.1f}", f"{sel[:, 2].mean():.3f}"])
        r_n = np.corrcoef(a[:, 0], a[:, 1])[0, 1]
        r_s = np.corrcoef(a[:, 0], a[:, 2])[0, 1]
        rows.append([impl, "correlation with the rate", len(a), f"r = {r_n:+.2f}", f"r = {r_s:+.2f}"])
    return table(["stack", "bottleneck rate", "periods", "Up entries per s", "Up share of the period"], rows)


def rtt_step_report(groups: dict[str, list[tuple[Trace, dict[str, Any]]]]) -> str:
    """When ProbeRtt is entered around an RTT step: every entry's time, and the RTT the controller holds on
    the entry line and on its last line (its min RTT where it logs one; the kernel logs only srtt)."""
    rows = []
    for impl in IMPLS:
        for trace, meta in groups.get(f"{impl}-rttstep", []):
            step = (meta.get("params") or {}).get("rtt_step") or meta["labels"].get("rtt_step") or "?"
            t0 = trace.start_us
            entries = [e for e in trace.events if e.kind == "transition" and e.state == "ProbeRtt"]

            def rtt(e: Any) -> str:
                return f"{e.min_rtt_us / 1000:.1f}" if e.min_rtt_us else "—"

            at = ", ".join(f"{(e.t_us - t0) / 1e6:.2f} s ({rtt(e)})" for e in entries)
            rtts = [e.min_rtt_us for e in trace.events if e.min_rtt_us]
            last = f"{rtts[-1] / 1000:.1f} ms" if rtts else "not logged"
            rows.append([NAMES[impl], meta["labels"]["run"], step, at or "none", last, _cwnd_between(trace, entries)])
    return table(
        [
            "implementation",
            "run",
            "RTT step (after:RTT)",
            "ProbeRtt entries (min RTT on the line, ms)",
            "min RTT at the end",
            "median ProbeBw cwnd (KB) before, between and after the ProbeRtt entries",
        ],
        rows,
    )


def _cwnd_between(trace: Trace, entries: list[Any]) -> str:
    """Median cwnd of the ProbeBw lines in each stretch cut by the ProbeRtt entries: BBR's cwnd target is
    2 x bandwidth x min RTT, so it shows when a controller takes a new min RTT even where none is logged."""
    cuts = [trace.start_us, *(e.t_us for e in entries), trace.end_us + 1]
    out = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        xs = [e.cwnd for e in trace.events if a <= e.t_us < b and e.cwnd and e.state.startswith("ProbeBw")]
        out.append(f"{statistics.median(xs) / 1000:.0f}" if xs else "—")
    return " / ".join(out)


def fig13_report(groups: dict[str, list[tuple[Trace, dict[str, Any]]]]) -> tuple[str, list[list[str]]]:
    """Per implementation, each measure per connection, desktop against mobile: Welch's t-test (p, and p
    after Holm's correction over the implementation's measures), Hedges' g and Mann-Whitney's p."""
    import numpy as np

    from quicsm.compare.stats import holm, mann_whitney, welch

    rows, details = [], []
    for impl in IMPLS:
        d, m = groups.get(f"{impl}-desktop", []), groups.get(f"{impl}-mobile", [])
        if not d or not m:
            continue
        measures = [
            ("ProbeBw.Up share (mode view)", lambda t, _: mode_shares(t).get("ProbeBw.Up", 0.0), "{:.3f}"),
            ("ProbeBw.Down share (mode view)", lambda t, _: mode_shares(t).get("ProbeBw.Down", 0.0), "{:.3f}"),
            ("ProbeBw.Cruise share (mode view)", lambda t, _: mode_shares(t).get("ProbeBw.Cruise", 0.0), "{:.3f}"),
            ("ProbeBw.Refill share (mode view)", lambda t, _: mode_shares(t).get("ProbeBw.Refill", 0.0), "{:.3f}"),
            ("ProbeRtt share", lambda t, _: mode_shares(t).get("ProbeRtt", 0.0), "{:.3f}"),
            ("ApplicationLimited share", lambda t, _: _app_limited_share(t), "{:.3f}"),
            (
                "Up stays per second",
                lambda t, _: len(cycle_stats(t).up_s) / max(cycle_stats(t).duration_s, 1e-9),
                "{:.2f}",
            ),
            (
                "median ProbeBw.Up stay (ms)",
                lambda t, _: 1000 * statistics.median(cycle_stats(t).up_s or [math.nan]),
                "{:.0f}",
            ),
            (
                "longest ProbeBw.Up stay (ms)",
                lambda t, _: 1000 * max(cycle_stats(t).up_s or [math.nan]),
                "{:.0f}",
            ),
            ("Up stays ended by loss-free Down (share)", lambda t, _: _up_ended_quietly(t), "{:.2f}"),
            ("inflight / estimated BDP at Up exit (median)", lambda t, _: _inflight_at_up_exit(t), "{:.2f}"),
            ("bandwidth estimate (Mbit/s, median)", lambda t, _: _bw_estimate(t), "{:.0f}"),
            ("data packets per ACK packet (relay)", lambda _, meta: acks_per_data(meta) or math.nan, "{:.1f}"),
            ("goodput (Mbit/s)", lambda _, meta: _goodput(meta), "{:.1f}"),
        ]
        block = []
        for name, fn, fmt in measures:
            a = [x for x in (fn(t, meta) for t, meta in d) if not math.isnan(x)]
            b = [x for x in (fn(t, meta) for t, meta in m) if not math.isnan(x)]
            if not a and not b:
                continue  # not logged by this implementation
            ma, sa = mean_sd(a)
            mb, sb = mean_sd(b)
            w = welch(np.asarray(a), np.asarray(b)) if len(a) > 1 and len(b) > 1 else None
            u = mann_whitney(np.asarray(a), np.asarray(b)) if len(a) > 1 and len(b) > 1 else None
            block.append([NAMES[impl], name, _cell(ma, sa, fmt), _cell(mb, sb, fmt), w, u])
        adj = holm([r[4].p_value if r[4] and r[4].p_value is not None else 1.0 for r in block])
        for r, pa in zip(block, adj, strict=True):
            w, u = r[4], r[5]
            g = f"{w.effect_size:+.2f}" if w and w.effect_size is not None else "n/a"
            rows.append(
                [*r[:4], fmt_p(w.p_value if w else None), fmt_p(pa if w else None), g, fmt_p(u.p_value if u else None)]
            )
        details.append([NAMES[impl], str(len(d)), str(len(m))])
    header = [
        "implementation",
        "measure (per connection)",
        "desktop mean ± sd",
        "mobile mean ± sd",
        "p (Welch)",
        "p (Holm)",
        "Hedges' g",
        "p (Mann-Whitney)",
    ]
    return table(header, rows), details


def _cell(mu: float, sd: float, fmt: str) -> str:
    return "—" if math.isnan(mu) else f"{fmt.format(mu)} ± {fmt.format(sd)}"


def _app_limited_share(trace: Trace) -> float:
    """Time share with the app-limited flag up: the ``app_limited=1`` field where the lines carry it (the
    kernel's), held until the next line; else the ApplicationLimited state the QUIC sets print."""
    flags = [(e.t_us, dict(e.extra).get("app_limited")) for e in trace.events]
    if not any(f is not None for _, f in flags):
        return shares(trace).get("ApplicationLimited", 0.0)
    on = sum(t2 - t for (t, f), (t2, _) in zip(flags, flags[1:], strict=False) if f == "1")
    return on / max(trace.duration_us, 1)


def _goodput(meta: dict[str, Any]) -> float:
    client = (meta.get("result") or {}).get("client") or {}
    if client.get("goodput_mbps"):
        return float(client["goodput_mbps"])
    plt = (meta.get("result") or {}).get("plt_ms")
    return float(client.get("bytes", 0)) * 8 / plt / 1000 if plt else math.nan


def _bw_estimate(trace: Trace) -> float:
    """Median of the controller's bandwidth estimate over its lines: ``bw_bps`` where logged (quinn), else the
    pacing rate on entering Cruise (quiche BBR2: pacing gain 1 there, so pacing = estimate)."""
    xs = [e.bw_bps for e in trace.events if e.bw_bps]
    if not xs:
        xs = [e.pacing_bps for e in trace.events if e.pacing_bps and e.state == "ProbeBw.Cruise"]
    return statistics.median(xs) / 1e6 if xs else math.nan


def _inflight_at_up_exit(trace: Trace) -> float:
    """Median of bytes in flight over the estimated BDP (estimate x min RTT) on the lines that leave Up."""
    ratios, prev = [], None
    for e in trace.events:
        if e.kind != "transition":
            continue
        if prev == "ProbeBw.Up" and e.state != "ApplicationLimited":
            # quiche logs no estimate: its pacing rate on the line is the new phase's gain times the estimate
            gain = {"ProbeBw.Down": 0.9, "ProbeBw.Cruise": 1.0, "ProbeBw.Refill": 1.0}.get(e.state)
            bw = e.bw_bps or (e.pacing_bps / gain if e.pacing_bps and gain else None)
            if bw and e.min_rtt_us and e.inflight is not None:
                ratios.append(e.inflight / (bw / 8 * e.min_rtt_us / 1e6))
        if e.state != "ApplicationLimited":
            prev = e.state
    return statistics.median(ratios) if ratios else math.nan


def _up_ended_quietly(trace: Trace) -> float:
    """Share of Up stays whose exit line was not triggered by a loss (queue or target reached)."""
    exits = []
    prev = None
    for e in trace.events:
        if e.kind != "transition":
            continue
        if prev == "ProbeBw.Up" and e.state != "ApplicationLimited":
            exits.append(e.trigger != "loss")
        if e.state != "ApplicationLimited":
            prev = e.state
    return sum(exits) / len(exits) if exits else math.nan


# -- making the runs ----------------------------------------------------------------------------------


def scenario_tables() -> dict[str, tuple[dict[str, Any], str]]:
    """Every scenario of the scenario files: name -> (its keys with the defaults merged, emulator mode)."""
    import tomllib

    out: dict[str, tuple[dict[str, Any], str]] = {}
    for path, mode in SCENARIO_FILES.items():
        data = tomllib.loads(path.read_text())
        for item in data["scenario"]:
            out[item["name"]] = ({**data.get("defaults", {}), **item}, mode)
    return out


def _good(run: Path) -> bool:
    try:
        meta = read_meta(run)
    except Exception:  # a run cut off before its meta.json was written
        return False
    return bool(meta["result"]["ok"] and meta["emulator"]["ok"])


def attempts(out: Path, name: str) -> dict[str, int]:
    """What it took to get a scenario's good runs: attempts, good runs, attempts that were only
    emulator-late and attempts that failed (redone attempts are kept in ``out/_rejected``)."""
    runs = [p for p in out.glob(f"{name}-[0-9][0-9]") if (p / "meta.json").is_file()]
    tried = runs + [p for p in (out / "_rejected").glob(f"{name}-[0-9][0-9]-attempt*") if (p / "meta.json").is_file()]
    got = {"attempts": len(tried), "good": 0, "late": 0, "failed": 0}
    for p in tried:
        meta = read_meta(p)
        if not meta["result"]["ok"]:
            got["failed"] += 1
        elif not meta["emulator"]["ok"]:
            got["late"] += 1
        else:
            got["good"] += 1
    return got


def series(out: Path, names: list[str], retries: int, per_stretch: int = 4) -> None:
    """Good runs until every scenario in ``names`` has its ``runs``: each stretch holds the testbed lock in
    a child process for at most ``per_stretch`` runs (about 40 s each): desktop and mobile runs of one
    stack alternate, in alternating order; other scenarios of the same emulator follow one another. A
    scenario that gains no good run in three stretches running is given up, and said so."""
    tables = scenario_tables()
    stuck: dict[str, int] = {}
    k = 0
    while True:
        have = {n: sum(_good(p) for p in out.glob(f"{n}-[0-9][0-9]")) for n in names}
        need = {n: int(tables[n][0].get("runs", 1)) - have[n] for n in names}
        short = [n for n in names if need[n] > 0 and stuck.get(n, 0) < 3]
        if not short:
            break
        first = short[0]
        stack, _, kind = first.partition("-")
        partner = {"desktop": f"{stack}-mobile", "mobile": f"{stack}-desktop"}.get(kind)
        batch: list[str] = []
        if partner in short:
            pair = [first, partner] if k % 2 == 0 else [partner, first]
            while len(batch) < per_stretch and any(batch.count(n) < need[n] for n in pair):
                batch += [n for n in pair if batch.count(n) < need[n]]
        else:
            same = [n for n in short if tables[n][1] == tables[first][1]]
            for n in same:
                batch += [n] * min(need[n], per_stretch - len(batch))
        batch = batch[:per_stretch]
        k += 1
        spec = json.dumps({"out": str(out), "retries": retries, "tables": [tables[n][0] for n in batch]})
        env = {**os.environ, "QUICSM_EMULATOR": tables[first][1]}
        subprocess.run(["flock", LOCK, sys.executable, __file__, "--stretch", spec], env=env, check=False)
        for n in dict.fromkeys(batch):
            now = sum(_good(p) for p in out.glob(f"{n}-[0-9][0-9]"))
            stuck[n] = 0 if now > have[n] else stuck.get(n, 0) + 1
            print(f"[series] {n}: {now}/{tables[n][0].get('runs', 1)} good runs", file=sys.stderr, flush=True)
    for n, times in stuck.items():
        if times >= 3:
            print(f"[series] {n}: given up after three stretches without a good run", file=sys.stderr)


def stretch(spec: dict[str, Any]) -> None:
    """In the child, under the lock: one run of each scenario table, redone up to ``retries`` times."""
    from quicsm.testbed.matrix import config_from_mapping
    from quicsm.testbed.runner import run_many

    out = Path(spec["out"])
    out.mkdir(parents=True, exist_ok=True)
    for tab in spec["tables"]:
        cfg, _ = config_from_mapping({k: v for k, v in tab.items() if k != "runs"}, where=tab["name"])
        bins = cfg.server_stack.build(cfg)
        for res in run_many(cfg, bins, out, runs=1, retries=spec["retries"]):
            why = "good" if res.good else res.reason()
            print(f"[stretch] {res.run_dir.name}: {why} (redone {len(res.redone)}x)", file=sys.stderr, flush=True)


def thin_updates(log: Path, every_us: int = 100_000) -> None:
    """Keep every transition line of a bundled log but metric updates only every ``every_us`` per
    connection, or where the recovery sub-state or the app-limited flag changes: the kernel tracer writes one
    per ACK that moves cwnd (about 2,400 lines in 30 s of TCP BBR); the analysis reads transitions,
    ``recovery=`` and ``app_limited=``."""
    import gzip
    import re

    rx = re.compile(r"conn=(\S+) t_us=(\d+)")
    kept: list[bytes] = []
    last: dict[str, tuple[int, tuple[str | None, ...]]] = {}
    with gzip.open(log, "rb") as f:
        for raw in f:
            line = raw.decode()
            m = rx.search(line)
            if "ev=update" not in line or m is None:
                kept.append(raw)
                if m:
                    last[m.group(1)] = (int(m.group(2)), _flags(line))
                continue
            conn, t, rec = m.group(1), int(m.group(2)), _flags(line)
            prev = last.get(conn)
            if prev is None or t - prev[0] >= every_us or rec != prev[1]:
                kept.append(raw)
                last[conn] = (t, rec)
    tmp = log.with_suffix(".tmp")
    with open(tmp, "wb") as raw_out:
        with gzip.GzipFile(filename="server.log", mode="wb", fileobj=raw_out, mtime=0, compresslevel=9) as gz:
            gz.writelines(kept)
    os.replace(tmp, log)


def _flags(line: str) -> tuple[str | None, ...]:
    """The recovery sub-state and the app-limited flag of a line (None where absent)."""
    out = []
    for key in (" recovery=", " app_limited="):
        i = line.find(key)
        out.append(line[i + len(key) :].split(" ", 1)[0].strip() if i >= 0 else None)
    return tuple(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/qsm-exp/bbr-long", help="run directory")
    ap.add_argument("--only", default="", help="comma-separated scenario name prefixes to run (default: all)")
    ap.add_argument("--retries", type=int, default=2, help="redo a late or failed run this often")
    ap.add_argument("--analyse-only", action="store_true", help="no new runs; bundle what --out holds, if any")
    ap.add_argument("--no-bundle", action="store_true", help="analyse traces/bbr-long as it is")
    ap.add_argument("--stretch", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stretch:
        stretch(json.loads(args.stretch))
        return
    out = Path(args.out)
    names = list(scenario_tables())
    if not args.analyse_only:
        prefixes = tuple(x for x in args.only.split(",") if x)
        series(out, [n for n in names if not prefixes or n.startswith(prefixes)], args.retries)
    if not args.no_bundle and out.is_dir():
        ledger = TRACES / "attempts.json"
        counts = json.loads(ledger.read_text()) if ledger.is_file() else {}
        for n in names:
            if not any(out.glob(f"{n}-[0-9][0-9]")):
                continue
            shutil.rmtree(TRACES / n, ignore_errors=True)
            bundle(out, TRACES, {n: n}, None)
            counts[n] = attempts(out, n)
            if n.startswith("tcp-"):
                for log in (TRACES / n).glob("*/server.log.gz"):
                    thin_updates(log)
        ledger.write_text(json.dumps(counts, indent=1, sort_keys=True) + "\n")
    groups = {n: load(TRACES / n) for n in names if (TRACES / n).is_dir()}
    for impl in IMPLS:  # Fig. 3b: one diagram per implementation, every state of its desktop runs
        if groups.get(f"{impl}-desktop"):
            _quicsm("diagram", _rel(TRACES / f"{impl}-desktop"), "-o", _rel(HERE / f"bbr_cycle_{impl}.svg"))
    have = [impl for impl in IMPLS if groups.get(f"{impl}-desktop")]
    if len(have) >= 2:
        # side by side: the directly-follows engine keeps one node per state, so the machines line up
        # (Synoptic's refinement splits a state into several nodes where its histories differ)
        args = [_rel(TRACES / f"{impl}-desktop") for impl in have]
        for impl in have:
            args += ["--name", NAMES[impl]]
        _quicsm("compare", *args, "--engine", "dfg", "--diagram", _rel(HERE / "bbr_compare.svg"))
        (HERE / "bbr_compare.md").write_text(
            f"<!-- quicsm compare {shlex.join(args)} --engine dfg --format markdown -->\n"
            + _quicsm("compare", *args, "--engine", "dfg", "--format", "markdown")
        )
    for impl in IMPLS:  # fixed rate vs the rate schedule; the report draws the states under the rate curve
        if groups.get(f"{impl}-schedule") and groups.get(f"{impl}-desktop"):
            pair = [_rel(TRACES / f"{impl}-desktop"), _rel(TRACES / f"{impl}-schedule")]
            _quicsm(
                "compare",
                *pair,
                "--name",
                "fixed 50 Mbit/s",
                "--name",
                "schedule",
                "--html",
                _rel(HERE / f"bbr_schedule_{impl}.html"),
                "--timelines",
                "2",
            )
    now = f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC"
    runs_rows = []
    ledger = TRACES / "attempts.json"
    tried = json.loads(ledger.read_text()) if ledger.is_file() else {}
    for n, runs in groups.items():
        plts = [meta["result"].get("plt_ms") or 0 for _, meta in runs]
        sizes = [(log.stat().st_size) for log in sorted((TRACES / n).glob("*/server.log.gz"))]
        lines = [len(t.events) for t, _ in runs]
        lates = [meta["emulator"].get("late_p99_us") for _, meta in runs]
        lates = [x / 1000 for x in lates if x is not None]
        c = tried.get(n, {})
        runs_rows.append(
            [
                n,
                len(runs),
                c.get("attempts", "?"),
                c.get("late", "?"),
                c.get("failed", "?"),
                f"{min(lates):.1f}–{max(lates):.1f} ms" if lates else "—",
                f"{mean_sd(plts)[0] / 1000:.1f} s",
                f"{max(lines)}",
                f"{max(sizes) / 1024:.0f} KiB",
            ]
        )
    head = table(
        [
            "scenario",
            "good runs",
            "attempts",
            "emulator late",
            "failed",
            "relay lateness p99 (good runs)",
            "mean duration",
            "max log lines",
            "max server.log.gz",
        ],
        runs_rows,
    )
    text = (
        f"# The whole BBR cycle, from running code (three implementations)\n\nGenerated {now} by "
        f"`experiments/bbr_long.py` (scenarios `experiments/bbr_long.toml`, `experiments/bbr_long_tcp.toml`, "
        f"repo {git_rev()}); traces in `traces/bbr-long/`.\n\n"
        + head
        + "\n## Cycle timing against the design values (desktop runs)\n\n"
        + cycle_report(groups)
    )
    text += "\n## Under a rate schedule (a new rate in 10–100 Mbit/s every 2 s)\n\n" + schedule_report(groups)
    text += "\n## An RTT step (36 ms, then 80 ms)\n\n" + rtt_step_report(groups)
    _write(HERE / "bbr2_cycle.md", text, HERE / "bbr2_cycle.notes.md")
    f13, counts = fig13_report(groups)
    text = (
        f"# Fig. 13 for BBR on long flows: desktop vs a client at 10 % of a core\n\nGenerated {now} by "
        f"`experiments/bbr_long.py` (repo {git_rev()}); traces in `traces/bbr-long/`. Runs per stack "
        f"(desktop + mobile): {', '.join(f'{i} {a}+{b}' for i, a, b in counts)}.\n\n" + f13
    )
    _write(HERE / "fig13_bbr_long.md", text, HERE / "fig13_bbr_long.notes.md")
    print(json.dumps({n: len(r) for n, r in groups.items()}))


def _write(path: Path, text: str, notes: Path) -> None:
    if notes.is_file():
        text += "\n" + notes.read_text()
    path.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
