"""Congestion-control states read from metrics, for qlogs whose stack logs no state (aioquic, quinn,
ngtcp2, tquic) or whose state events are stripped on purpose (to measure this reader against them).

The rules, their reasoning (RFC 9002 and each stack's sender) and their measured accuracy are in
docs/metric-states.md. In short, for loss-based senders (Reno, Cubic) the reader sees:

* a **window cut** (the congestion window falls) = a congestion event: Recovery (RFC 9002 7.3.2),
  or RetransmissionTimeout when the window collapses to the minimum (persistent congestion, 7.6);
* the **end of recovery** = the first acknowledgement of a packet sent after the cut: from packet
  numbers when the columns carry them, else from the metrics alone (an ACK whose latest RTT sample
  reaches back past the first send after the cut);
* outside recovery, at each acknowledgement: **application-limited** when the bytes in flight before
  the ACK left the window unused (the Chromium/quic-go ``isCwndLimited`` test, RFC 9002 7.8), else
  **slow start** below the slow-start threshold (logged, or the window after the last cut) and
  **congestion avoidance** above it;
* **ProbeTimeout** from a PTO expiry (a timer event or a rise of ``pto_count``) to the next ACK.

BBR-like senders (a pacing rate logged) are read by the pacing gain the rate reveals: Startup (rate
growing by about 2x a round), Drain (a fall to well under the rate before), ProbeBw, ProbeRtt (the
window held at its minimum or under the bandwidth-delay product), and ApplicationLimited (an idle gap
with room in the window, where the stack has that state). ProbeBw's phases are one state here: they differ only in a gain on a
bandwidth estimate that moves under them, and reading them from the rate failed on quiche's BBR2.
quinn's BBR is refused (no state, the reason reported): against quinn's own state lines its phases
read from the metrics were far from the accuracy goal (every state within 0.02 on 3 of 30 connections).

Everything is NumPy over one connection's columns: no Python object per event. Odd metrics (fields
missing, zeros, counters that reset, a window logged once) give fewer states, never an exception.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "NULL",
    "MetricSeries",
    "Profile",
    "PROFILES",
    "Inferred",
    "profile_for",
    "infer",
    "INFERRED_TRIGGER",
    "INFERRED_LABEL",
    "LOSS_STATES",
    "BBR_STATES",
]

NULL = np.iinfo(np.int64).min
"""Absent value in an int64 column (as :data:`quicsm.traces.columnar.NULL`)."""
INFERRED_TRIGGER = "inferred"
"""Prefix of every inferred transition's trigger (``inferred:loss``, ``inferred:ack`` ...)."""

LOSS_STATES = (
    "SlowStart",
    "CongestionAvoidance",
    "ApplicationLimited",
    "Recovery",
    "ProbeTimeout",
    "RetransmissionTimeout",
)
BBR_STATES = ("Startup", "Drain", "ProbeBw", "ProbeRtt", "ApplicationLimited")
_SS, _CA, _APP, _REC, _PTO, _RTO = range(6)
_EMPTY = np.zeros(0, np.int64)


def _empty() -> np.ndarray:
    return _EMPTY.copy()


@dataclass(slots=True)
class MetricSeries:
    """One connection's metric samples in time order (int64, :data:`NULL` = not in that record), and the
    events around them that sharpen the reading (all optional, empty when the file has none)."""

    t_us: np.ndarray
    cwnd: np.ndarray
    inflight: np.ndarray
    ssthresh: np.ndarray
    pacing: np.ndarray
    srtt_us: np.ndarray
    min_rtt_us: np.ndarray
    latest_rtt_us: np.ndarray | None = None
    pto_count: np.ndarray | None = None
    packets: np.ndarray | None = None
    """Packets in flight (quic-go, quinn), when logged."""
    lost_us: np.ndarray = field(default_factory=_empty)
    """Times of ``packet_lost`` events."""
    pto_us: np.ndarray = field(default_factory=_empty)
    """Times a probe timeout fired (quic-go's ``loss_timer_updated`` expired, timer ``pto``)."""
    timer_us: np.ndarray = field(default_factory=_empty)
    """Times any loss-detection timer fired (``loss_timer_updated`` expired: ``ack`` or ``pto``)."""
    spurious_us: np.ndarray = field(default_factory=_empty)
    """Times a loss was found spurious (quic-go's ``spurious_loss``: the cut is undone)."""
    sent_us: np.ndarray = field(default_factory=_empty)
    sent_pn: np.ndarray = field(default_factory=_empty)
    ack_us: np.ndarray = field(default_factory=_empty)
    ack_largest: np.ndarray = field(default_factory=_empty)
    """Largest packet number acknowledged by each ACK frame the sender received."""
    start_us: int | None = None
    """The connection's first event of any kind (the first state is held from there)."""

    def __post_init__(self) -> None:
        n = len(self.t_us)
        for name in ("cwnd", "inflight", "ssthresh", "pacing", "srtt_us", "min_rtt_us"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"metric column {name} has {len(getattr(self, name))} rows, times {n}")
        if self.latest_rtt_us is None:
            self.latest_rtt_us = np.full(n, NULL, np.int64)
        if self.pto_count is None:
            self.pto_count = np.full(n, NULL, np.int64)
        if self.packets is None:
            self.packets = np.full(n, NULL, np.int64)


@dataclass(frozen=True, slots=True)
class Profile:
    """How one stack's sender defines its states (docs/metric-states.md has each one's source)."""

    name: str
    burst_packets: int = 3
    """Unused window (in packets) still counted as window-limited (quic-go's ``maxBurstPackets``)."""
    recovery_end: str = "ack_after_cut"
    """``ack_after_cut`` (RFC 9002 7.3.2) or ``next_sample`` (quiche: its state string is "recovery"
    only while ``now`` is the recovery start)."""
    app_limited: bool = True
    """Whether the stack has an application-limited state (quiche's state machine has none)."""
    min_window_packets: int = 2
    every_record: bool = False
    """The state is judged at every record with the window then (quiche evaluates its state string at
    each qlog emission), not at ACKs with the window before them (the Chromium lineage: quic-go)."""
    per_packet: bool = False
    """The state is set by the last packet of each ACK (quic-go calls ``OnPacketAcked`` per packet with one
    ``priorInFlight``); the window may grow between the packets of one ACK (slow start, Cubic and Reno
    avoidance each their way: docs/metric-states.md)."""
    bbr_refused: str = ""
    """Why this stack's BBR phases are not read from its metrics (empty: they are). A series of such a
    stack with a pacing rate and no slow-start threshold gives no states, and the reader says why,
    rather than a machine that is not measured."""
    hystart: bool = False
    """Chromium's delay-based hybrid slow start (quic-go ``HybridSlowStart``): slow start ends when the
    least RTT of a round's first eight samples exceeds the min RTT by an eighth (4-16 ms), whether the
    sender was window- or application-limited; the exit is replayed from the RTT samples."""


