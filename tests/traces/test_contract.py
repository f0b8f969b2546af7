from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quicsm.traces.contract import ContractError, format_line, parse_line, parse_payload
from quicsm.traces.events import SSTHRESH_INF
from quicsm.traces.states import CUBIC_STATES, canonical_state


def test_round_trip_all_fields() -> None:
    line = format_line(
        conn="0xabc",
        t_us=42,
        cc="bbr",
        frm="Startup",
        to="Drain",
        cwnd=1,
        inflight=2,
        ssthresh=SSTHRESH_INF,
        pacing_bps=3,
        bw_bps=4,
        min_rtt_us=5,
        srtt_us=6,
        recovery="Growth",
        trigger="full_bw",
        cycle=3,
    )
    assert "ssthresh=inf" in line
    rec = parse_line("garbage prefix " + line)
    assert rec is not None
    ev = rec.event
    assert (rec.conn, rec.cc, ev.t_us, ev.prev, ev.state) == ("0xabc", "bbr", 42, "Startup", "Drain")
    assert (ev.cwnd, ev.inflight, ev.ssthresh, ev.pacing_bps, ev.bw_bps, ev.min_rtt_us, ev.srtt_us) == (
        1,
        2,
        SSTHRESH_INF,
        3,
        4,
        5,
        6,
    )
    assert ev.recovery == "Growth" and ev.trigger == "full_bw"
    assert ev.extra == (("cycle", "3"),)


def test_fields_in_any_order_and_unknown_kept() -> None:
    rec = parse_payload("to=Recovery cc=cubic t_us=7 conn=k v=1 from=- future_field=x")
    assert rec.event.state == "Recovery" and rec.event.prev is None
    assert rec.event.extra == (("future_field", "x"),)


def test_fast_and_general_paths_agree() -> None:
    line = format_line(
        conn="c", t_us=9, cc="cubic", frm="SlowStart", to="CongestionAvoidance", cwnd=5, trigger="hystart"
    )
    fast = parse_line(line)
    shuffled = "QUICSM " + " ".join(reversed(line.split()[1:]))
    general = parse_line(shuffled)
    assert fast == general


@pytest.mark.parametrize(
    "payload, reason",
    [
        ("v=2 conn=a t_us=1 cc=cubic to=SlowStart", "version"),
        ("conn=a t_us=1 cc=cubic to=SlowStart", "no format version"),
        ("v=1 t_us=1 cc=cubic to=SlowStart", "connection key"),
        ("v=1 conn=a cc=cubic to=SlowStart", "timestamp"),
        ("v=1 conn=a t_us=x cc=cubic to=SlowStart", "not a number"),
        ("v=1 conn=a t_us=1 to=SlowStart", "congestion controller"),
        ("v=1 conn=a t_us=1 cc=cubic", "state entered"),
        ("v=1 conn=a t_us=1 cc=cubic to=A to=B", "twice"),
        ("v=1 conn=a t_us=1 cc=cubic to=A junk", "not key=value"),
        ("v=1 conn=a t_us=1 cc=cubic to=A cwnd=lots", "not a number"),
        ("v=1 conn=a t_us=1 cc=cubic ev=explode to=A", "event kind"),
    ],
)
def test_malformed_lines_say_why(payload: str, reason: str) -> None:
    with pytest.raises(ContractError, match=reason):
        parse_payload(payload)


def test_close_needs_no_state() -> None:
    rec = parse_payload("v=1 conn=a t_us=1 cc=cubic ev=close")
    assert rec.event.kind == "close" and rec.event.state == ""


@given(
    conn=st.from_regex(r"[0-9a-zA-Z_:#x]{1,20}", fullmatch=True),
    t=st.integers(0, 2**62),
    frm=st.sampled_from(CUBIC_STATES),
    to=st.sampled_from(CUBIC_STATES),
    cwnd=st.none() | st.integers(0, 2**40),
)
def test_format_parse_round_trip(conn: str, t: int, frm: str, to: str, cwnd: int | None) -> None:
    rec = parse_line(format_line(conn=conn, t_us=t, cc="cubic", frm=frm, to=to, cwnd=cwnd))
    assert rec is not None
    assert (rec.conn, rec.event.t_us, rec.event.prev, rec.event.state, rec.event.cwnd) == (conn, t, frm, to, cwnd)


_opt_int = st.none() | st.integers(0, 10**15)


@given(
    conn=st.from_regex(r"[0-9a-zA-Z_:#x-]{1,20}", fullmatch=True),
    t=st.integers(-(10**15), 10**15),
    frm=st.none() | st.sampled_from(["Init", "SlowStart", "-", "PROBE_BW", "weird.state"]),
    to=st.sampled_from(["SlowStart", "Recovery", "ProbeBw.Up", "slow_start", "x"]),
    nums=st.tuples(*[_opt_int] * 7),
    trigger=st.none() | st.sampled_from(["ack", "loss", "full_bw", "spurious_loss", "a.b-c", "-"]),
    tail=st.sampled_from(["", " ", "\r", "\v", " extra=1", " ev=update", "\u00a0cwnd=5", "\x1c", "\u3000"]),
)
def test_c_reader_agrees_with_python_reader(conn, t, frm, to, nums, trigger, tail) -> None:
    """The optional C reader of the canonical order must give exactly what parse_payload gives."""
    scan_mod = pytest.importorskip("quicsm.traces._scan")
    from quicsm.traces.events import METRIC_FIELDS

    line = format_line(conn=conn, t_us=t, cc="cubic", frm=frm, to=to, trigger=trigger, **dict(zip(METRIC_FIELDS, nums)))
    line += tail
    try:
        expected = parse_line(line)
    except ContractError:  # e.g. conn=-: the C reader must hand it back
        expected = None
    (item,), _ = scan_mod.scan(line.encode(), 0, len(line.encode()), b"QUICSM ", 1, True)
    if len(item) == 2:  # handed back: the Python reader decides
        return
    _, c_conn, c_cc, c_t, c_frm, c_to, *c_nums, c_trig = item
    assert expected is not None
    got = (c_conn, c_cc, c_t, canonical_state(c_frm) if c_frm else None, canonical_state(c_to), tuple(c_nums), c_trig)
    ev = expected.event
    assert got == (
        expected.conn,
        expected.cc,
        ev.t_us,
        ev.prev,
        ev.state,
        tuple(getattr(ev, k) for k in METRIC_FIELDS),
        ev.trigger,
    )
    assert ev.extra == () and ev.kind == "transition"
