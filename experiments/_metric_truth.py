"""Ground truth for the metric-state reader: a qlog that logs both states and metrics, split into the
metric columns (states stripped) and the state events the stack logged, and the scores of the reader's
inference against them (per-state time-share error, transition precision and recall).

This is the experiment's own reading of whole qlogs (one JSON object per record, decoded with msgspec);
the reader under test sees only the :class:`~quicsm.traces.metric_states.MetricSeries` columns.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from quicsm.traces.metric_states import NULL, Inferred, MetricSeries
from quicsm.traces.states import canonical_state

_DEC = msgspec.json.Decoder()
_METRIC = {
    "cwnd": ("congestion_window", "cwnd"),
    "inflight": ("bytes_in_flight",),
    "ssthresh": ("ssthresh",),
    "pacing": ("pacing_rate",),
    "srtt_us": ("smoothed_rtt",),
    "min_rtt_us": ("min_rtt",),
    "latest_rtt_us": ("latest_rtt",),
    "pto_count": ("pto_count",),
    "packets": ("packets_in_flight",),
}
_TIMED = {"srtt_us", "min_rtt_us", "latest_rtt_us"}


@dataclass
class Truth:
    t_us: np.ndarray
    states: list[str]
    end_us: int


@dataclass
class Connection:
    path: str
    series: MetricSeries
    truth: Truth | None


def _records(raw: bytes) -> Iterator[dict]:
    text = raw.lstrip()
    if text.startswith(b"\x1e") or b"\x1e" in raw[:4096]:
        parts = raw.split(b"\x1e")
    elif text.startswith(b"{") and b'"traces"' in raw[:2000] and b"\n{" not in raw[:2000]:
        doc = json.loads(raw)
        for tr in doc["traces"]:
            yield {"__header__": True, **{k: v for k, v in tr.items() if k != "events"}, **doc}
            for ev in tr["events"]:
                yield ev
        return
    else:
        parts = raw.split(b"\n")
    for p in parts:
        p = p.strip()
        if p:
            try:
                yield _DEC.decode(p)
            except msgspec.DecodeError:
                continue


def read_connection(path: str | Path) -> Connection:
    """One qlog with one connection (JSON-SEQ, NDJSON or a document with one trace)."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    scale = 1000.0
    rows: dict[str, list] = {k: [] for k in ("t_us", *_METRIC)}
    lost, pto, timers, sent_t, sent_pn, ack_t, ack_l, st_t, st_s = [], [], [], [], [], [], [], [], []
    t_min, t_max = None, None
    first = True
    for rec in _records(raw):
        if first or rec.get("__header__"):
            first = False
            conf = rec.get("configuration") or (rec.get("trace") or {}).get("configuration") or {}
            if str(conf.get("time_units", "")).lower() in ("us", "microseconds"):
                scale = 1.0
            if "time" not in rec:
                continue
        name = str(rec.get("name", ""))
        data = rec.get("data") or {}
        tm = rec.get("time")
        if not isinstance(tm, (int, float)):
            continue
        t = int(round(tm * scale))
        t_min = t if t_min is None else min(t_min, t)
        t_max = t if t_max is None else max(t_max, t)
        short = name.rsplit(":", 1)[-1]
        if short in ("metrics_updated", "recovery_metrics_updated"):
            rows["t_us"].append(t)
            for out, keys in _METRIC.items():
                v = next((data[k] for k in keys if k in data), None)
                if v is None or not isinstance(v, (int, float)):
                    rows[out].append(NULL)
                else:
                    v = v * scale if out in _TIMED else v
                    rows[out].append(int(min(v, 2**62)))
        elif short in ("congestion_state_updated",):
            st_t.append(t)
            st_s.append(canonical_state(str(data.get("new", ""))))
        elif short == "packet_lost":
            lost.append(t)
        elif short == "loss_timer_updated":
            if data.get("event_type") == "expired":
                timers.append(t)
                if data.get("timer_type") == "pto":
                    pto.append(t)
        elif short == "packet_sent":
            pn = (data.get("header") or {}).get("packet_number")
            ptype = (data.get("header") or {}).get("packet_type")
            if isinstance(pn, int) and ptype in ("1RTT", "1rtt", "one_rtt"):
                sent_t.append(t)
                sent_pn.append(pn)
        elif short == "packet_received":
            ptype = (data.get("header") or {}).get("packet_type")
            if ptype not in ("1RTT", "1rtt", "one_rtt"):
                continue
            for f in data.get("frames") or ():
                if f.get("frame_type") == "ack" and f.get("acked_ranges"):
                    ack_t.append(t)
                    ack_l.append(max(r[-1] for r in f["acked_ranges"]))
    arr = {k: np.asarray(v, np.int64) for k, v in rows.items()}
    series = MetricSeries(
        **arr,
        lost_us=np.asarray(lost, np.int64),
        pto_us=np.asarray(pto, np.int64),
        timer_us=np.asarray(timers, np.int64),
        sent_us=np.asarray(sent_t, np.int64),
        sent_pn=np.asarray(sent_pn, np.int64),
        ack_us=np.asarray(ack_t, np.int64),
        ack_largest=np.asarray(ack_l, np.int64),
        start_us=t_min,
    )
    truth = None
    if st_t:
        truth = Truth(np.asarray(st_t, np.int64), st_s, int(t_max or st_t[-1]))
    return Connection(str(path), series, truth)