PROFILES: dict[str, Profile] = {
    "rfc9002": Profile("rfc9002"),
    "quic-go": Profile("quic-go", per_packet=True, hystart=True),
    "aioquic": Profile("aioquic"),
    "quinn": Profile(
        "quinn",
        bbr_refused="quinn's BBR phases are not read from its metrics: against quinn's own state lines they "
        "were within 0.02 on 3 of 30 connections, transitions precision 0.24-0.32 (docs/metric-states.md, "
        "quinn's BBR); its NewReno and Cubic are read",
    ),
    "ngtcp2": Profile("ngtcp2"),
    "quiche": Profile("quiche", recovery_end="next_sample", app_limited=False, every_record=True),
}


def profile_for(implementation: str | None) -> Profile:
    """The profile of a stack by its implementation name; RFC 9002's rules for any other."""
    low = (implementation or "").lower()
    for key, prof in PROFILES.items():
        if key != "rfc9002" and key in low:
            return prof
    return PROFILES["rfc9002"]


@dataclass(slots=True)
class Inferred:
    """Inferred transitions: at ``t_us[i]`` the connection entered ``states[i]`` (first = initial state),
    for ``reasons[i]``; ``family`` is ``loss`` or ``bbr``; ``sample_state`` the state per metric sample."""

    t_us: np.ndarray
    states: list[str]
    reasons: list[str]
    family: str
    sample_state: np.ndarray
    mss: int
    refused: str = ""
    """Why no state was read although the series has metrics (a BBR the profile does not read)."""

    def __len__(self) -> int:
        return len(self.states)


def _ffill(a: np.ndarray, fill: int = NULL) -> np.ndarray:
    """Each NULL replaced by the last value before it (``fill`` before the first value)."""
    if not len(a):
        return a.copy()
    have = a != NULL
    idx = np.where(have, np.arange(len(a)), -1)
    np.maximum.accumulate(idx, out=idx)
    out = np.where(idx >= 0, a[np.maximum(idx, 0)], fill)
    return out.astype(np.int64)


def _mss(inflight: np.ndarray) -> int:
    """Full packet size: the common increment of bytes in flight from one send to the next."""
    d = np.diff(inflight[inflight != NULL]) if len(inflight) > 1 else _EMPTY
    d = d[(d >= 500) & (d <= 9000)]
    if not len(d):
        return 1200
    values, counts = np.unique(d, return_counts=True)
    return int(values[np.argmax(counts)])  # the most common: full-size packets


