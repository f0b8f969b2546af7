"""Resource bombs: each input finishes or fails cleanly within a memory limit and a time limit.

The same bombs, their limits and why, are in docs/limits.md; a row there names the test here. Each runs
the CLI as a user does, in a child process inside a cgroup memory limit (tests/bombs/bounded.py). Slow
lane: each writes or streams up to a few GB.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

import pytest
from bounded import needs_cgroup, one_line_error, run_bounded

pytestmark = [pytest.mark.slow, needs_cgroup]

MEMORY_MB = 1024
"""Every bomb runs under 1 GiB: quicsm's own start-up takes ~120 MiB, a real run of 10^5 qlogs ~300 MiB."""


def gzip_bomb(path: Path, chunk: bytes, total: int) -> Path:
    """``total`` bytes of ``chunk`` repeated, gzip level 9, written as it is compressed (1 GB -> ~1 MB)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = chunk * max(1, (1 << 24) // len(chunk))
    with open(path, "wb") as fh:
        left = total
        while left > 0:
            part = block[: min(left, len(block))]
            fh.write(comp.compress(part))
            left -= len(part)
        fh.write(comp.flush())
    return path


def _line(conn: str, t: int, frm: str, to: str) -> bytes:
    return f"QUICSM v=1 conn={conn} t_us={t} cc=cubic from={frm} to={to} cwnd=10\n".encode()


@pytest.mark.parametrize(
    ("name", "chunk"),
    [("zeros", b"\0"), ("one-endless-line", b"a"), ("newlines", b"\n"), ("untagged-lines", b"a log line\n")],
)
def test_gzip_bombs_of_text_stream_in_bounded_memory(tmp_path: Path, name: str, chunk: bytes) -> None:
    """1 GiB decompressed from ~1 MB: read in steps, never whole (files.GzipReader), lines cut at the scanner's cap."""
    bomb = gzip_bomb(tmp_path / f"{name}.log.gz", chunk, 1 << 30)
    o = run_bounded(["parse", str(bomb), "-o", os.devnull], memory_mb=MEMORY_MB, seconds=600)
    assert not o.killed, o.stderr[-500:]
    assert o.returncode in (0, 1) and "Traceback" not in o.stderr, o.stderr[-2000:]
    assert o.peak_mb < 600, o.peak_mb


def test_gzip_bomb_of_good_lines_over_many_connections(tmp_path: Path) -> None:
    """512 MiB of valid transitions (1,000 connection ids, each started anew from Init: millions of
    connections): every record read, memory bounded by the distinct sequences, not the bytes."""
    lines = b"".join(
        _line(f"c{c}", t, frm, to)
        for c in range(1000)
        for t, (frm, to) in enumerate((("Init", "SlowStart"), ("SlowStart", "CongestionAvoidance")))
    )
    bomb = gzip_bomb(tmp_path / "many.log.gz", lines, 512 << 20)
    o = run_bounded(
        ["infer", str(bomb), "--engine", "dfg", "-o", str(tmp_path / "m.json")], memory_mb=MEMORY_MB, seconds=900
    )
    assert o.returncode == 0 and not o.killed, o.stderr[-2000:]
    assert json.loads((tmp_path / "m.json").read_text())["traces"] > 0


@pytest.mark.parametrize(
    "args",
    [
        ["parse", "--files-from", "/dev/zero", "-o", os.devnull],
        ["render", "/dev/zero", "-o", "x.svg"],
        ["baseline", "show", "/dev/zero"],
        ["infer", "/dev/zero", "-o", os.devnull],
    ],
    ids=["files-from", "render", "baseline-show", "infer"],
)
def test_dev_zero_is_refused_at_once(tmp_path: Path, args: list[str]) -> None:
    o = run_bounded(args, memory_mb=512, seconds=60, cwd=tmp_path)
    line = one_line_error(o)
    assert "/dev/zero" in line and o.peak_mb < 300, (line, o.peak_mb)


def test_an_endless_file_list_stops_at_its_cap(tmp_path: Path) -> None:
    """More lines than MAX_LISTED in --files-from: an error naming the line, memory bounded by the cap."""
    from quicsm.traces.inputs import MAX_LISTED

    listing = tmp_path / "list.txt"
    with open(listing, "w") as fh:
        fh.write("x.log\n" * (MAX_LISTED + 1))
    o = run_bounded(["parse", "--files-from", str(listing), "-o", os.devnull], memory_mb=MEMORY_MB, seconds=300)
    assert f"list.txt:{MAX_LISTED + 1}: more than" in one_line_error(o)


