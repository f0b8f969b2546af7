"""Real qlogs from other stacks, held against an independent reading of the same files.

The independent reading below walks the JSON by hand (no quicsm code): per connection, the sequence
of congestion states and each state's share of the time, with the conventions docs/log-format.md
states: the first state is entered from Init, the start marker, which is no state; for changes-only loggers (an ``old`` on the first
change) the state left held since the trace's first event; the last state lasts until the trace's
last event of any kind.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import SHARED, shared_file

from quicsm.cli.main import cli
from quicsm.errors import NoTransitionsError
from quicsm.traces import parse_inputs
from quicsm.traces.events import SSTHRESH_INF

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "qlog"
SAMPLES = "reference/qlog-samples"
PICOQUIC = (f"{SAMPLES}/picoquic/qlog_trace_ref.qlog", f"{SAMPLES}/picoquic/qlog_trace_ecn_ref.qlog")

NAMES = {
    "slow_start": "SlowStart",
    "conservative_slow_start": "SlowStart",
    "congestion_avoidance": "CongestionAvoidance",
    "application_limited": "ApplicationLimited",
    "recovery": "Recovery",
    "persistent_congestion": "RetransmissionTimeout",
    "bbr_startup": "Startup",
    "bbr_drain": "Drain",
    "bbr_probe_bw_up": "ProbeBw.Up",
    "bbr_probe_bw_down": "ProbeBw.Down",
    "bbr_probe_bw_cruise": "ProbeBw.Cruise",
    "bbr_probe_bw_refill": "ProbeBw.Refill",
    "bbr_probe_rtt": "ProbeRtt",
    "0": "SlowStart",  # picoquic NewReno alg_state
    "1": "CongestionAvoidance",
}


def _open(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _events(path: Path) -> tuple[list[dict[str, Any]], float]:
    """Events as {name, time, data}, and the file's time scale to microseconds."""
    raw = _open(path)
    text = raw.lstrip()
    if text.startswith(b"\x1e") or b"\n{" in text[:4096] and b'"traces"' not in text[:4096]:
        recs = [json.loads(r) for r in raw.replace(b"\x1e", b"\n").split(b"\n") if r.strip()]
        header, evs = recs[0], recs[1:]
        scale = 1.0 if json.dumps(header).find('"time_units": "us"') >= 0 else 1000.0
        return [{"name": e["name"], "time": float(e["time"]), "data": e.get("data")} for e in evs], scale
    doc = json.loads(raw)
    (trace,) = doc["traces"]
    scale = 1.0 if trace.get("configuration", {}).get("time_units") == "us" else 1000.0
    fields = trace.get("event_fields")
    out = []
    for ev in trace["events"]:
        if fields:
            rec = dict(zip(fields, ev))
            out.append(
                {"name": f"{rec['category']}:{rec['event']}", "time": float(rec["relative_time"]), "data": rec["data"]}
            )
        else:
            out.append({"name": ev["name"], "time": float(ev["time"]), "data": ev.get("data")})
    return out, scale


def independent_reading(path: Path) -> tuple[list[str], dict[str, float]]:
    evs, scale = _events(path)
    changes = [e for e in evs if e["name"].endswith("congestion_state_updated")]
    assert changes, path
    start = changes[0]["time"]
    seq: list[str] = []
    stays: list[tuple[str, float]] = []
    first = changes[0]["data"]
    if "old" in first:
        start = min(e["time"] for e in evs)
        seq.append(NAMES[str(first["old"])])
        stays.append((seq[-1], start))
    for c in changes:
        state = NAMES[str(c["data"]["new"])]
        if not seq or state != seq[-1]:
            seq.append(state)
            stays.append((state, c["time"]))
    end = max(e["time"] for e in evs)
    total = (end - start) * scale
    shares: dict[str, float] = defaultdict(float)
    for (state, since), nxt in zip(stays, [*(s for _, s in stays[1:]), end]):
        shares[state] += (nxt - since) * scale / total
    return seq, dict(shares)


def quicsm_reading(path: Path) -> tuple[list[str], dict[str, float]]:
    (t,) = parse_inputs([str(path)]).traces
    visits = t.visits()
    total = sum(v.duration_us for v in visits)
    shares: dict[str, float] = defaultdict(float)
    for v in visits:
        shares[v.state] += v.duration_us / total
    return t.states(), dict(shares)


def _files() -> list[Path]:
    found = sorted(p for p in DATA.rglob("*") if p.is_file() and p.name not in ("meta.json", "README.md"))
    return found + [SHARED / name for name in PICOQUIC]