def without_packets(s: MetricSeries) -> MetricSeries:
    """What quicsm's qlog reader keeps: the metrics, losses and timer expiries, no packet numbers."""
    return MetricSeries(
        s.t_us, s.cwnd, s.inflight, s.ssthresh, s.pacing, s.srtt_us, s.min_rtt_us, s.latest_rtt_us,
        s.pto_count, s.packets, lost_us=s.lost_us, pto_us=s.pto_us, timer_us=s.timer_us, start_us=s.start_us,
    )  # fmt: skip


# ---- scores --------------------------------------------------------------------------------------


def _stays(t: np.ndarray, states: list[str], start: int, end: int) -> dict[str, float]:
    """Time per state over [start, end] (a state holds until the next transition)."""
    out: dict[str, float] = {}
    times = np.clip(np.append(t, end), start, end)
    for i, s in enumerate(states):
        out[s] = out.get(s, 0.0) + float(times[i + 1] - times[i])
    return out


def shares(t: np.ndarray, states: list[str], start: int, end: int) -> dict[str, float]:
    stays = _stays(t, states, start, end)
    total = max(end - start, 1)
    return {k: v / total for k, v in stays.items()}


def merge(states: list[str], mapping: dict[str, str]) -> list[str]:
    return [mapping.get(s, s) for s in states]


def dedup(t: np.ndarray, states: list[str]) -> tuple[np.ndarray, list[str]]:
    keep = [i for i in range(len(states)) if i == 0 or states[i] != states[i - 1]]
    return t[keep], [states[i] for i in keep]


def match_transitions(
    tt: np.ndarray, ts: list[str], it: np.ndarray, is_: list[str], tol_us: int
) -> tuple[int, int, int, list[tuple[str, str]]]:
    """(true positives, truth transitions, inferred transitions, confusion pairs) for transitions
    ``(from, to)`` matched one to one within ``tol_us``: an inferred transition counts when a truth
    transition between the same states lies within the tolerance and is not matched yet."""
    truth = [(int(tt[i]), ts[i - 1], ts[i]) for i in range(1, len(ts))]
    inf = [(int(it[i]), is_[i - 1], is_[i]) for i in range(1, len(is_))]
    used = [False] * len(truth)
    tp = 0
    pairs: list[tuple[str, str]] = []
    for t, a, b in inf:
        best, bestd = -1, tol_us + 1
        for k, (u, x, y) in enumerate(truth):
            if not used[k] and x == a and y == b and abs(u - t) < bestd:
                best, bestd = k, abs(u - t)
        if best >= 0:
            used[best] = True
            tp += 1
    return tp, len(truth), len(inf), pairs


def confusion(
    tt: np.ndarray, ts: list[str], it: np.ndarray, is_: list[str], start: int, end: int, labels: list[str]
) -> np.ndarray:
    """Time (us) the truth spent in state i while the reader said state j."""
    cuts = np.unique(np.clip(np.concatenate([tt, it, [start, end]]), start, end))
    out = np.zeros((len(labels), len(labels)))
    pos = {s: i for i, s in enumerate(labels)}
    mid = (cuts[:-1] + cuts[1:]) / 2
    dur = np.diff(cuts).astype(float)
    ti = np.searchsorted(tt, mid, side="right") - 1
    ii = np.searchsorted(it, mid, side="right") - 1
    for m, d, a, b in zip(mid, dur, ti.tolist(), ii.tolist()):
        if a < 0 or b < 0 or d <= 0:
            continue
        sa, sb = ts[a], is_[b]
        if sa in pos and sb in pos:
            out[pos[sa], pos[sb]] += d
    return out


@dataclass
class Score:
    path: str
    share_err: dict[str, float]
    tp: int
    n_truth: int
    n_inferred: int
    truth_share: dict[str, float]


def score(conn: Connection, inferred: Inferred, mapping: dict[str, str], tol_us: int) -> Score:
    assert conn.truth is not None
    tr = conn.truth
    start = min(int(tr.t_us[0]), int(inferred.t_us[0]) if len(inferred) else int(tr.t_us[0]))
    start = int(tr.t_us[0])
    end = tr.end_us
    tt, ts = dedup(tr.t_us, merge(tr.states, mapping))
    it, is_ = dedup(inferred.t_us, merge(inferred.states, mapping))
    a = shares(tt, ts, start, end)
    b = shares(it, is_, start, end)
    err = {k: b.get(k, 0.0) - a.get(k, 0.0) for k in set(a) | set(b)}
    tp, nt, ni, _ = match_transitions(tt, ts, it, is_, tol_us)
    return Score(conn.path, err, tp, nt, ni, a)