def test_bundle_and_model_bombs_stop_at_their_size_limits(tmp_path: Path) -> None:
    """A .qsb / model JSON that decompresses to 2 GB: refused at 256 MiB, never read whole."""
    bundle = gzip_bomb(tmp_path / "bomb.qsb", b"{" + b" " * 4095, 2 << 30)
    o = run_bounded(["baseline", "show", str(bundle)], memory_mb=MEMORY_MB, seconds=300)
    assert "larger than 256 MiB (decompressed)" in one_line_error(o)
    assert o.peak_mb < 512, o.peak_mb  # the limit read once into one buffer (twice it before)
    model = gzip_bomb(tmp_path / "bomb.json.gz", b"{" + b" " * 4095, 2 << 30)
    o = run_bounded(["render", str(model), "-o", str(tmp_path / "m.svg")], memory_mb=MEMORY_MB, seconds=300)
    assert "larger than 256 MiB (decompressed)" in one_line_error(o)


def test_symbolic_link_loops_under_a_doublestar_glob(tmp_path: Path) -> None:
    """Two loops under a quoted ** glob: each file once, in seconds (it never ended before)."""
    runs = tmp_path / "runs"
    (runs / "a" / "b").mkdir(parents=True)
    for i, rel in enumerate(("top.log", "a/x.log", "a/b/y.log")):
        (runs / rel).write_bytes(_line(f"c{i}", 1, "Init", "SlowStart") + _line(f"c{i}", 5, "SlowStart", "Recovery"))
    (runs / "a" / "b" / "up").symlink_to("..")
    (runs / "a" / "up2").symlink_to("../..")
    o = run_bounded(["parse", str(runs / "**" / "*.log"), str(runs), "-o", os.devnull], memory_mb=512, seconds=60)
    assert o.returncode == 0, o.stderr
    assert "read 3 file(s)" in o.stderr


def test_compare_of_many_connections_is_linear(tmp_path: Path) -> None:
    """2 x 2 x 10^5 connections: the CI of a mean is the normal one past 20,000 connections a set (the
    bootstrap's resamples x n draws kept 2 x 10^6 connections busy for minutes)."""
    for name, seed in (("a", 1), ("b", 2)):
        with open(tmp_path / f"{name}.log", "wb") as fh:
            for c in range(200_000):
                nxt = "Recovery" if (c * 7 + seed) % 10 < 3 + seed else "CongestionAvoidance"
                fh.write(_line(f"c{c}", 1, "Init", "SlowStart") + _line(f"c{c}", 50 + c % 97, "SlowStart", nxt))
    args = ["compare", str(tmp_path / "a.log"), str(tmp_path / "b.log"), "--engine", "dfg", "--format", "json"]
    o = run_bounded([*args, "-o", str(tmp_path / "c.json")], memory_mb=2048, seconds=900)
    assert o.returncode == 0 and not o.killed, o.stderr[-2000:]
    sets = json.loads((tmp_path / "c.json").read_text())["sets"]
    assert [s["connections"] for s in sets] == [200_000, 200_000]


def test_a_cut_gzip_bomb_is_read_up_to_the_cut(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(_line(f"c{c}", 1, "Init", "SlowStart") for c in range(50_000)))
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) // 2])
    o = run_bounded(["parse", str(cut), "-o", str(tmp_path / "t.jsonl")], memory_mb=512, seconds=120)
    assert o.returncode == 0 and "truncated or corrupt" in o.stderr, o.stderr[-2000:]


@pytest.mark.parametrize("states", [1_000, 3_000, 100_000])
def test_many_distinct_states_are_refused_by_the_synoptic_engine_at_once(tmp_path: Path, states: int) -> None:
    """The default engine's invariants are states x states matrices and refinement splits per violated
    invariant: 1,000 random states took 74 s, 3,000 ran past 120 s and 2.4 GB, 10^5 asked for 9.3 GiB.
    More than synoptic.MAX_STATES is refused with one line naming the count and what takes it (dfg)."""
    from quicsm.inference.synoptic import MAX_STATES

    log = tmp_path / "many.log"
    with open(log, "wb") as fh:
        for i in range(states):  # one connection per state, two states each: a 100 KB log at 3,000
            fh.write(_line(f"c{i}", 1, "Init", f"S{i}") + _line(f"c{i}", 2, f"S{i}", f"T{i % 7}"))
    o = run_bounded(["infer", str(log), "-o", str(tmp_path / "m.json")], memory_mb=MEMORY_MB, seconds=60)
    line = one_line_error(o)
    assert f"{states + 7:,} distinct states, more than the {MAX_STATES}" in line and "--engine dfg" in line
    assert not (tmp_path / "m.json").exists()
    assert o.seconds < 30 and o.peak_mb < 600, (o.seconds, o.peak_mb)