@pytest.mark.parametrize("path", _files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_quicsm_matches_an_independent_reading(path: Path) -> None:
    if path.is_relative_to(SHARED):
        path = shared_file(str(path.relative_to(SHARED)))
    assert path.is_file(), f"{path} missing"
    seq, shares = independent_reading(path)
    got_seq, got_shares = quicsm_reading(path)
    assert got_seq == seq
    assert set(got_shares) == set(shares)
    for state, share in shares.items():
        assert got_shares[state] == pytest.approx(share, abs=0.01), state
    assert len(seq) >= 2 and sum(shares.values()) == pytest.approx(1.0, abs=1e-6)


def test_changes_only_start_in_the_state_left() -> None:
    """neqo logs only changes: slow start holds from the first event to the first change, not 0 s."""
    path = DATA / "neqo-cubic" / "neqo-cubic.sqlog.gz"
    (t,) = parse_inputs([str(path)]).traces
    slow = t.visits()[0]
    assert (slow.state, slow.start_us, slow.end_us) == ("SlowStart", 500, 82_000)  # first event .. first change
    metrics = [e for e in t.events if e.kind == "metrics"]
    first_change = next(e.t_us for e in t.transitions() if e.state == "Recovery")
    assert all(m.state == "SlowStart" for m in metrics if m.t_us < first_change)
    assert (t.implementation, t.cc) == ("neqo", "cubic")


def test_quic_go_ndjson_era_is_read_with_its_version() -> None:
    res = parse_inputs([str(DATA / "quic-go-v0.43.1")])  # a directory run: no file may go missing
    assert len(res.traces) == res.report.files == 2
    assert not res.report.issues and not res.report.skipped_files
    for t in res.traces:
        assert (t.implementation, t.version, t.cc) == ("quic-go", "v0.43.1", "reno")
        assert {"SlowStart", "Recovery", "CongestionAvoidance"} <= set(t.states())


def test_compare_across_stacks_says_controllers_differ(tmp_path: Path) -> None:
    sets = [str(DATA / d) for d in ("quic-go-v0.43.1", "neqo-newreno", "neqo-cubic")]
    r = CliRunner().invoke(cli, ["compare", *sets, "-o", str(tmp_path / "cmp")])
    assert r.exit_code == 0, r.output
    assert "different congestion controllers" in r.output
    assert "quic-go-v0.43.1: reno" in r.output and "neqo-cubic: cubic" in r.output
    assert (tmp_path / "cmp").stat().st_size > 0


def test_picoquic_rtts_stay_in_microseconds() -> None:
    (t,) = parse_inputs([str(shared_file(PICOQUIC[0]))]).traces
    srtts = [e.srtt_us for e in t.events if e.kind == "metrics" and e.srtt_us]
    assert srtts and all(10_000 < s < 100_000 for s in srtts)  # 21 ms, not 21 s


def test_names_do_not_pick_the_reader(tmp_path: Path) -> None:
    """picoquic's qlogs are .txt upstream; a renamed .json qlog is still a qlog."""
    src = shared_file(PICOQUIC[0]).read_bytes()
    for name in ("qlog_trace_ref.txt", "trace.json"):
        (tmp_path / name).write_bytes(src)
        (t,) = parse_inputs([str(tmp_path / name)]).traces
        assert t.states() == ["SlowStart", "CongestionAvoidance"]


def test_aioquic_without_state_events_gets_states_from_its_metrics() -> None:
    """aioquic logs metrics only: its states are inferred (and say so); --states logged refuses the file."""
    path = shared_file(f"{SAMPLES}/aioquic/server-success.qlog")
    (t,) = parse_inputs([str(path)]).traces
    assert t.labels["states"] == "inferred from metrics" and t.implementation == "aioquic"
    assert t.states()[:1] == ["SlowStart"]  # Init is the start marker, no state
    assert all(e.trigger and e.trigger.startswith("inferred:") for e in t.events if e.kind == "transition")
    with pytest.raises(NoTransitionsError):
        parse_inputs([str(path)], states="logged")
    res = parse_inputs([str(path)], require_transitions=False, states="logged")
    assert res.traces == [] and res.report.records > 0


def test_quiche_unbounded_ssthresh_and_hystart_states() -> None:
    """quiche logs ssthresh as 2^64-1 and HyStart++'s conservative phase as its own state."""
    path = DATA / "quiche-0.30.0-cubic-hystart" / "cubic-hystart.sqlog.gz"
    assert b'"ssthresh":18446744073709551615' in _open(path)
    assert b'"new":"conservative_slow_start"' in _open(path)
    res = parse_inputs([str(path)])
    (t,) = res.traces
    assert (t.implementation, t.version, t.cc) == ("quiche", "0.30.0", "cubic")
    assert SSTHRESH_INF in {e.ssthresh for e in t.events if e.kind == "metrics"}
    assert set(t.states()) == {"SlowStart", "Recovery", "CongestionAvoidance"}
    assert not res.report.unknown_states and not res.report.issues


def test_compare_quiche_cubic_with_neqo_cubic_and_quic_go(tmp_path: Path) -> None:
    sets = [str(DATA / d) for d in ("quiche-0.30.0-cubic", "neqo-cubic", "quic-go-v0.43.1")]
    r = CliRunner().invoke(cli, ["compare", *sets, "-o", str(tmp_path / "cmp")])
    assert r.exit_code == 0, r.output
    assert "quiche-0.30.0-cubic: cubic; neqo-cubic: cubic; quic-go-v0.43.1: reno" in r.output
