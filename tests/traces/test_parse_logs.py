from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import synth_cubic_lines

from quicsm.errors import InputError, NoTransitionsError, ParseError
from quicsm.traces import parse_inputs, read_traces, write_traces
from quicsm.traces.contract import format_line, parse_line
from quicsm.traces.logscan import CHUNK

PREFIXES = [
    "[31337:31355:1122/143015.123456:VERBOSE1:tcp_cubic_sender_bytes.cc(334)] ",  # Chromium, pid:tid
    "[1122/143015.123456:INFO:bbr_sender.cc(627)] ",  # Chromium without pid/tid
    "I1122 12:34:56.789012    1234 file.cc:123] ",  # Abseil / glog
    "2026/11/22 08:00:00 ",  # Go log
    "",  # plain
]


def _expected(lines: list[str]) -> dict[str, list[str]]:
    """States per connection key computed independently from the lines (one connection per key here)."""
    out: dict[str, list[str]] = {}
    for line in lines:
        rec = parse_line(line)
        assert rec is not None
        if rec.event.kind == "transition":
            out.setdefault(rec.conn, []).append(rec.event.state)
    return out


@pytest.mark.parametrize("prefix", PREFIXES)
def test_contract_found_behind_any_prefix(write_log, prefix: str) -> None:
    lines = synth_cubic_lines(conns=4, steps=30, seed=1, prefix=prefix)
    noisy = []
    for i, line in enumerate(lines):
        noisy.append(line)
        noisy.append(f"{prefix}Server: Sending packet {i} : retransmittable frames: STREAM_FRAME")
    res = parse_inputs([str(write_log("a.log", noisy))])
    expected = _expected(lines)
    assert res.report.records == len(lines)
    assert res.report.lines == len(noisy)
    got = {t.key: [e.state for e in t.transitions()] for t in res.traces}
    assert got == expected
    for t in res.traces:
        assert [e.t_us for e in t.events] == sorted(e.t_us for e in t.events)


def test_reused_key_splits_at_init(write_log) -> None:
    a = [
        format_line(conn="0x1", t_us=t, cc="cubic", frm=f, to=s)
        for t, f, s in [(0, "Init", "SlowStart"), (10, "SlowStart", "CongestionAvoidance")]
    ]
    b = [
        format_line(conn="0x1", t_us=t, cc="cubic", frm=f, to=s)
        for t, f, s in [(50, "Init", "SlowStart"), (60, "SlowStart", "Recovery")]
    ]
    res = parse_inputs([str(write_log("r.log", a + b))])
    assert [t.id for t in res.traces] == ["r.log:0x1", "r.log:0x1#2"]
    assert res.traces[0].states() == ["SlowStart", "CongestionAvoidance"]  # Init: the start marker
    assert res.traces[1].states() == ["SlowStart", "Recovery"]


def test_same_key_in_two_files_are_two_connections(tmp_path: Path) -> None:
    lines = [format_line(conn="0x1", t_us=0, cc="cubic", frm="Init", to="SlowStart")]
    for d in ("s1", "s2"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "server.log").write_text(lines[0] + "\n")
    res = parse_inputs([str(tmp_path / "s1/server.log"), str(tmp_path / "s2/server.log")])
    assert len({t.id for t in res.traces}) == 2


def test_gzip_and_multiple_files(write_log, tmp_path: Path) -> None:
    lines = synth_cubic_lines(conns=3, steps=20, seed=2)
    plain = write_log("x.log", lines)
    gz = tmp_path / "y.log.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    one = parse_inputs([str(plain)])
    both = parse_inputs([str(plain), str(gz)])
    assert len(both.traces) == 2 * len(one.traces)
    assert both.report.records == 2 * one.report.records