def test_a_gzip_of_one_endless_connection_stops_at_the_connection_cap(tmp_path: Path) -> None:
    """Valid lines of ONE connection, time going on (issue 36 item 8: a 14.5 MB .gz of them reached 2.9 GB in
    120 s without finishing): the file is read up to MAX_CONN_EVENTS records of it, then stops, saying so."""
    from quicsm.traces.columnar import MAX_CONN_EVENTS

    comp = zlib.compressobj(6, zlib.DEFLATED, 31)
    bomb = tmp_path / "one.log.gz"
    with open(bomb, "wb") as fh:
        fh.write(comp.compress(_line("c", 0, "Init", "SlowStart")))
        for block in range(3 * MAX_CONN_EVENTS // 2 // 10_000):  # no from=Init again: the key never starts anew
            t = block * 20_000
            lines = b"".join(
                _line("c", t + 2 * i, "SlowStart", "Recovery") + _line("c", t + 2 * i + 1, "Recovery", "SlowStart")
                for i in range(5_000)
            )
            fh.write(comp.compress(lines))
        fh.write(comp.flush())
    o = run_bounded(["parse", str(bomb), "-o", str(tmp_path / "t.parquet")], memory_mb=MEMORY_MB, seconds=300)
    assert o.returncode == 0 and not o.killed, o.stderr[-2000:]
    why = f"a connection with more than {MAX_CONN_EVENTS} records: the rest of the file is not read"
    assert why in o.stderr and "1 connection trace(s)" in o.stderr, o.stderr[-2000:]
    assert o.peak_mb < 800 and o.seconds < 120, (o.peak_mb, o.seconds)


def _qlog_event(t: float, name: str, data: dict[str, object]) -> bytes:
    return json.dumps({"time": t, "name": name, "data": data}, separators=(",", ":")).encode()


def test_a_one_line_json_qlog_document_of_500_mb_streams(tmp_path: Path) -> None:
    """One JSON document on one line, 500 MB (it needed more than 5.2 GB, and died with a MemoryError traceback
    under 4 GB): read in windows, its traces whole, in bounded memory."""
    head = b'{"qlog_version":"0.3","title":"bomb","traces":[{"vantage_point":{"type":"server"},"events":['
    events = b",".join(  # a state change every 50 packets
        _qlog_event(float(i), "recovery:congestion_state_updated", {"new": ("slow_start", "recovery")[i % 2]})
        if i % 50 == 0
        else _qlog_event(float(i), "transport:packet_sent", {"header": {"packet_number": i}, "raw": {"length": 1252}})
        for i in range(4000)
    )
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    path = tmp_path / "one-line.qlog.gz"
    with open(path, "wb") as fh:
        fh.write(comp.compress(head))
        total = len(head)
        while total < 500 << 20:  # times repeat: the reader sorts each trace's events by time
            total += len(events) + 1
            fh.write(comp.compress(events + b","))
        fh.write(comp.compress(events + b"]}]}") + comp.flush())
    o = run_bounded(["parse", str(path), "-o", str(tmp_path / "t.parquet")], memory_mb=MEMORY_MB, seconds=600)
    assert o.returncode == 0 and not o.killed, o.stderr[-2000:]
    assert "read 1 file(s)" in o.stderr and o.peak_mb < 800, (o.stderr[-500:], o.peak_mb)


@pytest.mark.parametrize("mb", [32, 500])
def test_a_huge_json_seq_record_is_skipped_in_linear_time(tmp_path: Path, mb: int) -> None:
    """A JSON-SEQ record of 32 / 500 MB between good ones (10.7 s at 32 MB; 500 MB did not finish in 120 s):
    skipped past MAX_RECORD, reported with its number, the records around it read."""
    from quicsm.traces.qlog_columns import MAX_RECORD

    good = [_qlog_event(float(i), "recovery:congestion_state_updated", {"new": "slow_start"}) for i in range(3)]
    header = b'{"qlog_format":"JSON-SEQ","qlog_version":"0.3","trace":{"vantage_point":{"type":"server"}}}'
    path = tmp_path / "huge.sqlog"
    with open(path, "wb") as fh:
        fh.write(b"\x1e" + header + b"\n\x1e" + good[0] + b"\n\x1e" + b'{"time":1.5,"name":"x","data":{"pad":"')
        for _ in range(mb):
            fh.write(b"a" * (1 << 20))
        fh.write(b'"}}\n\x1e' + good[1] + b"\n\x1e" + good[2] + b"\n")
    o = run_bounded(["parse", str(path), "-o", str(tmp_path / "t.jsonl")], memory_mb=MEMORY_MB, seconds=300)
    assert o.returncode == 0 and not o.killed, o.stderr[-2000:]
    assert f"huge.sqlog:3: JSON-SEQ record 4 is longer than {MAX_RECORD} bytes: skipped" in o.stderr, o.stderr[-2000:]
    assert (tmp_path / "t.jsonl").read_text().count('"state":"SlowStart"') == 3  # the records around it
    assert o.peak_mb < 400 and o.seconds < 120, (o.peak_mb, o.seconds)


def test_a_qlog_of_one_endless_connection_stops_at_the_trace_cap(tmp_path: Path) -> None:
    """A gzipped JSON-SEQ qlog of one connection whose congestion events never end (2 GB from a few MB):
    read up to MAX_TRACE_EVENTS of them, then stops, saying so, in bounded memory."""
    from quicsm.traces.qlog_columns import MAX_TRACE_EVENTS

    header = b'\x1e{"qlog_format":"JSON-SEQ","qlog_version":"0.3","trace":{"vantage_point":{"type":"server"}}}\n'
    block = b"".join(
        b"\x1e"
        + _qlog_event(
            float(i),
            "recovery:metrics_updated",
            {"congestion_window": 12000 + i, "bytes_in_flight": i, "smoothed_rtt": 40.5},
        )
        + b"\n\x1e"
        + _qlog_event(i + 0.5, "recovery:congestion_state_updated", {"new": ("slow_start", "recovery")[i % 2]})
        + b"\n"
        for i in range(1000)
    )
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    path = tmp_path / "one.sqlog.gz"
    with open(path, "wb") as fh:
        fh.write(comp.compress(header))
        for _ in range((2 << 30) // len(block)):
            fh.write(comp.compress(block))
        fh.write(comp.flush())
    o = run_bounded(["parse", str(path), "-o", str(tmp_path / "t.parquet")], memory_mb=MEMORY_MB, seconds=600)
    assert o.returncode == 0 and not o.killed, o.stderr[-2000:]
    assert f"a trace with more than {MAX_TRACE_EVENTS} congestion events: the rest of the file is not read" in o.stderr
    assert o.peak_mb < 900, o.peak_mb


def test_three_thousand_states_are_drawn_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """About 3,000 distinct states (issue 36.5; dfg takes any number): drawn as SVG and PNG within the
    memory limit, the PNG scaled to MAX_PNG_SIDE a side (a canvas of 3,000 nodes side by side is beyond
    cairo's 32,767 pixels). 17-22 s of CPU each on the project's machine."""
    from quicsm.diagrams.gvlib import MAX_PNG_SIDE

    log = tmp_path / "many.log"
    with open(log, "wb") as fh:
        for i in range(3_000):
            fh.write(
                _line(f"c{i}", 1, "SlowStart", f"S{i:05d}") + _line(f"c{i}", 2, f"S{i:05d}", "CongestionAvoidance")
            )
    for out in ("m.svg", "m.png"):
        o = run_bounded(
            ["diagram", str(log), "--engine", "dfg", "-o", str(tmp_path / out)], memory_mb=MEMORY_MB, seconds=300
        )
        assert o.returncode == 0, o.stderr[-2000:]
        assert o.peak_mb < 600, (out, o.peak_mb)
    # the 3,000, SlowStart, CongestionAvoidance, the start and end nodes and the legend
    assert (tmp_path / "m.svg").read_text().count('class="node"') == 3_000 + 5
    head = (tmp_path / "m.png").read_bytes()[16:24]
    assert max(int.from_bytes(head[:4], "big"), int.from_bytes(head[4:], "big")) == MAX_PNG_SIDE
