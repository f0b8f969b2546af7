"""The metric-state reader (quicsm.traces.metric_states): states read from qlog metrics.

Held against the states real stacks logged in the same qlogs (quiche 0.30.0 Reno/Cubic/HyStart++,
quic-go v0.43.1 and v0.65.0, bundled), on hand-made series for each rule, and on odd metrics.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest

from quicsm.errors import ParseError
from quicsm.traces import parse_inputs
from quicsm.traces.events import EVENT_KINDS, Trace, TraceMeta
from quicsm.traces.metric_states import (
    INFERRED_LABEL,
    NULL,
    PROFILES,
    MetricSeries,
    infer,
    profile_for,
)
from quicsm.traces.qlog_columns import QlogBatcher
from quicsm.traces.report import ParseReport
from quicsm.traces.states import is_known_state
from tests.traces.qlog_oracle import read_sqlog
from tests.traces.test_qlog_oracle import SCANNERS

DATA = Path(__file__).resolve().parents[1] / "data"
WITH_STATES = [
    DATA / "qlog" / "quiche-0.30.0-reno" / "reno.sqlog.gz",
    DATA / "qlog" / "quiche-0.30.0-cubic" / "cubic.sqlog.gz",
    DATA / "qlog" / "quiche-0.30.0-cubic-hystart" / "cubic-hystart.sqlog.gz",
    DATA / "qlog" / "quic-go-v0.43.1" / "a11eded8097e732b38412c5badef84_server.qlog.gz",
    DATA / "qlog" / "quic-go-v0.43.1" / "d6c9ed65a23ccdba_server.qlog.gz",
    DATA / "quic-go-v0.65" / "server.sqlog.gz",
]
TIMEOUTS = frozenset({"ProbeTimeout", "RetransmissionTimeout"})


def _steps(t: Trace, drop: frozenset[str] = frozenset()) -> tuple[list[int], list[str]]:
    times, states = [], []
    for e in t.events:
        if e.kind != "transition" or e.state in drop or (states and states[-1] == e.state):
            continue
        times.append(e.t_us)
        states.append(e.state)
    return times, states


def _shares(times: list[int], states: list[str], start: int, end: int) -> dict[str, float]:
    edges = np.clip(np.append(times, end), start, end)
    out: dict[str, float] = {}
    for i, s in enumerate(states):
        out[s] = out.get(s, 0.0) + float(edges[i + 1] - edges[i]) / max(end - start, 1)
    return out


@pytest.mark.parametrize("path", WITH_STATES, ids=lambda p: p.parent.name + "/" + p.name[:12])
def test_states_read_from_metrics_match_the_states_the_stack_logged(path: Path) -> None:
    """Every state's share of time within 0.02 of the logged one; 85 % of the transitions found within
    2 ms; and the inferred trace says it is inferred."""
    (logged,) = parse_inputs([str(path)], states="logged").traces
    (inferred,) = parse_inputs([str(path)], states="metrics").traces
    assert inferred.labels["states"] == INFERRED_LABEL["states"] and "states" not in logged.labels
    lt, ls = _steps(logged)
    it, is_ = _steps(inferred, TIMEOUTS)  # qlogs log no timeout state
    start, end = logged.start_us, logged.end_us
    a, b = _shares(lt, ls, start, end), _shares(it, is_, start, end)
    assert len(ls) > 3 and set(b) - {"Init"} <= set(a) | {"ApplicationLimited"}
    for state in set(a) | set(b):
        assert abs(a.get(state, 0.0) - b.get(state, 0.0)) <= 0.02, (state, a, b)
    truth = [(t, x, y) for t, x, y in zip(lt[1:], ls, ls[1:])]
    found = sum(
        any(abs(t - u) <= 2000 and (x, y) == (p, q) for u, p, q in zip(it[1:], is_, is_[1:])) for t, x, y in truth
    )
    assert found >= 0.85 * len(truth), (found, len(truth))


def test_quiche_bbr2_phases_from_its_metrics() -> None:
    """quiche 0.30.0's BBR2 (bundled, states logged): Startup, Drain and ProbeBw read from the pacing rate
    at the times quiche logged them, with ProbeBw's phases as one state (a Startup plateau that precedes
    the Drain's fall must not hide the Drain)."""
    path = DATA / "qlog" / "quiche-0.30.0-bbr2_gcongestion" / "bbr2_gcongestion.sqlog.gz"
    (logged,) = parse_inputs([str(path)], states="logged").traces
    (inferred,) = parse_inputs([str(path)], states="metrics").traces
    lt, ls = _steps(logged)
    it, is_ = _steps(inferred)
    assert [s.split(".")[0] for s in ls] == is_ == ["Startup", "Drain", "ProbeBw"]
    assert all(abs(a - b) <= 2000 for a, b in zip(lt[1:], it[1:])), (lt, it)


def test_the_column_scanner_and_the_python_reader_infer_alike() -> None:
    """quic-go v0.65.0's JSON-SEQ qlog, states forced from metrics: the column reader's batch (C scanner
    and its Python twin, read whole and in windows) and the object reader kept as the oracle
    (tests/traces/qlog_oracle.py) give the same traces and report."""
    data = gzip.decompress((DATA / "quic-go-v0.65" / "server.sqlog.gz").read_bytes())
    meta = TraceMeta(states="metrics")
    report = ParseReport(keep=1 << 20)
    want = list(read_sqlog(io.BytesIO(data), "x.sqlog", meta, report))
    assert len(want) == 1 and want[0].labels["states"] == INFERRED_LABEL["states"]
    for scanner in SCANNERS:
        for window in (None, 4093):
            report2 = ParseReport(keep=1 << 20)
            b = QlogBatcher(report2, scanner=scanner, window=window)
            batches = (
                b.add(data, "x.sqlog", meta, "sqlog")
                if window is None
                else list(b.read(io.BytesIO(data), "x.sqlog", meta, "sqlog"))
            )
            got = [t for tc in batches + b.flush() for t in tc.traces()]
            assert got == want and report.to_json() == report2.to_json(), (scanner, window)