def _first_unit(inflight: np.ndarray, mss: int) -> int:
    """The datagram size before path MTU discovery raised it: the smallest common full-size send."""
    d = np.diff(inflight[inflight != NULL]) if len(inflight) > 1 else _EMPTY
    d = d[(d >= 1200) & (d <= 9000)]
    if not len(d):
        return mss
    values, counts = np.unique(d, return_counts=True)
    return int(values[counts >= max(2, counts.max() // 10)].min(initial=mss))


def _datagram_sizes(inflight: np.ndarray, fallback: int) -> np.ndarray:
    """The sender's full datagram size at each record: path MTU discovery raises it mid-connection
    (quic-go: 1,280 -> 1,366 -> 1,409 bytes) and never lowers it. A rise of bytes in flight is one send;
    a size seen on two sends in a row is the full size (an MTU probe is a single larger send, a short
    packet a single smaller one); the largest confirmed so far holds."""
    n = len(inflight)
    have = np.flatnonzero(inflight != NULL)
    out = np.full(n, NULL, np.int64)
    if len(have) > 2:
        d = np.diff(inflight[have])
        same = np.zeros(len(d), bool)
        same[1:] = (d[1:] == d[:-1]) & (d[1:] >= 1000) & (d[1:] <= 9000)
        rows = have[1:][same]
        out[rows] = d[same]
        out = np.where(out != NULL, np.maximum.accumulate(np.where(out != NULL, out, 0)), NULL)
    return _ffill(out, fallback)


def infer(series: MetricSeries, profile: Profile | None = None) -> Inferred:
    """The states of one connection from its metrics (BBR-like when a pacing rate varies and no
    slow-start threshold is ever logged, else loss-based)."""
    prof = profile or PROFILES["rfc9002"]
    n = len(series.t_us)
    if n == 0:
        return Inferred(_EMPTY.copy(), [], [], "loss", np.zeros(0, np.int8), 1200)
    order = np.argsort(series.t_us, kind="stable")
    if np.any(order != np.arange(n)):
        series = _sorted(series, order)
    series = _rtt_in_seconds(series)
    if prof.bbr_refused and (series.pacing != NULL).any() and not (series.ssthresh != NULL).any():
        # (quinn-proto's BBR logs a pacing rate and no threshold, its NewReno and Cubic the reverse: a
        # pacing rate that changed fewer than four times is still its BBR)
        return Inferred(_EMPTY.copy(), [], [], "bbr", np.zeros(0, np.int8), 1200, prof.bbr_refused)
    if _looks_bbr(series):
        return _infer_bbr(series, prof)
    return _infer_loss(series, prof)


def _rtt_in_seconds(s: MetricSeries) -> MetricSeries:
    """RTTs written in seconds where qlog wants milliseconds (quinn-proto 0.11.14 writes ``latest_rtt``
    0.044 for 44 ms), read 1000x too small: the first RTT sample after the connection's first event
    cannot be under a hundredth of the time it took to come, while a thousand times it fits that time
    (within 2x: the server's first sample is the handshake's round trip). Such a series gets its RTT columns scaled; any other is returned as it is."""
    assert s.latest_rtt_us is not None
    t0 = s.start_us if s.start_us is not None else (int(s.t_us[0]) if len(s.t_us) else 0)
    rows = np.flatnonzero((s.latest_rtt_us != NULL) & (s.latest_rtt_us > 0) & (s.t_us > t0))
    if not len(rows):
        return s
    r = int(rows[0])
    rtt, took = int(s.latest_rtt_us[r]), int(s.t_us[r]) - t0
    if not (rtt * 100 < took and 2 * rtt * 1000 >= took and rtt * 1000 <= 2 * took):
        return s

    def scaled(a: np.ndarray) -> np.ndarray:
        return np.where(a != NULL, a * 1000, NULL)

    return dataclasses.replace(
        s, srtt_us=scaled(s.srtt_us), min_rtt_us=scaled(s.min_rtt_us), latest_rtt_us=scaled(s.latest_rtt_us)
    )


def _sorted(s: MetricSeries, order: np.ndarray) -> MetricSeries:
    cols = {k: getattr(s, k)[order] for k in ("t_us", "cwnd", "inflight", "ssthresh", "pacing", "srtt_us")}
    assert s.latest_rtt_us is not None and s.pto_count is not None
    return dataclasses.replace(
        s,
        **cols,
        min_rtt_us=s.min_rtt_us[order],
        latest_rtt_us=s.latest_rtt_us[order],
        pto_count=s.pto_count[order],
        packets=s.packets[order] if s.packets is not None else None,
        start_us=s.start_us,
    )


def _looks_bbr(s: MetricSeries) -> bool:
    pacing = s.pacing[s.pacing != NULL]
    if len(pacing) < 8 or np.any(s.ssthresh != NULL):
        return False
    return bool(len(np.unique(pacing)) >= 4)


def _transitions(
    t: np.ndarray, codes: np.ndarray, names: tuple[str, ...], why: list[str], start: int | None
) -> tuple[np.ndarray, list[str], list[str]]:
    """The rows where the state changes, at ``t`` (a row's time, or an earlier moment it stands for)."""
    change = np.ones(len(codes), bool)
    change[1:] = codes[1:] != codes[:-1]
    at = np.flatnonzero(change)
    times = t[at].copy()
    if start is not None and len(times) and start < times[0]:
        times[0] = start
    return times, [names[c] for c in codes[at].tolist()], [why[i] for i in at.tolist()]


# ---- loss-based senders --------------------------------------------------------------------------


def _infer_loss(s: MetricSeries, prof: Profile) -> Inferred:
    n = len(s.t_us)
    t = s.t_us
    assert s.latest_rtt_us is not None and s.pto_count is not None
    cwnd = _ffill(s.cwnd, 0)
    inflight = _ffill(s.inflight, 0)
    latest = _ffill(s.latest_rtt_us, 0)
    mss = _mss(s.inflight)
    prev_cwnd = np.concatenate(([cwnd[0]], cwnd[:-1]))
    prior = np.concatenate(([0], inflight[:-1]))
    # an ACK: a new RTT sample, or bytes in flight fell (no window cut at the same record)
    # a new RTT sample: some stacks repeat every field in every record (quic-go v0.5x+), so only a change
    rtt_sample = np.zeros(n, bool)
    rtt_sample[1:] = (s.latest_rtt_us[1:] != NULL) & (latest[1:] > 0) & (latest[1:] != latest[:-1])
    fell = np.zeros(n, bool)
    fell[1:] = inflight[1:] < inflight[:-1]
    # packets declared lost since the record before: they left bytes in flight unacknowledged
    lost_n = np.zeros(n, np.int64)
    if len(s.lost_us):
        lost_n[1:] = np.searchsorted(s.lost_us, t[1:], side="right") - np.searchsorted(s.lost_us, t[:-1], side="right")
    known_cwnd = s.cwnd != NULL
    cut = np.zeros(n, bool)
    cut[1:] = (
        known_cwnd[1:] & (cwnd[1:] < prev_cwnd[1:]) & (cwnd[1:] < prev_cwnd[1:] - np.minimum(mss, prev_cwnd[1:] // 20))
    )
    ack = rtt_sample | fell
    ack[0] = False  # the first record opens the connection: it acknowledges nothing yet
    floor = prof.min_window_packets * mss
    # (a collapse, not a halving of a small window: Reno halves, Cubic keeps 0.7, persistent congestion
    # takes the window from wherever it was to the minimum)
    rto = cut & (cwnd <= floor + mss // 2) & (prev_cwnd > 2 * floor) & (cwnd * 10 < prev_cwnd * 4)
    # spurious-loss undo (quic-go v0.65 OnSpuriousLoss): the window restored in one step ends recovery
    # packets this record acknowledged: from packets in flight where logged, else from bytes
    assert s.packets is not None
    pk = _ffill(s.packets, 0)
    # the window's unit is the sender's datagram size, which path MTU discovery raises
    unit = _datagram_sizes(s.inflight, _first_unit(s.inflight, mss))
    # a send: bytes in flight rose beyond what the losses since the record before took off (a record that
    # shows a loss the loss timer declared and the sends after it at once counts as a send)
    sends = np.zeros(n, bool)
    sends[1:] = inflight[1:] > inflight[:-1] - lost_n[1:] * unit[1:]
    by_count = np.concatenate(([0], pk[:-1])) - pk
    by_bytes = (prior - inflight + mss - 1) // mss
    # packets in flight leave out MTU probes (quic-go: not "outstanding"), which bytes in flight and the
    # window's per-packet growth count: bytes beyond the counted packets are such probes
    probes = np.maximum(np.rint((prior - inflight - by_count * unit) / unit), 0).astype(np.int64)
    net = np.where(s.packets != NULL, by_count + probes, by_bytes) - lost_n
    acked_packets = np.maximum(net, 1)
    # a fall of bytes in flight that the losses since the record before explain is no acknowledgement
    # (quic-go v0.5x+ writes no record when its loss timer declares a loss; the next record shows it)
    ack &= ~(~rtt_sample & (lost_n > 0) & (net <= 0))
    grew = cwnd - prev_cwnd
    # a window restored in one step, by more than slow start could add for the packets acknowledged,
    # after a cut: a spurious loss undone (quic-go v0.65 OnSpuriousLoss, quiche's Cubic rollback)
    undo = known_cwnd & (grew >= np.maximum(4 * mss, prev_cwnd // 4)) & (grew > acked_packets * mss + mss)
    # or a rise of the window right after a loss was found spurious (quic-go's spurious_loss events) back
    # to the window before the last cut: the undo, whatever the packets acknowledged
    last_cut = np.maximum.accumulate(np.where(cut, np.arange(n), 0))
    if len(s.spurious_us):
        found = np.zeros(n, bool)
        found[1:] = np.searchsorted(s.spurious_us, t[1:], side="right") > np.searchsorted(
            s.spurious_us, t[:-1], side="right"
        )
        # ... back to the window before the last cut (OnSpuriousLoss restores it), not a later growth;
        # quic-go's ReceivedAck calls OnSpuriousLoss before OnPacketAcked: the ACK's packets may grow the
        # restored window (at most a packet each, slow start's rate) before the record shows it
        above = cwnd - prev_cwnd[last_cut]
        restored = (above >= -(mss // 2)) & (above <= acked_packets * unit + mss // 2)
        undo |= known_cwnd & (grew >= mss) & found & restored & (np.arange(n) > last_cut)
    undo &= np.cumsum(cut) > 0
    # the window the ACK's packets began from: at an undo the one restored (quic-go's ReceivedAck calls
    # OnSpuriousLoss before OnPacketAcked), so what the record shows above it is the packets' growth
    base = np.where(undo, np.minimum(prev_cwnd[last_cut], cwnd), prev_cwnd)
    grew_ack = cwnd - base
    # recovery episodes
    cuts = np.flatnonzero(cut & ~rto)
    ends = _recovery_ends(s, cuts, ack, rtt_sample, sends, latest, undo, prof)
    mark = np.zeros(n + 1, np.int64)
    np.add.at(mark, cuts, 1)
    np.add.at(mark, ends, -1)
    in_rec = np.cumsum(mark[:n]) > 0
    # slow-start threshold: logged, else the window after the last cut (unbounded before the first)
    logged = s.ssthresh != NULL
    hyst = _EMPTY
    if logged.any():
        ssthresh = _ffill(s.ssthresh, np.iinfo(np.int64).max)
    else:
        # slow start grows the window a whole packet per packet acknowledged; less than half a packet
        # on a window-limited ACK is avoidance growth (Cubic adds bytes), so slow start had ended
        busy = (prior >= prev_cwnd) | (prev_cwnd - prior <= prof.burst_packets * unit)
        flat = ack & busy & (grew < unit // 2) & (acked_packets >= 1) & (prior > inflight) & ~in_rec & ~cut
        if prof.hystart:
            hyst = _hystart_exit(s, t, ack & rtt_sample, latest, prev_cwnd, unit, cut)
            flat[hyst] = True
        ssthresh = _threshold_of_cuts(cwnd, prev_cwnd, cut, rto, undo, flat)
    window = cwnd if prof.every_record else prev_cwnd
    window = np.where(undo, cwnd if prof.every_record else base, window)  # an undo: by the window it restored
    ss = window < ssthresh
    phase = np.where(ss, _SS, _CA)
    if prof.app_limited:
        if prof.per_packet:
            prior = _prior_in_flight(s, t, inflight, cwnd, unit, in_rec)
        limited = (prior >= window) | (ss & (prior > window // 2)) | (window - prior <= prof.burst_packets * unit)
        if prof.per_packet:
            limited = np.where(ss & (grew_ack >= unit // 2), grew_ack >= acked_packets * unit - unit // 2, limited)
            # in avoidance the window grows during the ACK too (Reno a packet per window acknowledged, Cubic
            # bytes per packet) while every packet is tested against the same bytes in flight before it: the
            # ACK's last packet, whose test sets the state, saw the window less its own share of the growth
            # Cubic (quic-go's Chromium Cubic): every packet of an ACK sees the same time, so the first
            # packets take the window to the time's target, each by at most half a packet (half its acked
            # bytes); the packets after that see the grown window
            half = np.maximum(unit // 2, 1)
            g = np.maximum(grew_ack, 0)
            last = np.where(acked_packets > (g + half - 1) // half, cwnd, cwnd - (g - (acked_packets - 1) * half))
            late = (prior >= last) | (last - prior <= prof.burst_packets * unit)
            avoid = ack & ~ss & ~in_rec & ~cut
            steps = avoid & (grew_ack > 0)
            reno_like = bool(steps.any() and np.mean(grew_ack[steps] == unit[steps]) >= 0.9)
            if reno_like:
                # Reno: a whole packet once per window of packets acknowledged; where in the ACK is
                # counted (quic-go's numAckedPackets), so whether the packets after the step saw it
                late = _reno_steps(avoid, limited, grew_ack, acked_packets, base, prior, unit, cut, undo, prof)
            limited = np.where(~ss & (grew_ack > 0), late, limited)  # (an undo's own rise is no ACK growth)
        # an undo at an ACK that newly acknowledged nothing (under reordering the late packets were already
        # declared lost, so acknowledging them acknowledges no outstanding packet): quic-go restores the
        # window (OnSpuriousLoss), logs slow start or avoidance by it, and returns before any packet's test
        limited |= undo & ~rtt_sample & (net <= 0)
        phase = np.where(limited, phase, _APP)
    # the phase changes only at an ACK outside recovery (or at the record that ends a recovery); other
    # records keep the last one
    decided = (np.ones(n, bool) if prof.every_record else ack) & ~in_rec
    decided[np.minimum(ends, n - 1)[ends < n]] = True
    decided[0] = True
    code = np.where(decided, phase, -1)
    if not ack[0]:
        code[0] = _SS
    idx = np.where(code >= 0, np.arange(n), 0)
    np.maximum.accumulate(idx, out=idx)
    code = code[idx]
    code = np.where(in_rec, _REC, code)
    # timeouts: a PTO holds until the next ACK; a collapse to the minimum window likewise
    pto_at = _pto_samples(s, t)
    timeout = np.full(n, -1, np.int64)
    timeout[pto_at] = _PTO
    timeout[rto] = _RTO
    clear = ack & (timeout < 0)
    hold = np.where(timeout >= 0, timeout, np.where(clear, -2, -1))
    idx = np.where(hold != -1, np.arange(n), -1)
    np.maximum.accumulate(idx, out=idx)
    held = np.where(idx >= 0, hold[np.maximum(idx, 0)], -2)
    code = np.where(held >= 0, held, code).astype(np.int8)
    why = np.full(n, "ack", object)
    why[cut] = "loss"
    if len(s.lost_us):
        lost_near = np.zeros(n, bool)
        near = np.searchsorted(s.lost_us, t - 1000)
        lost_near[:] = (near < len(s.lost_us)) & (s.lost_us[np.minimum(near, len(s.lost_us) - 1)] <= t)
        why[cut & ~lost_near] = "ecn"
    why[rto] = "persistent_congestion"
    why[pto_at] = "pto"
    why[undo] = "spurious_loss"
    # a loss declared when the loss timer fires cuts the window at once, but the stack writes its metrics
    # only at the next ACK or send (quic-go v0.5x+), which can be tens of ms later with a small window and
    # reordering: such a cut happened at a loss since the record before that a timer expiry logged just
    # before it declared. Outside recovery the first such loss cut (later ones fall in its recovery); in
    # recovery only the last can have (earlier ones are of packets sent before the cut). Other cuts happen
    # at the ACK that declares the loss, the record that shows them.
    when = t.copy()
    if len(s.lost_us) and len(s.timer_us):
        timed = _timed_losses(s)
        for r in np.flatnonzero(cut).tolist():
            lo = np.searchsorted(s.lost_us, t[r - 1] if r > 0 else np.iinfo(np.int64).min, side="right")
            hi = np.searchsorted(s.lost_us, t[r], side="right")
            if hi <= lo:
                continue
            k = lo + int(np.argmax(timed[lo:hi])) if r > 0 and not in_rec[r - 1] else hi - 1
            if timed[k]:
                when[r] = s.lost_us[k]
    times, states, reasons = _transitions(when, code, LOSS_STATES, [f"{INFERRED_TRIGGER}:{w}" for w in why], s.start_us)
    if prof.app_limited and prof.per_packet:
        # an ACK that ends application-limited as it began but grew the window: its first packets found
        # the window used and grew it (slow start or avoidance), a later one found it unused (quic-go
        # decides per packet): a visit the one record of the ACK shows only by the growth
        before = np.concatenate(([-1], code[:-1]))
        blip = ack & ~in_rec & (code == _APP) & (before == _APP) & (grew > 0) & (held < 0) & ~cut & ~undo
        # and an undo that ends application-limited: quic-go logs slow start or avoidance when it restores
        # the window (OnSpuriousLoss), then the ACK's packets find it unused
        blip |= undo & (code == _APP) & (held < 0)
        # and a hybrid slow-start exit at an application-limited ACK: quic-go logs avoidance at the exit,
        # then the ACK's packets find the window unused
        exit_row = np.zeros(n, bool)
        exit_row[hyst] = True
        blip |= exit_row & (code == _APP) & (held < 0) & ~in_rec
        if blip.any():
            times, states, reasons = _brief_visits(times, states, reasons, t[blip], np.where(ss[blip], _SS, _CA))
    times, states, reasons = _hidden_recoveries(s, t, cut, ss, times, states, reasons)
    return Inferred(times, states, reasons, "loss", code, mss)


def _timed_losses(s: MetricSeries) -> np.ndarray:
    """Per ``packet_lost``, whether the loss timer declared it (a timer expiry logged within 1 ms before)."""
    j = np.searchsorted(s.timer_us, s.lost_us, side="right") - 1
    return (j >= 0) & (s.lost_us - s.timer_us[np.maximum(j, 0)] <= 1000)


def _prior_in_flight(
    s: MetricSeries, t: np.ndarray, inflight: np.ndarray, cwnd: np.ndarray, unit: np.ndarray, in_rec: np.ndarray
) -> np.ndarray:
    """The bytes in flight as each record's ACK arrived (quic-go's ``priorInFlight``, which its
    application-limited test reads): the record before's, less the packets the loss timer declared lost
    since then (a ``packet_lost`` within 1 ms after a timer expiry): ``OnLossDetectionTimeout`` takes them
    out of bytes in flight and writes no metrics. The sender may then have refilled the window
    (``CanSend``: bytes in flight under the window) unseen: a send writes no record when it brings bytes
    in flight back to the value last written (one loss, one send). The records cannot tell such a refill
    from none, so losses that left room for a packet in the window then in force (the window, or 0.7 of
    it after the cut a loss outside recovery makes: quic-go's Reno and Cubic beta) count as refilled and
    the record before's value stands (of the readings tried, the one closest to the logged states on the
    tuning data: experiments/metric_truth.notes.md)."""
    n = len(t)
    prior = np.concatenate(([0], inflight[:-1]))
    if not len(s.lost_us) or not len(s.timer_us) or n < 2:
        return prior
    at = np.cumsum(np.concatenate(([0], _timed_losses(s))))  # timed losses before each index of lost_us
    lo = np.searchsorted(s.lost_us, t[:-1], side="right")
    hi = np.searchsorted(s.lost_us, t[1:], side="right")
    k = np.zeros(n, np.int64)
    k[1:] = at[hi] - at[lo]
    before_cwnd = np.concatenate(([cwnd[0]], cwnd[:-1]))
    was_rec = np.concatenate(([False], in_rec[:-1]))
    window = np.where(was_rec, before_cwnd, (before_cwnd * 7) // 10)  # quic-go: renoBeta = Cubic's beta = 0.7
    less = prior - k * unit
    return np.where((k > 0) & (less >= window), less, prior)


def _brief_visits(
    times: np.ndarray, states: list[str], reasons: list[str], at: np.ndarray, codes: np.ndarray
) -> tuple[np.ndarray, list[str], list[str]]:
    """Transitions with a visit of 1 us to ``LOSS_STATES[codes[i]]`` and back to ApplicationLimited added at
    each ``at[i]`` (a record inside an application-limited stretch)."""
    why = f"{INFERRED_TRIGGER}:ack"
    events = list(zip(times.tolist(), states, reasons))
    for when, c in zip(at.tolist(), codes.tolist()):
        events += [(when - 1, LOSS_STATES[c], why), (when, LOSS_STATES[_APP], why)]
    events.sort(key=lambda e: e[0])
    return np.array([e[0] for e in events], np.int64), [e[1] for e in events], [e[2] for e in events]


def _hidden_recoveries(
    s: MetricSeries,
    t: np.ndarray,
    cut: np.ndarray,
    ss: np.ndarray,
    times: np.ndarray,
    states: list[str],
    reasons: list[str],
) -> tuple[np.ndarray, list[str], list[str]]:
    """Recoveries cut and undone between two metrics records: a loss the loss timer declared (an expiry
    logged within 1 ms before it) outside recovery, found spurious (``spurious_loss``) before any record
    showed a cut. quic-go v0.5x+ cuts at such a loss and writes no metrics until the next ACK or send,
    by when the undo has put the window back. The undo logs slow start or avoidance by the restored
    window (``OnSpuriousLoss``), never application-limited: that waits for the next ACK's packets. A loop
    over the spurious losses only."""
    if not len(s.spurious_us) or not len(s.lost_us) or not len(s.timer_us):
        return times, states, reasons
    events = list(zip(times.tolist(), states, reasons))
    last_end = np.iinfo(np.int64).min
    for sp in np.sort(s.spurious_us).tolist():
        k = int(np.searchsorted(s.lost_us, sp, side="left")) - 1
        if k < 0 or s.lost_us[k] <= last_end:
            continue
        lost = int(s.lost_us[k])
        j = int(np.searchsorted(s.timer_us, lost, side="right")) - 1
        if j < 0 or lost - int(s.timer_us[j]) > 1000:
            continue
        a, b = np.searchsorted(t, lost, side="right"), np.searchsorted(t, sp, side="right")
        if cut[a:b].any():
            continue  # the records show this cut
        i = int(np.searchsorted(times, lost, side="right")) - 1
        before = states[i] if i >= 0 else "SlowStart"
        if before == "Recovery":
            continue
        if before == "ApplicationLimited":
            r = max(int(np.searchsorted(t, lost, side="right")) - 1, 0)  # the window it restores: the last shown
            before = "SlowStart" if ss[r] else "CongestionAvoidance"
        events += [(lost, "Recovery", f"{INFERRED_TRIGGER}:loss"), (sp, before, f"{INFERRED_TRIGGER}:spurious_loss")]
        last_end = sp
    events.sort(key=lambda e: e[0])
    out = [e for n, e in enumerate(events) if n == 0 or e[1] != events[n - 1][1]]
    return np.array([e[0] for e in out], np.int64), [e[1] for e in out], [e[2] for e in out]


def _recovery_ends(
    s: MetricSeries,
    cuts: np.ndarray,
    ack: np.ndarray,
    rtt_sample: np.ndarray,
    sends: np.ndarray,
    latest: np.ndarray,
    undo: np.ndarray,
    prof: Profile,
) -> np.ndarray:
    """Per cut, the first sample no longer in that recovery (n when it lasts to the end)."""
    n = len(s.t_us)
    t = s.t_us
    if not len(cuts):
        return _EMPTY.copy()
    if prof.recovery_end == "next_sample":
        return np.minimum(cuts + 1, n)
    ends = np.full(len(cuts), n, np.int64)
    ack_rows = np.flatnonzero(ack)
    if len(s.ack_us) and len(s.sent_us):
        # exact: the first ACK of a packet numbered above every packet sent up to the cut
        sent_order = np.argsort(s.sent_us, kind="stable")
        sent_t, sent_pn = s.sent_us[sent_order], np.maximum.accumulate(s.sent_pn[sent_order])
        k = np.searchsorted(sent_t, t[cuts], side="right")
        last_pn = np.where(k > 0, sent_pn[np.maximum(k - 1, 0)], -1)
        ack_order = np.argsort(s.ack_us, kind="stable")
        ack_t, ack_l = s.ack_us[ack_order], s.ack_largest[ack_order]
        for i, (tc, pn) in enumerate(zip(t[cuts].tolist(), last_pn.tolist())):
            j = np.searchsorted(ack_t, tc, side="left")
            hit = np.flatnonzero(ack_l[j:] > pn)
            if len(hit):
                k = j + int(hit[0])
                # the record that shows that ACK's processing: stacks log the packet before or after its
                # frames, so the last ACK record since the ACK before it, else the first after it
                before = ack_t[k - 1] if k > 0 else tc
                r = np.searchsorted(ack_rows, np.searchsorted(t, ack_t[k], side="right")) - 1
                if r >= 0 and t[ack_rows[r]] > max(before, tc) and ack_rows[r] > cuts[i]:
                    ends[i] = ack_rows[r]
                else:
                    r += 1
                    ends[i] = ack_rows[r] if r < len(ack_rows) else n
    else:
        # metrics only: the first ACK whose RTT sample was sent after the first send that followed the cut
        # (only records with a new RTT sample: a loss also lowers bytes in flight, with a stale RTT)
        send_rows = np.flatnonzero(sends)
        ack_rows = np.flatnonzero(rtt_sample)
        acked_sent_at = t - latest
        for i, c in enumerate(cuts.tolist()):
            j = np.searchsorted(send_rows, c, side="left")  # the cut's own record when it shows a send
            if j >= len(send_rows):
                continue
            first_send_t = t[send_rows[j]]
            r = np.searchsorted(ack_rows, send_rows[j], side="right")
            cand = ack_rows[r:]
            hit = np.flatnonzero(acked_sent_at[cand] >= first_send_t)
            if len(hit):
                ends[i] = cand[hit[0]]
    # a later cut or an undo ends an episode too
    nxt = np.append(cuts[1:], n)
    undo_rows = np.flatnonzero(undo)
    u = np.searchsorted(undo_rows, cuts, side="right")
    undo_end = np.where(u < len(undo_rows), undo_rows[np.minimum(u, len(undo_rows) - 1)] if len(undo_rows) else n, n)
    return np.minimum(np.minimum(ends, nxt), undo_end)


def _reno_steps(
    avoid: np.ndarray,
    limited: np.ndarray,
    grew: np.ndarray,
    acked: np.ndarray,
    prev_cwnd: np.ndarray,
    prior: np.ndarray,
    unit: np.ndarray,
    cut: np.ndarray,
    undo: np.ndarray,
    prof: Profile,
) -> np.ndarray:
    """Whether each Reno ACK that grew the window ended window-limited. Reno (quic-go's ``numAckedPackets``)
    counts the window-limited packets acknowledged in avoidance and adds a packet when the count reaches the
    window in packets, then counts anew; a cut resets it. Counting from one step to the next places the
    step inside its ACK: the packets after it were tested against the larger window (and, found
    application-limited, stop the count). Where the count does not fit the ACK (a step the metrics hid),
    ``limited`` stands. An undo puts back the count its cut reset (quic-go's ``OnSpuriousLoss`` restores
    ``numAckedPackets`` with the window); ``prev_cwnd`` and ``grew`` are then the restored window and the
    ACK's growth above it. A loop over the avoidance ACKs only."""
    out = limited.copy()
    count = saved = -1  # unknown until the first step or cut; the count the last cut reset
    rows = np.flatnonzero(avoid | cut | undo)
    for r in rows.tolist():
        if cut[r]:
            saved, count = count, 0
            continue
        if undo[r]:
            count = saved
        if not avoid[r]:
            continue
        if not limited[r]:
            continue  # tested application-limited before any packet counted
        a = int(acked[r])
        if grew[r] <= 0:
            if count >= 0:
                count += a
            continue
        need = int(prev_cwnd[r] // unit[r])
        if count < 0:
            count = 0  # the first step: packets counted since it
            continue
        at = min(max(need - count, 1), a)  # a count off by a packet the metrics hid: the nearest end
        after = a - at
        if after == 0:
            out[r] = True
            count = 0
            continue
        window = int(prev_cwnd[r] + grew[r])
        still = prior[r] >= window or window - prior[r] <= prof.burst_packets * int(unit[r])
        out[r] = still
        count = after if still else 0
    return out


_HYSTART_SAMPLES = 8
_HYSTART_LOW_WINDOW = 16


def _hystart_exit(
    s: MetricSeries,
    t: np.ndarray,
    ack: np.ndarray,
    latest: np.ndarray,
    prev_cwnd: np.ndarray,
    unit: np.ndarray,
    cut: np.ndarray,
) -> np.ndarray:
    """The ACK row at which Chromium's hybrid slow start (quic-go ``HybridSlowStart``) ends the first
    slow start, if it does before the first cut: empty otherwise. quic-go calls ``MaybeExitSlowStart`` at
    every ACK that newly acknowledges its largest packet, before the packets grow the window; a round
    starts at the first such call and ends at an ACK of a packet sent after it (here: the record's time
    less its RTT sample is later than the round's start). At the round's eighth sample the least of
    its first eight RTT samples is compared with the min RTT plus an eighth of it (clamped to 4-16 ms);
    once found, slow start ends at the first call with a window of 16 packets or more, and quic-go logs
    avoidance then (``slowStartThreshold = congestionWindow``), application-limited or not. A loop over
    the ACKs of the first slow start only."""
    first_cut = int(np.argmax(cut)) if cut.any() else len(t)
    min_rtt = _ffill(s.min_rtt_us, 0)
    rows = np.flatnonzero(ack[:first_cut] & (latest[:first_cut] > 0))
    started = found = False
    round_start = count = least = 0
    for r in rows.tolist():
        if not started:
            started, round_start, count, least = True, int(t[r]), 0, 0
        rtt = int(latest[r])
        if not found:
            count += 1
            if count <= _HYSTART_SAMPLES and (least == 0 or rtt < least):
                least = rtt
            if count == _HYSTART_SAMPLES and min_rtt[r] > 0:
                margin = min(max(int(min_rtt[r]) >> 3, 4000), 16000)
                found = least > int(min_rtt[r]) + margin
        if found and prev_cwnd[r] // unit[r] >= _HYSTART_LOW_WINDOW:
            return np.array([r], np.int64)
        if t[r] - rtt > round_start:  # this ACK acknowledged a packet sent after the round began
            started = False
    return _EMPTY.copy()


def _threshold_of_cuts(
    cwnd: np.ndarray, prev_cwnd: np.ndarray, cut: np.ndarray, rto: np.ndarray, undo: np.ndarray, flat: np.ndarray
) -> np.ndarray:
    """The slow-start threshold when the stack does not log it: unbounded until the first cut, the window
    after each cut (half the window before a collapse to the minimum), back to its value before the
    last cut when a spurious loss is undone, and the window at the first ``flat`` record (a window-limited
    ACK that did not grow the window: slow start left without a loss, HyStart) while below the
    threshold. A loop over the cuts and undos only."""
    n = len(cwnd)
    top = np.iinfo(np.int64).max
    at = np.full(n, NULL, np.int64)
    before = current = top  # the threshold the last cut replaced, and the one in force
    bounds = np.flatnonzero(cut | undo).tolist()
    flat_rows = np.flatnonzero(flat)
    for k, r in enumerate([0, *bounds]):
        if k:
            if undo[r] and not cut[r]:
                current, before = before, current
            else:
                before, current = current, int(prev_cwnd[r] // 2 if rto[r] else cwnd[r])
            at[r] = current
        end = bounds[k] if k < len(bounds) else n
        seg = flat_rows[np.searchsorted(flat_rows, r, side="right") : np.searchsorted(flat_rows, end)]
        # the threshold is the window the exit found, before this ACK's growth (quic-go's
        # MaybeExitSlowStart sets slowStartThreshold = congestionWindow before OnPacketAcked grows it)
        below = seg[prev_cwnd[seg] < current]
        if len(below):
            current = int(prev_cwnd[below[0]])
            at[below[0]] = current
    return _ffill(at, top)


def _pto_samples(s: MetricSeries, t: np.ndarray) -> np.ndarray:
    """Rows at which a probe timeout fired: timer events mapped onto the next record, and rises of
    ``pto_count``."""
    assert s.pto_count is not None
    rows = []
    if len(s.pto_us):
        at = np.searchsorted(t, np.sort(s.pto_us), side="left")
        rows.append(at[at < len(t)])
    pc = s.pto_count
    have = pc != NULL
    if have.any():
        v = _ffill(pc, 0)
        rise = np.zeros(len(t), bool)
        rise[1:] = v[1:] > v[:-1]
        rows.append(np.flatnonzero(rise & have))
    return np.unique(np.concatenate(rows)) if rows else _EMPTY.copy()


# ---- BBR-like senders ----------------------------------------------------------------------------

_STARTUP, _DRAIN, _PROBE_BW, _PROBE_RTT, _BBR_APP = range(5)


def _infer_bbr(s: MetricSeries, prof: Profile) -> Inferred:
    """Startup, Drain, ProbeBw and ProbeRtt from the pacing rate and the window, and ApplicationLimited
    from idle gaps (where the stack has that state). ProbeBw's phases are not read: they differ only in
    the gain on a bandwidth estimate that moves under them (measured on quiche's BBR2: docs/metric-states.md)."""
    n = len(s.t_us)
    t = s.t_us
    pacing = _ffill(s.pacing, 0).astype(np.float64)
    cwnd = _ffill(s.cwnd, 0)
    mss = _mss(s.inflight)
    code = np.full(n, _PROBE_BW, np.int8)
    # Startup: until the first fall of the pacing rate to under 0.45 of its running peak (Drain paces at
    # 1/2.885 of the estimate Startup paced at 2.885 times, about 0.12 of it; ProbeBw's lowest gain against
    # its highest is 0.75 / 1.25 = 0.6); with no such fall, until BBR's own full-bandwidth test on the rate
    # (no growth by 1.25x over three round trips of the smoothed RTT: quinn can reach full bandwidth in
    # ProbeRtt, whose exit goes straight to ProbeBw without a Drain to see)
    peak = np.maximum.accumulate(pacing)
    fall = np.flatnonzero((pacing > 0) & (pacing < 0.45 * peak))
    drain_at = int(fall[0]) if len(fall) else n
    srtt = _ffill(s.srtt_us, 0)
    paced = np.flatnonzero(pacing > 0)
    if len(paced) and drain_at == n:
        back = np.searchsorted(t, t - 3 * srtt, side="left")  # the first row within three rounds
        full = (srtt > 0) & (back > paced[0]) & (pacing < 1.25 * peak[np.maximum(back, 0)])
        flat = np.flatnonzero(full)
        plateau = int(flat[0]) if len(flat) else n
    else:
        plateau = n
    code[: min(drain_at, plateau)] = _STARTUP
    if drain_at < n and drain_at <= plateau:
        # Drain: until the rate comes back to the estimate (0.8 of peak / startup gain), or to twice the
        # rate Drain began with (its gain 1/2.885 against ProbeBw's >= 0.75) when the estimate fell meanwhile
        est = peak[drain_at] / 2.885
        back = np.flatnonzero(pacing[drain_at:] >= min(0.8 * est, 2 * pacing[drain_at]))
        code[drain_at : drain_at + int(back[0]) if len(back) else n] = _DRAIN
    # ProbeRtt: the window held at its floor (4 packets) after Startup, or at 0.75 or 0.5 of the
    # bandwidth-delay product at the pacing rate (ProbeRtt paces at gain 1; quinn's BBR holds 0.75 of it,
    # BBR2 0.5), which no other phase has: Startup's window and pacing gains are equal, ProbeBw's window gain
    # is 2, and a recovery window (quinn: in-flight plus acknowledged) follows no fixed share
    floor = 4 * mss + mss // 2
    min_rtt = _ffill(s.min_rtt_us, 0).astype(np.float64)
    bdp = pacing / 8 * min_rtt / 1e6
    ratio = np.where(bdp > 0, cwnd / np.maximum(bdp, 1), 0.0)
    under = (np.abs(ratio - 0.75) <= 0.03) | (np.abs(ratio - 0.5) <= 0.03)
    code[((cwnd > 0) & (cwnd <= floor) & (code != _STARTUP)) | under] = _PROBE_RTT
    why = [f"{INFERRED_TRIGGER}:pacing"] * n
    if prof.app_limited:
        idle = _bbr_app_limited(s, cwnd, mss)
        code[idle] = _BBR_APP
        for i in np.flatnonzero(idle).tolist():
            why[i] = f"{INFERRED_TRIGGER}:idle"
    times, states, reasons = _transitions(t, code, BBR_STATES, why, s.start_us)
    return Inferred(times, states, reasons, "bbr", code, mss)


def _bbr_app_limited(s: MetricSeries, cwnd: np.ndarray, mss: int) -> np.ndarray:
    """Rows a BBR sender is application-limited (quinn: the ACK found the last ``poll_transmit`` neither
    window- nor pacing-blocked; the state is decided per ACK and held until the next). From metrics: an
    ACK (bytes in flight fell) after no send for twice the longest pacing wait while a packet fitted in
    the window starts it (quinn's pacer releases bursts of at least 10 packets at 1.25 windows per
    smoothed RTT: it waits at most 8 packets' worth of that, and at least 1.6 ms); it ends at an ACK
    when the sends of the last 3 ms replaced at least 0.7 of the bytes acknowledged, or at a send that
    left less than two packets of the window free (the sender had data again)."""
    n = len(s.t_us)
    t = s.t_us
    have = s.inflight != NULL
    inflight = _ffill(s.inflight, 0)
    d = np.zeros(n, np.int64)
    d[1:] = np.diff(inflight)
    d[~have] = 0
    send, ack = d > 0, d < 0
    if not ack.any():
        return np.zeros(n, bool)
    srtt = _ffill(s.srtt_us, 0).astype(np.float64)
    room = cwnd - inflight
    wait = np.maximum(1600.0, 8 * mss * srtt / np.maximum(cwnd, 1))
    last_send = np.maximum.accumulate(np.where(send, np.arange(n), 0))
    sent = np.cumsum(np.where(send, d, 0))
    acked = np.cumsum(np.where(ack, -d, 0))
    before = np.searchsorted(t, t - 3000, side="right") - 1  # the last row before the 3 ms that end here
    sent_w = sent - np.where(before >= 0, sent[np.maximum(before, 0)], 0)
    acked_w = acked - np.where(before >= 0, acked[np.maximum(before, 0)], 0)
    idle = ack & (room >= mss) & (cwnd > 0) & (t - t[last_send] > 2 * wait)
    busy = (send & (room < 2 * mss)) | (ack & ~idle & (sent_w >= 0.7 * acked_w))
    event = np.where(idle, 1, np.where(busy, 2, 0))
    last = np.maximum.accumulate(np.where(event > 0, np.arange(n), -1))
    on = (last >= 0) & (event[np.maximum(last, 0)] == 1)
    # decided at ACKs only: every other row keeps the last ACK's decision
    at_ack = np.maximum.accumulate(np.where(ack, np.arange(n), -1))
    return (at_ack >= 0) & on[np.maximum(at_ack, 0)]


# ---- what a trace with inferred states carries ----------------------------------------------------

INFERRED_LABEL = {"states": "inferred from metrics"}
"""The label every trace with inferred states carries: it reaches the model's metadata, the diagram's
legend and the reports, so an inferred machine is never shown as a logged one."""