def test_stdin(tmp_path: Path) -> None:
    lines = synth_cubic_lines(conns=2, steps=10, seed=3)
    out = subprocess.run(
        [sys.executable, "-m", "quicsm", "parse", "-", "-o", str(tmp_path / "t.jsonl")],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert "2 connection trace(s)" in out.stderr
    assert len(read_traces(str(tmp_path / "t.jsonl"))) == 2


def test_lines_across_chunk_boundaries(write_log) -> None:
    filler = "x" * 1000
    lines = synth_cubic_lines(conns=2, steps=40, seed=4)
    noisy = [f"{filler} {i}" for i in range(int(CHUNK / 1000) + 7)] + lines
    res = parse_inputs([str(write_log("big.log", noisy))])
    assert res.report.records == len(lines)
    assert res.report.lines == len(noisy)


def test_bad_records_reported_with_file_line_reason(write_log) -> None:
    good = synth_cubic_lines(conns=1, steps=5, seed=5)
    lines = good[:2] + ["QUICSM v=1 conn=0x0 t_us=oops cc=cubic to=SlowStart"] + good[2:]
    p = write_log("bad.log", lines)
    res = parse_inputs([str(p)])
    assert res.report.total_issues == 1
    issue = res.report.issues[0]
    assert (issue.path, issue.line) == (str(p), 3) and "t_us" in issue.reason
    assert f"{p}:3:" in res.report.summary()
    with pytest.raises(ParseError, match=r"bad\.log:3: malformed contract line"):
        parse_inputs([str(p)], strict=True)


def test_timestamps_going_backwards_are_reported_and_sorted(write_log) -> None:
    lines = [
        format_line(conn="a", t_us=100, cc="cubic", frm="Init", to="SlowStart"),
        format_line(conn="a", t_us=300, cc="cubic", frm="SlowStart", to="Recovery"),
        format_line(conn="a", t_us=200, cc="cubic", frm="SlowStart", to="CongestionAvoidance"),
    ]
    res = parse_inputs([str(write_log("back.log", lines))])
    assert res.report.issue_counts["timestamp goes backwards"] == 1
    assert res.report.issues[0].line == 3
    assert [e.t_us for e in res.traces[0].events] == [100, 200, 300]


def test_truncated_gzip_and_binary_garbage(write_log, tmp_path: Path) -> None:
    lines = synth_cubic_lines(conns=2, steps=200, seed=6)
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) // 2])
    res = parse_inputs([str(cut)])
    assert res.report.issue_counts["truncated input"] == 1
    assert 0 < res.report.records < len(lines)  # what was readable is kept

    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 100 + b"QUICSM \xff\xfe\x00\n")
    with pytest.raises(NoTransitionsError):
        parse_inputs([str(junk)])
    res = parse_inputs([str(junk), str(write_log("ok.log", lines))])
    assert res.report.issue_counts["not UTF-8"] == 1


def test_missing_empty_and_no_transition_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        parse_inputs([str(tmp_path / "nope.log")])
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(NoTransitionsError, match="no state transitions"):
        parse_inputs([str(empty)])
    with pytest.raises(InputError, match="directory holds no log"):
        parse_inputs([str(tmp_path / "sub")] if (tmp_path / "sub").mkdir() is None else [])


def test_no_transitions_says_the_real_reason_once(tmp_path: Path) -> None:
    """A file refused for a reason (quinn's BBR qlog: states not read from its metrics; a JSON that is no
    qlog) is said with that reason, once: not as "malformed record(s)" plus a guess that it is no log."""
    quinn = Path(__file__).resolve().parents[1] / "data" / "metric-only" / "quinn-0.11.19-bbr" / "conn1_server.sqlog.gz"
    with pytest.raises(NoTransitionsError) as info:
        parse_inputs([str(quinn)])
    msg = str(info.value)
    assert msg.startswith(f"no state transitions found: {quinn}:1: states not read: quinn's BBR phases are not read")
    assert "malformed" not in msg and "instrumented server" not in msg and msg.count(str(quinn)) == 1
    bad = tmp_path / "x.log"
    bad.write_text("QUICSM v=1 conn=1 t_us=x\nQUICSM v=1 conn=1 t_us=y\n")
    (tmp_path / "empty.log").write_text("")
    with pytest.raises(NoTransitionsError, match=r"x.log:1: malformed contract line: .* \(2 problem\(s\): 2 malformed"):
        parse_inputs([str(bad), str(tmp_path / "empty.log")])