QUINN_BBR = DATA / "metric-only" / "quinn-0.11.19-bbr"


def _bbr_rows() -> list[dict[str, int]]:
    """A BBR-like series: the pacing rate grows 1.1x a record (Startup) for 20 records, no threshold."""
    return [
        {"t": 2_000 * (i + 1), "cwnd": 40 * MSS, "inflight": 10 * MSS, "pacing": int(1e6 * 1.1**i), "min_rtt": 20_000}
        for i in range(20)
    ]


def test_quinn_bbr_is_refused_with_the_reason_not_read_into_a_machine() -> None:
    """quinn-proto 0.11.19's BBR through the testbed (1 % loss): its qlog logs metrics and no state. Read
    from them, its phases were far from the accuracy goal (3 of 30 connections) held against the instrumented
    server's contract lines (experiments/metric_truth.md), so the reader refuses them and says why, under
    ``auto`` and ``metrics`` alike, rather than give a machine nobody measured; the contract lines of the
    same run still read, and quinn's loss-based senders are still read from their metrics."""
    for states in ("auto", "metrics"):
        got = parse_inputs([str(QUINN_BBR / "conn1_server.sqlog.gz")], states=states, require_transitions=False)
        assert got.traces == [], states
        (issue,) = got.report.issues
        assert issue.path.endswith("conn1_server.sqlog.gz") and "quinn's BBR phases are not read" in issue.reason
        assert "docs/metric-states.md" in issue.reason and got.report.issue_counts["states not read"] == 1
    with pytest.raises(ParseError, match="quinn's BBR phases are not read"):
        parse_inputs([str(QUINN_BBR / "conn1_server.sqlog.gz")], strict=True)
    (truth,) = parse_inputs([str(QUINN_BBR / "server.log.gz")]).traces
    assert truth.cc == "bbr" and {"Startup", "ProbeRtt"} <= {e.state for e in truth.events if e.kind == "transition"}
    # the profile refuses BBR-like series only: another stack's BBR is read, quinn's loss-based senders too
    bbr = _bbr_rows()
    assert infer(series(bbr), PROFILES["quinn"]).refused and not len(infer(series(bbr), PROFILES["quinn"]))
    assert infer(series(bbr), PROFILES["rfc9002"]).states[0] == "Startup"
    loss = infer(series(_slow_start_flight()), PROFILES["quinn"])
    assert loss.family == "loss" and not loss.refused and loss.states == ["SlowStart"]


METRIC_ONLY = [DATA / "quic-go-v0.65" / "server.sqlog.gz"]
"""Real qlogs read with states from metrics (quic-go's with its state events set aside; quinn's BBR,
the other metric-only fixture, is refused: test_quinn_bbr_is_refused_with_the_reason...)."""