def test_directories_expand_to_their_logs(tmp_path: Path) -> None:
    for i in range(3):
        run = tmp_path / f"run{i}"
        run.mkdir()
        (run / "server.log").write_text("\n".join(synth_cubic_lines(conns=1, steps=5, seed=i)) + "\n")
        (run / "meta.json").write_text(f'{{"labels": {{"run": "{i}"}}}}')
        (run / "notes.md").write_text("not an input")
    res = parse_inputs([str(tmp_path)])
    assert res.report.files == 3
    assert sorted(t.labels["run"] for t in res.traces) == ["0", "1", "2"]


def test_labels_and_sidecar_meta(tmp_path: Path) -> None:
    run = tmp_path / "run1"
    run.mkdir()
    (run / "server.log").write_text("\n".join(synth_cubic_lines(conns=1, steps=5, seed=7)) + "\n")
    (run / "meta.json").write_text(
        '{"implementation": "quic-go", "version": "v0.65.0", "labels": {"client": "desktop", "rate": "50mbit"}}'
    )
    res = parse_inputs([str(run / "server.log")], labels={"client": "mobile"})
    t = res.traces[0]
    assert (t.implementation, t.version) == ("quic-go", "v0.65.0")
    assert t.labels == {"client": "mobile", "rate": "50mbit"}  # command line wins


def test_a_runs_qlog_folder_takes_the_runs_meta(tmp_path: Path) -> None:
    """The testbed writes a run's qlogs into ``<run>/qlog/`` and its ``meta.json`` into ``<run>/``: the qlogs
    get the run's stack, version, controller and labels (compare called ngtcp2's qlog-only runs' cc
    "unknown" without it). Only a folder named ``qlog`` looks one level up; its own meta.json wins."""
    qlog = Path(__file__).resolve().parents[1] / "data" / "quic-go-v0.65" / "server.sqlog.gz"
    run = tmp_path / "reno-loss2-00"
    (run / "qlog").mkdir(parents=True)
    (run / "qlog" / "conn_server.sqlog.gz").write_bytes(qlog.read_bytes())
    (run / "meta.json").write_text(
        '{"implementation": "ngtcp2", "version": "0.12.1", "cc": "reno", "labels": {"run": "reno-loss2-00"}}'
    )
    (t,) = parse_inputs([str(run)]).traces
    assert (t.implementation, t.version, t.cc, t.labels["run"]) == ("ngtcp2", "0.12.1", "reno", "reno-loss2-00")
    (run / "qlog" / "meta.json").write_text('{"cc": "cubic"}')  # a sidecar of its own
    (t,) = parse_inputs([str(run / "qlog" / "conn_server.sqlog.gz")]).traces
    assert t.cc == "cubic" and "run" not in t.labels
    other = tmp_path / "other"
    (other / "logs").mkdir(parents=True)
    (other / "meta.json").write_text('{"cc": "bbr"}')
    (other / "logs" / "x.sqlog.gz").write_bytes(qlog.read_bytes())
    (t,) = parse_inputs([str(other / "logs" / "x.sqlog.gz")]).traces
    assert t.cc != "bbr"  # any other folder: no look upward