@pytest.mark.parametrize("path", METRIC_ONLY, ids=lambda p: p.parent.name)
def test_the_metric_path_builds_no_object_per_event(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """States read from metrics run on the C scanner's columns (issue 35 item 4): reading a file into
    TraceColumns builds no TraceEvent (the object twin, ``infer_events``, is tests/traces/qlog_oracle.py's), yet the columns
    carry the inferred transitions and every metrics row's state."""
    from quicsm.traces import metric_states, qlog_scanner
    from quicsm.traces.events import TraceEvent

    if not qlog_scanner.available():
        pytest.skip("the C scanner quicsm.traces._scan is not built (python3 setup.py build_ext --inplace)")
    data = gzip.decompress(path.read_bytes())

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a Python object per event on the metric path")

    monkeypatch.setattr(TraceEvent, "__new__", refuse)
    monkeypatch.setattr(TraceEvent, "_make", refuse)
    b = QlogBatcher(ParseReport(), scanner=qlog_scanner.Scanner)
    batches = [*b.read(io.BytesIO(data), path.name, TraceMeta(states="metrics"), "sqlog"), *b.flush()]
    (tc,) = [tc for tc in batches if len(tc)]
    with pytest.raises(AssertionError, match="per event"):  # the guard holds: objects are refused
        list(tc.traces())
    monkeypatch.undo()
    names = tc.events.names
    rows = tc.order
    kinds = tc.events.kind[rows]
    transitions = [names[s] for s in tc.state[rows][kinds == EVENT_KINDS.index("transition")].tolist()]
    metrics_states = {names[s] for s in tc.state[rows][kinds == EVENT_KINDS.index("metrics")].tolist() if s >= 0}
    assert len(transitions) >= 5 and set(transitions) <= set(metric_states.LOSS_STATES + metric_states.BBR_STATES)
    assert metrics_states == set(transitions)
    (trace,) = tc.traces()  # the objects, built only now, are the oracle's
    assert trace.labels["states"] == INFERRED_LABEL["states"]


# ---- the rules, on hand-made series ---------------------------------------------------------------

MSS = 1200


def series(rows: list[dict[str, int]], **extra: object) -> MetricSeries:
    """Records of {t, cwnd, inflight, latest, ssthresh, packets, pto, pacing, min_rtt}; absent = NULL."""

    def col(key: str) -> np.ndarray:
        return np.array([r.get(key, NULL) for r in rows], np.int64)

    return MetricSeries(
        t_us=col("t"),
        cwnd=col("cwnd"),
        inflight=col("inflight"),
        ssthresh=col("ssthresh"),
        pacing=col("pacing"),
        srtt_us=col("srtt"),
        min_rtt_us=col("min_rtt"),
        latest_rtt_us=col("latest"),
        packets=col("packets"),
        pto_count=col("pto"),
        **extra,  # type: ignore[arg-type]
    )


def _flight(t0: int, cwnd: int, inflight: int, n: int, step: int = 100) -> list[dict[str, int]]:
    """n sends of one packet each."""
    return [{"t": t0 + i * step, "cwnd": cwnd, "inflight": inflight + (i + 1) * MSS} for i in range(n)]


def test_a_cut_is_recovery_until_a_packet_sent_after_it_is_acknowledged() -> None:
    """RFC 9002 7.3.2: recovery ends with the first ACK of a packet sent after the cut; an ACK whose RTT
    sample reaches back past that send (metrics only), or one naming a later packet number."""
    rtt = 40_000
    rows = _flight(0, 20 * MSS, 0, 20)  # fill the window
    rows.append({"t": 40_000, "cwnd": 21 * MSS, "inflight": 19 * MSS, "latest": rtt})  # slow start ACK
    rows.append({"t": 41_000, "cwnd": 10 * MSS, "inflight": 18 * MSS, "latest": rtt + 100})  # loss: cut
    rows += _flight(42_000, 10 * MSS, 18 * MSS, 1)  # first send after the cut, at 42 ms
    rows.append({"t": 60_000, "cwnd": 10 * MSS, "inflight": 17 * MSS, "latest": 45_000})  # acks a packet sent at 15 ms
    rows.append({"t": 83_000, "cwnd": 10 * MSS, "inflight": 10 * MSS, "latest": 40_500})  # sent at 42.5 ms: done
    rows.append({"t": 90_000, "cwnd": 10 * MSS, "inflight": 9 * MSS, "latest": 40_000})
    got = infer(series(rows), PROFILES["rfc9002"])
    assert got.states[:3] == ["SlowStart", "Recovery", "CongestionAvoidance"]
    assert list(got.t_us[1:3]) == [41_000, 83_000]
    # with packet numbers: sent 0..19 before the cut, 20 after it; the ACK of 20 at 70 ms ends it
    pn = dict(sent_us=np.array([*range(0, 2000, 100), 42_000], np.int64), sent_pn=np.arange(21, dtype=np.int64))
    acks = dict(ack_us=np.array([40_000, 60_000, 82_990], np.int64), ack_largest=np.array([1, 15, 20], np.int64))
    got = infer(series(rows, **pn, **acks), PROFILES["rfc9002"])
    assert got.states[:3] == ["SlowStart", "Recovery", "CongestionAvoidance"] and got.t_us[2] == 83_000


def test_application_limited_when_the_window_was_not_used() -> None:
    """An ACK after a flight that left most of the window unused is application-limited (quic-go's
    isCwndLimited: more than three packets free, and in slow start at most half the window in flight)."""
    rows = _flight(0, 32 * MSS, 0, 4)  # 4 packets of a 32-packet window
    rows.append({"t": 40_000, "cwnd": 32 * MSS, "inflight": 2 * MSS, "latest": 40_000})
    rows += _flight(41_000, 32 * MSS, 2 * MSS, 30)
    rows.append({"t": 81_000, "cwnd": 33 * MSS, "inflight": 31 * MSS, "latest": 40_000 + 1})
    got = infer(series(rows), PROFILES["quic-go"])
    assert got.states == ["SlowStart", "ApplicationLimited", "SlowStart"]


def test_collapse_to_the_minimum_window_and_probe_timeouts() -> None:
    rows = _flight(0, 20 * MSS, 0, 20)
    rows.append({"t": 300_000, "cwnd": 2 * MSS, "inflight": 0, "pto": 0})  # persistent congestion
    rows += _flight(301_000, 2 * MSS, 0, 2)
    rows.append({"t": 340_000, "cwnd": 3 * MSS, "inflight": MSS, "latest": 39_000})
    rows.append({"t": 700_000, "cwnd": 3 * MSS, "inflight": MSS, "pto": 1})  # PTO fired
    rows.append({"t": 740_000, "cwnd": 4 * MSS, "inflight": 0, "latest": 40_000, "pto": 0})
    got = infer(series(rows), PROFILES["rfc9002"])
    assert "RetransmissionTimeout" in got.states and "ProbeTimeout" in got.states
    i = got.states.index("ProbeTimeout")
    assert got.t_us[i] == 700_000 and got.t_us[i + 1] == 740_000
    assert got.reasons[got.states.index("RetransmissionTimeout")] == "inferred:persistent_congestion"


def _slow_start_flight() -> list[dict[str, int]]:
    """A window of 20 packets sent, then an ACK in slow start."""
    rows = _flight(0, 20 * MSS, 0, 20)
    rows.append({"t": 40_000, "cwnd": 21 * MSS, "inflight": 19 * MSS, "latest": 40_000, "packets": 19})
    return rows


def _hidden_loss() -> dict[str, np.ndarray]:
    """quic-go's loss timer fires at 45 ms, declares a loss at 45.1 ms, found spurious at 59 ms."""
    return dict(
        timer_us=np.array([45_000], np.int64),
        lost_us=np.array([45_100], np.int64),
        spurious_us=np.array([59_000], np.int64),
    )


def test_an_undone_cut_ends_recovery_and_restores_slow_start() -> None:
    """quic-go v0.65 undoes a cut after a spurious loss: the window comes back in one step."""
    rows = _slow_start_flight()
    rows.append({"t": 41_000, "cwnd": 10 * MSS, "inflight": 18 * MSS, "latest": 40_100, "packets": 18})
    rows.append({"t": 45_000, "cwnd": 21 * MSS, "inflight": 17 * MSS, "latest": 40_200, "packets": 17})  # undo
    rows.append({"t": 46_000, "cwnd": 22 * MSS, "inflight": 16 * MSS, "latest": 40_300, "packets": 16})
    got = infer(series(rows), PROFILES["quic-go"])
    assert got.states == ["SlowStart", "Recovery", "SlowStart"], got.states
    assert got.reasons[2] == "inferred:spurious_loss"


def test_bbr_phases_from_the_pacing_rate() -> None:
    """Startup (rate growing), Drain (a fall), ProbeBw (gains 1.25 / 0.75 / 1 around the estimate: one
    state) and ProbeRtt (the window at four packets); and a Drain whose estimate fell meanwhile ends when
    the rate doubles."""

    def rec(t: int, rate: float, cwnd: int = 0) -> dict[str, int]:
        cwnd = cwnd or max(40 * MSS, int(2 * rate / 8 * 0.02))  # a window gain of 2 on the 20 ms BDP
        return {"t": t, "cwnd": cwnd, "inflight": 10 * MSS, "pacing": int(rate), "min_rtt": 20_000, "srtt": 20_000}

    rows, t, rate = [], 0, 1_000_000.0
    for _ in range(40):  # startup: x1.1 a record
        rate *= 1.1
        t += 2_000
        rows.append(rec(t, rate))
    bw = rate / 2.885
    for _ in range(10):  # drain
        t += 2_000
        rows.append(rec(t, bw / 2.885))
    drained = t + 4_000
    for _cycle in range(6):  # ProbeBw: 1.25, 0.75, then 1 six times, a round of 20 ms each, 5 records a round
        for gain in (1.25, 0.75, 1, 1, 1, 1, 1, 1):
            for _ in range(5):
                t += 4_000
                rows.append(rec(t, bw * gain))
    probe_rtt = t + 20_000
    for _ in range(10):  # ProbeRtt
        t += 20_000
        rows.append(rec(t, bw, 4 * MSS))
    got = infer(series(rows), PROFILES["rfc9002"])
    assert got.family == "bbr"
    assert got.states == ["Startup", "Drain", "ProbeBw", "ProbeRtt"]
    assert list(got.t_us[1:]) == [82_000, drained, probe_rtt]
    # the estimate halves during Drain: ProbeBw at twice Drain's rate
    low = [*rows[:45], *[rec(100_000 + i * 4_000, bw / 2.885 * 2.2) for i in range(30)]]
    assert infer(series(low)).states == ["Startup", "Drain", "ProbeBw"]
    # quinn's BBR: ProbeRtt straight from Startup (its min-RTT clock starts expired), the window at 0.75 of
    # the bandwidth-delay product at the pacing rate rather than four packets; then ProbeBw
    quinn = [*rows[:20], *[rec(rows[19]["t"] + (i + 1) * 20_000, rate, int(0.75 * rate / 8 * 0.02)) for i in range(10)]]
    quinn += [rec(quinn[-1]["t"] + (i + 1) * 4_000, rate / 2.885) for i in range(10)]
    assert infer(series(quinn)).states[:2] == ["Startup", "ProbeRtt"]


def test_bbr_application_limited_from_an_idle_gap() -> None:
    """quinn's BBR is ApplicationLimited at an ACK that found its sender neither window- nor pacing-blocked:
    ACKs with no send for twice the longest pacing wait (here 8 packets at 1.25 windows per 20 ms RTT: 4 ms)
    while the window had room start it; sends that fill the window again end it, at the next ACK. A stack
    without that state (quiche) keeps the BBR mode."""
    cwnd, rate = 40 * MSS, 2 * 40 * MSS * 8 / 0.02 / 2

    def rec(t: int, inflight: int, pacing: float = rate) -> dict[str, int]:
        window = max(cwnd, int(pacing / 8 * 0.02))  # Startup: window and pacing gains alike
        return {"t": t, "cwnd": window, "inflight": inflight, "pacing": int(pacing), "min_rtt": 20_000, "srtt": 20_000}

    rows, t = [], 0
    for i in range(12):  # Startup then Drain, nothing acknowledged yet
        t += 1_000
        rows.append(rec(t, 10 * MSS, rate * 1.1**i if i < 8 else rate / 2.885))
    busy_until = t + 20_000
    while t < busy_until:  # ProbeBw, window-limited: each ACK of two packets is answered at once
        rows += [rec(t + 1_000, 37 * MSS), rec(t + 1_010, 38 * MSS), rec(t + 1_020, 39 * MSS)]
        t += 1_000
    inflight = 39 * MSS
    for _ in range(15):  # the data ran out: ACKs, no sends
        t += 1_000
        inflight -= 2 * MSS
        rows.append(rec(t, inflight))
    rows += [rec(t + 50 + 10 * i, inflight + i * MSS) for i in range(1, 39 - inflight // MSS + 1)]  # new data
    t += 1_000
    rows.append(rec(t, 37 * MSS))
    got = infer(series(rows), PROFILES["rfc9002"])  # (quinn's own BBR, for which it was made, is refused)
    assert got.states[-3:] == ["ProbeBw", "ApplicationLimited", "ProbeBw"], got.states
    # the last send at busy_until + 20 us, ACKs every ms: the first more than 8 ms after it
    assert got.t_us[-2] == busy_until + 9_000
    assert got.reasons[-2] == "inferred:idle"
    assert "ApplicationLimited" not in infer(series(rows), PROFILES["quiche"]).states


def test_profiles_by_implementation() -> None:
    assert profile_for("quic-go").name == "quic-go" and profile_for("quiche").name == "quiche"
    assert profile_for("aioquic").name == "aioquic" and profile_for(None).name == "rfc9002"
    assert profile_for("some stack").name == "rfc9002"


# ---- odd metrics ----------------------------------------------------------------------------------


ODD = {
    "empty": [],
    "one record": [{"t": 5, "cwnd": 12000, "inflight": 0}],
    "no window at all": [{"t": i, "inflight": i * 100} for i in range(20)],
    "window once": [{"t": 0, "cwnd": 12000}] + [{"t": i, "inflight": (i % 5) * 1200} for i in range(1, 30)],
    "zeros": [{"t": i, "cwnd": 0, "inflight": 0, "latest": 0} for i in range(30)],
    "counters reset": [
        {"t": i, "cwnd": (i % 7) * 5000, "inflight": (i % 3) * 9000, "packets": i % 4} for i in range(60)
    ],
    "same time": [{"t": 7, "cwnd": 10000 + i, "inflight": i * 50, "latest": 1000 + i} for i in range(40)],
    "backwards": [{"t": 1000 - i * 10, "cwnd": 20000 - i * 100, "inflight": i * 100} for i in range(40)],
    "huge": [{"t": i, "cwnd": 2**62 - i, "inflight": 2**61, "ssthresh": 2**62, "latest": 2**50} for i in range(20)],
    "pacing only": [{"t": i * 1000, "pacing": (i * 7919) % 1000 + 1} for i in range(50)],
    "pacing and a tiny window": [
        {"t": i * 1000, "pacing": 10**6 * (1 + i % 3), "cwnd": 100, "inflight": 50} for i in range(50)
    ],
}


@pytest.mark.parametrize("name", sorted(ODD))
def test_odd_metrics_give_states_or_none_never_an_error(name: str) -> None:
    s = series(ODD[name], lost_us=np.array([3, 9], np.int64), timer_us=np.array([2], np.int64))
    for prof in PROFILES.values():
        got = infer(s, prof)
        assert len(got.t_us) == len(got.states) == len(got.reasons)
        assert list(got.t_us) == sorted(got.t_us)
        assert all(is_known_state(x) for x in got.states)
        assert len(got.sample_state) == len(s.t_us) or (got.refused and not got.states and not len(got.sample_state))
    if not ODD[name]:
        assert not infer(s).states


def test_a_metric_only_qlog_with_odd_fields_is_read_not_refused(tmp_path: Path) -> None:
    """Strings, negatives, NaN-like and missing fields in metrics records: the fields are reported and
    dropped as for any qlog, and the rest still gives inferred states (microsecond time units too)."""
    recs = [
        {"qlog_version": "0.3", "trace": {"configuration": {"time_units": "us"}, "vantage_point": {"name": "aioquic"}}}
    ]
    for i in range(200):
        data: dict[str, object] = {"cwnd": 12000 + 1200 * (i // 2), "bytes_in_flight": (i % 10) * 1200}
        if i % 2:
            data["latest_rtt"] = 40_000 + i
        if i == 50:
            data["cwnd"] = "lots"
        if i == 60:
            data["bytes_in_flight"] = -5
        if i == 120:
            data["cwnd"] = 6000
            data["ssthresh"] = 6000
        recs.append({"time": i * 1000, "name": "recovery:metrics_updated", "data": data})
        if i == 119:
            recs.append(
                {"time": i * 1000 + 500, "name": "recovery:packet_lost", "data": {"header": {"packet_number": i}}}
            )
    path = tmp_path / "odd.sqlog"
    path.write_bytes(b"".join(b"\x1e" + json.dumps(r).encode() + b"\n" for r in recs))
    res = parse_inputs([str(path)])
    (t,) = res.traces
    assert t.labels["states"] == INFERRED_LABEL["states"]
    assert "Recovery" in t.states() and t.states()[0] == "SlowStart"  # Init is the start marker, no state
    reasons = " ".join(i.reason for i in res.report.issues)
    assert "cwnd is str" in reasons and "negative" in reasons


def test_compare_says_which_sets_have_inferred_states() -> None:
    """aioquic (metrics only) against quic-go (logged states): a warning names the inferred set, and the
    JSON's set record counts its inferred connections; the logged set has neither."""
    from conftest import shared_file

    import quicsm
    from quicsm.compare.report import to_json

    aioquic = shared_file("reference/qlog-samples/aioquic/server-success.qlog")
    sets = quicsm.build_sets([str(aioquic), str(DATA / "qlog" / "quic-go-v0.43.1")])
    result = quicsm.compare_sets(sets, quicsm.CompareOptions(resamples=0))
    said = [w for w in result.warnings if "inferred from qlog metrics" in w]
    assert len(said) == 1 and sets[0].name in said[0]
    records = to_json(result)["sets"]
    assert records[0]["states_inferred"] == 1 and "states_inferred" not in records[1]


def test_rtts_written_in_seconds_are_recognised() -> None:
    """quinn-proto 0.11.14 writes latest_rtt in seconds (0.044 for 44 ms): read as ms they are 1000x too
    small, which the time the first sample took to come gives away; a loopback RTT is left as it is."""
    from quicsm.traces.metric_states import _rtt_in_seconds

    def one(start: int, t: int, rtt: int) -> MetricSeries:
        return series(
            [{"t": start, "cwnd": 12000}, {"t": t, "cwnd": 12000, "latest": rtt, "srtt": rtt}], start_us=start
        )

    fixed = _rtt_in_seconds(one(20_000, 66_000, 44))  # 0.044 "ms" 46 ms after the first event
    assert fixed.latest_rtt_us is not None and list(fixed.latest_rtt_us) == [NULL, 44_000]
    assert list(fixed.srtt_us) == [NULL, 44_000]
    for start, t, rtt in ((74, 1_654, 586), (0, 45_000, 40_000), (0, 5_000_000, 2_000)):
        kept = _rtt_in_seconds(one(start, t, rtt))
        assert kept.latest_rtt_us is not None and list(kept.latest_rtt_us) == [NULL, rtt]


def test_a_recovery_cut_and_undone_between_two_records_is_read_from_the_loss_events() -> None:
    """quic-go v0.65: the loss timer declares a loss (cut at once, no metrics written), and a late ACK
    finds it spurious (undo) before the next metrics record: Recovery from the loss to the undo."""
    rows = _slow_start_flight()
    rows.append({"t": 60_000, "cwnd": 22 * MSS, "inflight": 18 * MSS, "latest": 40_100, "packets": 18})
    events = _hidden_loss()
    got = infer(series(rows, **events), PROFILES["quic-go"])
    assert got.states == ["SlowStart", "Recovery", "SlowStart"], got.states
    assert list(got.t_us[1:]) == [45_100, 59_000] and got.reasons[2] == "inferred:spurious_loss"
    # a loss the records show as a cut is read from the records, not twice
    shown = [*rows[:-1], {"t": 50_000, "cwnd": 10 * MSS, "inflight": 17 * MSS, "latest": 40_050, "packets": 17}]
    assert infer(series(shown, **events), PROFILES["quic-go"]).states.count("Recovery") == 1
    # application-limited before it: the undo logs slow start or avoidance by the window it restores
    # (OnSpuriousLoss), not application-limited, which only the next ACK's packets can set again
    idle = [*_flight(0, 20 * MSS, 0, 4), {"t": 40_000, "cwnd": 20 * MSS, "inflight": 3 * MSS, "latest": 40_000}]
    idle.append({"t": 60_000, "cwnd": 20 * MSS, "inflight": 4 * MSS})  # a send after the undo
    got = infer(series(idle, **events), PROFILES["quic-go"])
    assert got.states == ["SlowStart", "ApplicationLimited", "Recovery", "SlowStart"], got.states
    assert got.t_us[-1] == 59_000


def test_the_window_unit_follows_path_mtu_discovery() -> None:
    """quic-go raises its datagram size mid-connection (1,280 -> 1,366): the unit is the size seen on two
    sends in a row, never lowered; a single larger send (an MTU probe) or a short packet does not count."""
    from quicsm.traces.metric_states import _datagram_sizes

    sizes = [1280] * 5 + [1452] + [1280] * 3 + [1366] * 4 + [700] + [1366] * 2
    inflight = np.cumsum([0, *sizes]).astype(np.int64)
    got = _datagram_sizes(inflight, 1200)
    assert list(got[:3]) == [1200, 1200, 1280]
    assert 1452 not in got and 700 not in got.tolist()[10:]
    assert got[-1] == 1366 and np.all(np.diff(got) >= 0)


class _Sender:
    """A quic-go Reno sender's metrics records in avoidance: sends and ACKs of whole packets."""

    def __init__(self, cwnd: int, inflight: int) -> None:
        self.t, self.cwnd, self.inflight, self.rtt = 0, cwnd, inflight, 40_000
        self.rows: list[dict[str, int]] = []
        self._record()

    def _record(self) -> None:
        pk = self.inflight // MSS
        self.rows.append(
            {"t": self.t, "cwnd": self.cwnd, "inflight": self.inflight, "packets": pk, "ssthresh": 4 * MSS}
        )
        self.rows[-1]["latest"] = self.rtt

    def send(self, k: int) -> None:
        for _ in range(k):
            self.t += 100
            self.inflight += MSS
            self._record()

    def ack(self, k: int, grow: bool = False) -> None:
        self.t += 5_000
        self.rtt += 1
        self.inflight -= k * MSS
        self.cwnd += MSS if grow else 0
        self._record()


def test_reno_steps_are_placed_inside_their_ack_by_counting_packets() -> None:
    """quic-go's Reno adds a packet when the packets acknowledged since its last step reach the window in
    packets, testing each packet against the bytes in flight before the ACK: the packets after the step
    see one more packet free. Counting places the step: 3 of 4 packets before it -> the last found the
    window unused (ApplicationLimited); the step at the ACK's last packet -> still avoidance."""

    def run(last_ack: int) -> list[str]:
        s = _Sender(10 * MSS, 7 * MSS)  # three packets free: window-limited (quic-go's maxBurstPackets)
        s.ack(2, grow=True)  # a first step: counting starts after it (window now 11 packets)
        s.send(3)
        for k in (2, 3, 3):  # 8 packets counted
            s.ack(k)
            s.send(k)
        s.ack(last_ack, grow=True)  # the 11th packet is the step
        return infer(series(s.rows), PROFILES["quic-go"]).states

    assert run(4)[-1] == "ApplicationLimited"
    assert run(3)[-1] == "CongestionAvoidance"


def test_a_fall_of_bytes_in_flight_that_losses_explain_is_no_ack() -> None:
    """A loss the loss timer declared and a late ACK undid, both between two records: the next record
    shows bytes in flight one packet lower with no new RTT sample. That is the lost packet leaving, not
    an ACK that failed to grow the window (which would mean slow start had ended)."""
    rows = _slow_start_flight()
    rows += [{**r, "packets": r["inflight"] // MSS} for r in _flight(40_100, 21 * MSS, 19 * MSS, 2)]
    rows.append({"t": 60_000, "cwnd": 21 * MSS, "inflight": 20 * MSS, "latest": 40_000, "packets": 20})
    rows.append({"t": 61_000, "cwnd": 23 * MSS, "inflight": 18 * MSS, "latest": 40_100, "packets": 18})
    events = _hidden_loss()
    got = infer(series(rows, **events), PROFILES["quic-go"])
    assert got.states == ["SlowStart", "Recovery", "SlowStart"], got.states
    # without the loss event the same fall reads as an ACK that left slow start
    assert "CongestionAvoidance" in infer(series(rows), PROFILES["quic-go"]).states


def test_an_ack_that_grew_the_window_yet_ends_application_limited_shows_the_visit() -> None:
    """Application-limited before and after one ACK that grew the window: its first packets found the
    window used (avoidance: growth), a later one did not. quic-go logs both changes; the reader gives
    the visit 1 us before the record."""
    s = _Sender(20 * MSS, 10 * MSS)  # ten packets free: application-limited
    s.ack(2)
    s.send(2)
    s.ack(1)
    s.send(1)
    s.ack(2)
    s.rows[-1]["cwnd"] += 300  # Cubic-like growth inside an ACK that ends application-limited
    got = infer(series(s.rows), PROFILES["quic-go"])
    t_last = s.rows[-1]["t"]
    assert got.states[-3:] == ["ApplicationLimited", "CongestionAvoidance", "ApplicationLimited"], got.states
    assert list(got.t_us[-2:]) == [t_last - 1, t_last]


def test_heavy_reordering_a_cut_the_loss_timer_made_and_its_undo() -> None:
    """quic-go v0.65 under reordering by tens of packets (20 ms jitter): the loss timer declares a loss at
    45.1 ms and cuts at once, but with a small window no record comes until an ACK at 65 ms, which also
    shows a later loss; the cut is dated at the first timer-declared loss. The window then comes back to
    where it was before the cut, right after spurious_loss events, in a record that acknowledged as many
    packets as slow start could have grown by: that is the undo (the state set by the restored window:
    avoidance, as the threshold was left at the window by an earlier cut), and its ACK's packets finding
    the window unused make it application-limited after a visit to avoidance."""
    rows = [{**r, "packets": r["inflight"] // MSS} for r in _flight(0, 10 * MSS, 0, 8)]
    rows.append({"t": 10_000, "cwnd": 7 * MSS, "inflight": 7 * MSS, "latest": 40_000, "packets": 7})  # a cut
    rows.append({"t": 12_000, "cwnd": 7 * MSS, "inflight": 8 * MSS, "packets": 8})
    rows.append({"t": 30_000, "cwnd": 7 * MSS, "inflight": 6 * MSS, "latest": 15_000, "packets": 6})  # its end
    rows.append({"t": 65_000, "cwnd": 5 * MSS, "inflight": 3 * MSS, "latest": 40_500, "packets": 3})  # the cut shows
    rows.append({"t": 90_000, "cwnd": 7 * MSS, "inflight": 1 * MSS, "latest": 40_600, "packets": 1})  # undo
    events = dict(
        timer_us=np.array([45_000], np.int64),
        lost_us=np.array([45_100, 64_000], np.int64),
        spurious_us=np.array([89_000], np.int64),
    )
    got = infer(series(rows, **events), PROFILES["quic-go"])
    assert got.states[:3] == ["SlowStart", "Recovery", "CongestionAvoidance"], got.states
    i = 3
    assert got.states[i] == "Recovery" and got.t_us[i] == 45_100, (got.states, list(got.t_us))
    assert got.states[i + 1 :] == ["CongestionAvoidance", "ApplicationLimited"], got.states
    assert list(got.t_us[i + 1 :]) == [89_999, 90_000] and got.reasons[i + 1] == "inferred:ack"


def _cut_before_an_undo() -> tuple[list[dict[str, int]], dict[str, np.ndarray]]:
    """quic-go under reordering: a cut and its end, then a second cut (7 -> 5 packets) whose losses are
    found spurious at 89 ms; the undo's record is the caller's."""
    rows = [{**r, "packets": r["inflight"] // MSS} for r in _flight(0, 10 * MSS, 0, 8)]
    rows.append({"t": 10_000, "cwnd": 7 * MSS, "inflight": 7 * MSS, "latest": 40_000, "packets": 7})  # a cut
    rows.append({"t": 12_000, "cwnd": 7 * MSS, "inflight": 8 * MSS, "packets": 8})
    rows.append({"t": 30_000, "cwnd": 7 * MSS, "inflight": 6 * MSS, "latest": 15_000, "packets": 6})  # its end
    rows.append({"t": 65_000, "cwnd": 5 * MSS, "inflight": 3 * MSS, "latest": 40_500, "packets": 3})  # a cut
    events = dict(
        timer_us=np.array([45_000], np.int64),
        lost_us=np.array([45_100, 64_000], np.int64),
        spurious_us=np.array([89_000], np.int64),
    )
    return rows, events


def test_an_undo_at_an_ack_that_acknowledged_nothing_keeps_the_restored_state() -> None:
    """Under reordering the late packets were already declared lost, so the ACK that finds the loss
    spurious acknowledges no outstanding packet: quic-go restores the window (OnSpuriousLoss), logs
    avoidance by it and returns before any packet's application-limited test (sent_packet_handler's
    ``len(ackedPackets) == 0``). The same undo with packets acknowledged ends application-limited."""
    rows, events = _cut_before_an_undo()
    # the undo's record: no new RTT sample, nothing left bytes in flight
    nothing = {"t": 90_000, "cwnd": 7 * MSS, "inflight": 3 * MSS, "latest": 40_500, "packets": 3}
    got = infer(series([*rows, nothing], **events), PROFILES["quic-go"])
    assert got.states[-2:] == ["Recovery", "CongestionAvoidance"], got.states
    assert got.t_us[-1] == 90_000 and got.reasons[-1] == "inferred:spurious_loss"
    acked = {**nothing, "inflight": 1 * MSS, "latest": 40_600, "packets": 1}
    got = infer(series([*rows, acked], **events), PROFILES["quic-go"])
    assert got.states[-3:] == ["Recovery", "CongestionAvoidance", "ApplicationLimited"], got.states


def _hystart_rows(rtt: int) -> list[dict[str, int]]:
    """Slow start, application-limited (four packets in flight of a 20-packet window), ten ACKs of one
    packet each with RTT samples of about ``rtt`` against a min RTT of 40 ms, each followed by a send."""
    rows = _flight(0, 20 * MSS, 0, 4)
    for i in range(10):
        t = 40_000 + 1000 * i
        rows.append({"t": t, "cwnd": 20 * MSS, "inflight": 3 * MSS, "latest": rtt + i, "min_rtt": 40_000})
        rows.append({"t": t + 100, "cwnd": 20 * MSS, "inflight": 4 * MSS})
    return rows


def test_hybrid_slow_start_exits_on_rtt_samples_even_when_application_limited() -> None:
    """quic-go's HybridSlowStart (Chromium's): at the eighth RTT sample of a round, the least of its
    first eight samples above the min RTT by more than an eighth (here 5 ms) ends slow start with a
    window of 16 packets or more, whether or not the sender used its window; quic-go logs avoidance at
    once and the ACK's packets then find the window unused. The threshold is the window before the
    ACK, so the next window-limited ACK is avoidance."""
    rows = _hystart_rows(50_000)
    eighth = rows[4 + 2 * 7]["t"]
    got = infer(series(rows), PROFILES["quic-go"])
    assert got.states == ["SlowStart", "ApplicationLimited", "CongestionAvoidance", "ApplicationLimited"], got.states
    assert list(got.t_us[2:]) == [eighth - 1, eighth]
    # RTT samples within the margin (44 ms < 40 + 5 ms): slow start goes on
    got = infer(series(_hystart_rows(44_000)), PROFILES["quic-go"])
    assert got.states == ["SlowStart", "ApplicationLimited"], got.states
    # a stack without Chromium's hybrid slow start (RFC 9002 profile) reads no exit from RTTs
    assert "CongestionAvoidance" not in infer(series(_hystart_rows(50_000)), PROFILES["rfc9002"]).states


def test_an_undo_whose_ack_also_grew_the_restored_window_is_read_as_the_undo() -> None:
    """quic-go's ReceivedAck calls OnSpuriousLoss (the window back to its value before the cut) before
    OnPacketAcked, so the ACK's packets can grow the restored window before the record shows it: a
    record a packet above the window before the cut, right after spurious_loss events, is still the
    undo, and its packets are tested against the restored window (here four packets free: unused)."""
    rows, events = _cut_before_an_undo()
    undo = {"t": 90_000, "cwnd": 8 * MSS, "inflight": 1 * MSS, "latest": 40_600, "packets": 1}  # 7 back, +1
    got = infer(series([*rows, undo], **events), PROFILES["quic-go"])
    assert got.states[-3:] == ["Recovery", "CongestionAvoidance", "ApplicationLimited"], got.states
    assert list(got.t_us[-2:]) == [89_999, 90_000]
    # a packet short of the window before the cut: growth in recovery, not the undo
    short = {**undo, "cwnd": 6 * MSS}
    assert infer(series([*rows, short], **events), PROFILES["quic-go"]).states[-1] == "Recovery"


def test_the_application_limited_test_reads_bytes_in_flight_after_the_loss_timers_losses() -> None:
    """quic-go's priorInFlight is bytes in flight as the ACK arrives; packets its loss timer declared lost
    since the record before left it then, unrecorded (OnLossDetectionTimeout writes no metrics). A full
    20-packet window, five packets declared lost by the timer (a recovery cut and undone before any
    record), then an ACK of one packet: 15 packets were in flight before it, five free: unused. Losses
    that leave room for a packet in the window in force (0.7 of it after a cut) were refilled unseen
    (a send that brings bytes in flight back to the value last written writes no record): not counted."""
    rows = [{**r, "packets": r["inflight"] // MSS, "ssthresh": 4 * MSS} for r in _flight(0, 20 * MSS, 0, 20)]
    rows.append({"t": 40_000, "cwnd": 20 * MSS, "inflight": 19 * MSS, "latest": 40_000, "packets": 19})
    rows.append({"t": 40_100, "cwnd": 20 * MSS, "inflight": 20 * MSS, "packets": 20})

    def read(lost: int) -> list[str]:
        events = dict(
            timer_us=np.array([45_000], np.int64),
            lost_us=45_100 + 100 * np.arange(lost, dtype=np.int64),
            spurious_us=np.array([59_000], np.int64),
        )
        ack = {"t": 60_000, "cwnd": 20 * MSS, "inflight": (19 - lost) * MSS, "latest": 40_100, "packets": 19 - lost}
        return infer(series([*rows, ack], **events), PROFILES["quic-go"]).states

    assert read(5)[-3:] == ["Recovery", "CongestionAvoidance", "ApplicationLimited"], read(5)
    assert read(2)[-2:] == ["Recovery", "CongestionAvoidance"], read(2)  # three free: window-limited
    assert read(7)[-2:] == ["Recovery", "CongestionAvoidance"], read(7)  # 13 < 14: refilled unseen