def test_a_run_is_read_once_from_its_contract_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A testbed run made with ``qlog = true`` holds each connection twice: the contract lines in its
    ``server.log`` and the stack's own qlog in ``<run>/qlog/`` (the real pair of one quic-go v0.65
    connection here). A run's folder is read from its contract lines; from its qlogs only when its log
    holds none (ngtcp2's runs: an empty ``server.log``); a qlog named as a file is read."""
    data = Path(__file__).resolve().parents[1] / "data" / "quic-go-v0.65"
    runs = tmp_path / "grid"
    for name, log in (("reno-00", (data / "server.log.gz").read_bytes()), ("ngtcp2-00", b"")):
        run = runs / name
        (run / "qlog").mkdir(parents=True)
        (run / "qlog" / "conn_server.sqlog.gz").write_bytes((data / "server.sqlog.gz").read_bytes())
        (run / ("server.log.gz" if log else "server.log")).write_bytes(log)
        (run / "meta.json").write_text('{"implementation": "quic-go", "version": "v0.65.0", "cc": "reno"}')
    capsys.readouterr()
    (t,) = parse_inputs([str(runs / "reno-00")]).traces
    assert t.sources[0].endswith("server.log.gz")
    assert "1 run(s)' qlog/ left out" in capsys.readouterr().err
    got = parse_inputs([str(runs)]).traces
    assert sorted(Path(t.sources[0]).name for t in got) == ["conn_server.sqlog.gz", "server.log.gz"]
    assert [Path(t.sources[0]).parts[-3] for t in got if t.sources[0].endswith(".sqlog.gz")] == ["ngtcp2-00"]
    assert len(parse_inputs([str(runs / "reno-00" / "qlog" / "conn_server.sqlog.gz")]).traces) == 1
    assert len(parse_inputs([str(runs / "reno-00" / "qlog")]).traces) == 1
    (runs / "plain").mkdir()  # not a run (no meta.json): every file under it is read
    for f in ("server.log.gz", "qlog"):
        (runs / "reno-00" / f).rename(runs / "plain" / f)
    assert len(parse_inputs([str(runs / "plain")]).traces) == 2


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".parquet"])
def test_store_round_trip_is_lossless(write_log, tmp_path: Path, suffix: str) -> None:
    lines = synth_cubic_lines(conns=5, steps=40, seed=8)
    lines.append(format_line(conn="0x0", t_us=10**9, cc="cubic", ev="update", recovery="Growth", odd_key="v"))
    res = parse_inputs([str(write_log("s.log", lines))], labels={"k": "v"})
    out = tmp_path / f"traces{suffix}"
    assert write_traces(res.traces, str(out)) == len(res.traces)
    back = read_traces(str(out))
    assert back == res.traces
    # and as an input to the parser
    again = parse_inputs([str(out)])
    assert again.traces == res.traces


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"

    def boom():
        yield from []
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_traces(boom(), str(out))
    assert list(tmp_path.iterdir()) == []


def test_c_and_python_tag_finders_agree(write_log, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from quicsm.traces import columnar

    if not columnar.available():  # would compare Python with itself
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but the C scanner quicsm.traces._scan is not built")
        pytest.skip("the C scanner is not built (python3 setup.py build_ext --inplace)")
    lines = synth_cubic_lines(conns=5, steps=60, seed=30)
    noisy = [x for i, line in enumerate(lines) for x in (line, f"noise {i} QUICSM-ish but not the tag")]
    noisy.append("QUICSM v=1 conn=z t_us=1 cc=cubic to=SlowStart")  # last line without newline below
    p = tmp_path / "mixed.log"
    p.write_text("\n".join(noisy))
    gz = tmp_path / "mixed.log.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    results = []
    for scanner in (columnar.scan_columns_py, columnar._scan_columns):
        monkeypatch.setattr(columnar, "_scan_columns", scanner)
        for path in (p, gz):  # mmap windows and streamed windows
            res = parse_inputs([str(path)])
            results.append(([(t.key, t.events) for t in res.traces], res.report.lines, res.report.records))
    assert all(r == results[0] for r in results)
    assert results[0][1] == len(noisy) and results[0][2] == len(lines) + 1
