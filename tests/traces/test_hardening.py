"""Bad input in every reader this package owns: a counted problem or a one-line InputError, never a crash."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import file_head, synth_cubic_lines

from quicsm.errors import InputError
from quicsm.files import GzipReader
from quicsm.traces import iter_traces, logscan, parse_inputs, write_traces
from quicsm.traces.contract import ContractError, format_line, parse_payload
from quicsm.traces.events import SSTHRESH_INF
from quicsm.traces.inputs import Sidecars, expand_inputs
from quicsm.traces.report import ParseReport
from tests.traces import oracle

CANON = "v=1 conn=a t_us=5 cc=cubic from=SlowStart to=CongestionAvoidance cwnd=5"


# --- the contract: separators, '-', numbers -------------------------------------------------------


@pytest.mark.parametrize("sep", ["\u00a0", "\u0085", "\u2000", "\u200a", "\u3000", "\x1c", "\x1f", "\u2028"])
def test_only_ascii_separators_split_fields(sep: str) -> None:
    rec = parse_payload(f"v=1 conn=a t_us=5 cc=cubic to=SlowStart{sep}cwnd=5")
    assert rec.event.state == f"SlowStart{sep}cwnd=5" and rec.event.cwnd is None
    shuffled = parse_payload(f"cc=cubic t_us=5 to=SlowStart{sep}cwnd=5 conn=a v=1")
    assert shuffled == rec


@pytest.mark.parametrize("sep", ["\t", "\r", "\v", "\f", "  "])
def test_ascii_separators_split_fields(sep: str) -> None:
    rec = parse_payload(f"v=1{sep}conn=a t_us=5 cc=cubic to=SlowStart{sep}cwnd=5{sep}")
    assert (rec.event.state, rec.event.cwnd) == ("SlowStart", 5)


@pytest.mark.parametrize(
    "payload",
    [
        "v=1 conn=- t_us=5 cc=cubic to=SlowStart",
        "v=1 conn=a t_us=5 cc=cubic to=-",
        "to=- v=1 conn=a t_us=5 cc=cubic",
        "conn=- v=1 t_us=5 cc=cubic to=SlowStart",
    ],
)
def test_dash_in_required_fields_is_refused_in_any_order(payload: str) -> None:
    with pytest.raises(ContractError):
        parse_payload(payload)


def test_dash_means_unknown_for_optional_fields() -> None:
    for payload in (CANON + " trigger=-", "trigger=- " + CANON):
        ev = parse_payload(payload).event
        assert ev.trigger is None and ev.cwnd == 5
    assert parse_payload("v=1 conn=a t_us=5 cc=cubic from=- to=A").event.prev is None


@pytest.mark.parametrize(
    "value, expected",
    [
        ("inf", SSTHRESH_INF),
        ("Infinity", SSTHRESH_INF),
        ("18446744073709551615", SSTHRESH_INF),
        ("9223372036854775807", SSTHRESH_INF),
        ("1.5e3", 1500),
        ("12", 12),
    ],
)
def test_ssthresh_unbounded_spellings(value: str, expected: int) -> None:
    assert parse_payload(f"{CANON} ssthresh={value}").event.ssthresh == expected


@pytest.mark.parametrize(
    "field, value, reason",
    [
        ("cwnd", "18446744073709551615", "out of range"),
        ("cwnd", "-1", "out of range"),
        ("cwnd", "Infinity", "not a number"),
        ("cwnd", "NaN", "not a number"),
        ("cwnd", "1e999", "not a finite number"),
        ("cwnd", "1" * 4301, "not a number"),
        ("cwnd", "\u0661\u0662", "not a number"),
        ("cwnd", "1_000", "not a number"),
        ("t_us", "9223372036854775808", "out of range"),
        ("t_us", "1" * 4301, "not a number"),
    ],
)
def test_numbers_out_of_range_are_refused(field: str, value: str, reason: str) -> None:
    payload = f"v=1 conn=a cc=cubic to=A t_us=1 {field}={value}".replace(" t_us=1 t_us=", " t_us=")
    with pytest.raises(ContractError, match=reason):
        parse_payload(payload)


def test_format_line_replaces_every_separator() -> None:
    line = format_line(conn="a\tb c", t_us=1, cc="cubic", to="X\vY")
    assert parse_payload(line.removeprefix("QUICSM ")).conn == "a_b_c"


# --- the text-log scanner: windows, truncation, gzip -----------------------------------------------


def _scan(data: bytes, chunk: int) -> tuple[list[object], int, list[str]]:
    report = ParseReport(keep=1000)
    recs = list(oracle.scan_contract(io.BytesIO(data), "x", report, chunk=chunk))
    return recs, report.lines, [str(i) for i in report.issues]


def test_results_do_not_depend_on_the_window_size() -> None:
    rng = random.Random(5)
    lines = synth_cubic_lines(conns=3, steps=40, seed=9)
    lines += ["QUICSM v=1 conn=z t_us=x cc=cubic to=A", "noise", "", "QUICSM \xff"]
    rng.shuffle(lines)
    data = "\n".join(lines).encode("utf-8", "surrogateescape")
    expected = _scan(data, 1 << 22)
    assert len(expected[0]) > 100 and expected[2]
    for chunk in (1, 7, 64, 1000):
        assert _scan(data, chunk) == expected


def test_log_truncated_while_read_ends_early_and_says_so(tmp_path: Path) -> None:
    """What logrotate's copytruncate does to a live log: no SIGBUS, the lines read are kept."""
    lines = synth_cubic_lines(conns=4, steps=200, seed=2)
    log = tmp_path / "live.log"
    log.write_text("\n".join(lines) + "\n")
    report = ParseReport(keep=100)
    calls = []

    def truncate_after_first_window(n: int) -> None:
        if not calls:
            with open(log, "r+b") as fh:
                fh.truncate(0)
        calls.append(n)

    with open(log, "rb") as fh:
        recs = list(oracle.scan_contract(fh, str(log), report, truncate_after_first_window, chunk=4096))
    assert 0 < len(recs) < len(lines)
    assert calls[0] <= 4096 + 200
    assert report.issue_counts["file shrank while being read"] == 1


def test_flipped_bit_in_gzip_keeps_what_decompressed(tmp_path: Path) -> None:
    lines = synth_cubic_lines(conns=3, steps=300, seed=4)
    raw = ("\n".join(lines) + "\n").encode()
    clean = gzip.compress(raw, mtime=0)
    for at in range(len(clean) // 4, len(clean), 31):  # the first flip that breaks the stream midway
        z = bytearray(clean)
        z[at] ^= 0x10
        good = _zcat(bytes(z))  # what zcat prints before its error
        if len(raw) // 4 < len(good) < len(raw):
            break
    else:
        pytest.fail("no bit flip broke the stream")
    gz = tmp_path / "flip.log.gz"
    gz.write_bytes(bytes(z))
    res = parse_inputs([str(gz)])
    plain = tmp_path / "zcat.log"
    plain.write_bytes(good[: good.rfind(b"\n") + 1])  # zcat's complete lines
    reference = parse_inputs([str(plain)])
    assert res.report.records >= reference.report.records > 100
    assert res.report.issue_counts["truncated input"] == 1


def _zcat(data: bytes) -> bytes:
    """What ``zcat`` prints before its error (the reference the issue compares with)."""
    return subprocess.run(["gzip", "-dc"], input=data, capture_output=True).stdout


def test_gzip_reader_gives_data_then_the_error() -> None:
    raw = "".join(f"line {i}\n" for i in range(20000)).encode()
    z = gzip.compress(raw, mtime=0)
    r = GzipReader(io.BytesIO(z[:-30]))
    data = r.read()
    assert raw.startswith(data) and len(data) > len(raw) // 2
    with pytest.raises(EOFError):
        r.read()
    multi = gzip.compress(b"a\n", mtime=0) + b"\x00" * 5 + gzip.compress(b"b\n", mtime=0)
    assert GzipReader(io.BytesIO(multi)).read() == b"a\nb\n"


# --- inputs: stdin, sidecar metadata, trace files ----------------------------------------------------


def test_stdin_twice_is_refused() -> None:
    with pytest.raises(InputError, match="more than once"):
        expand_inputs(["-", "-"])


def test_globs_and_directories_expand_the_same_for_every_caller(tmp_path: Path) -> None:
    for name in ("a.log", "b.log", ".hidden.log", "meta.json"):
        (tmp_path / name).write_text(format_line(conn="c", t_us=1, cc="cubic", to="A") + "\n")
    assert [Path(p).name for p in expand_inputs([str(tmp_path / "*")])] == ["a.log", "b.log"]
    assert expand_inputs([str(tmp_path)]) == expand_inputs([str(tmp_path / "*.log")])
    with pytest.raises(InputError, match="no file matches"):
        expand_inputs([str(tmp_path / "*.qlog")])


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"[" * 100_000, "run metadata: expected `object`"),
        (b"\xff\xfe{}", "run metadata: not valid JSON"),
        (b'{"labels": {"a": ' + b"1" * 4301 + b"}}", "out of range"),
        (b'{"implementation": 5}', "run metadata: implementation: expected `str | null`"),
        (b"{" + b" " * (1 << 20) + b"}", "larger than"),
        (b'{"labels": [1, 2]}', "labels"),
        (b'{"labels": {"a": {"b": 1}}}', "labels"),
        (b"[]", "run metadata: expected `object`, got `array`"),
    ],
)
def test_bad_sidecar_metadata_is_one_line(tmp_path: Path, content: bytes, reason: str) -> None:
    (tmp_path / "meta.json").write_bytes(content)
    with pytest.raises(InputError, match=reason) as exc:
        Sidecars()(str(tmp_path / "server.log"))
    assert "\n" not in str(exc.value)


def _trace_line(**change: object) -> bytes:
    d: dict[str, object] = {
        "format": "quicsm-trace",
        "v": 1,
        "id": "s:a",
        "cc": "cubic",
        "events": [{"t_us": 1, "state": "SlowStart"}],
    }
    d.update(change)
    return json.dumps(d).encode() + b"\n"


@pytest.mark.parametrize(
    "content",
    [
        _trace_line(events=[{"t_us": 1e999, "state": "A"}]),
        _trace_line(events=[{"t_us": 1, "state": 5}]),
        _trace_line(events=[{"t_us": 1, "state": "A", "cwnd": 2**64}]),
        _trace_line(events=[{"t_us": 1, "state": "A", "kind": "explode"}]),
        _trace_line(events=[{"t_us": True, "state": "A"}]),
        _trace_line(events=[[1, 2]]),
        _trace_line(events={"a": 1}),
        _trace_line(labels={"a": [1]}),
        _trace_line(id=None),
        b"[1, 2]\n",
        b"[" * 100_000 + b"\n",
        b'{"format": "quicsm-trace", "v": ' + b"1" * 4301 + b"}\n",
        _trace_line()[:-5] + b"\xff\xfe\n",
        gzip.compress(_trace_line() * 50)[:-20],
    ],
)
def test_bad_trace_files_are_one_line_errors(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    with pytest.raises(InputError) as exc:
        list(iter_traces([str(path)]))
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)
    assert not getattr(exc.value, "unexpected", False)


def test_good_trace_file_still_reads(tmp_path: Path, write_log) -> None:
    log = write_log("s.log", synth_cubic_lines(conns=2, steps=5, seed=1))
    traces = parse_inputs([str(log)]).traces
    out = tmp_path / "t.jsonl.gz"
    write_traces(traces, str(out))
    assert [t.events for t in iter_traces([str(out)])] == [t.events for t in traces]


@pytest.mark.parametrize("newline_at_end", [True, False])
def test_overlong_lines_are_skipped_with_bounded_memory(monkeypatch: pytest.MonkeyPatch, newline_at_end: bool) -> None:
    monkeypatch.setattr(logscan, "MAX_LINE", 64)
    good = format_line(conn="a", t_us=1, cc="cubic", frm="Init", to="SlowStart")
    long = good + " pad=" + "x" * 200
    data = "\n".join([good, long, "noise", good.replace("t_us=1", "t_us=2"), long]).encode()
    data += b"\n" if newline_at_end else b""
    results = []
    for chunk in (1, 5, 16, 63, 64, 1000):
        report = ParseReport(keep=100)
        recs = list(oracle.scan_contract(io.BytesIO(data), "x", report, chunk=chunk))
        results.append(([line for line, _ in recs], report.lines, report.bytes, [str(i) for i in report.issues]))
    assert all(r == results[0] for r in results)
    lines, nlines, nbytes, issues = results[0]
    assert lines == [1, 4] and nlines == 5 and nbytes == len(data)
    assert issues == ["x:2: line longer than 64 bytes skipped", "x:5: line longer than 64 bytes skipped"]


@pytest.mark.parametrize("bad", ["server.log", [None], [1, 2], [b"x.log"]])
def test_inputs_list_of_wrong_types_is_an_input_error(bad: object) -> None:
    with pytest.raises(InputError, match="list of paths"):
        list(iter_traces(bad))  # type: ignore[arg-type]


def test_real_logs_with_a_flipped_bit_keep_what_zcat_keeps(tmp_path: Path) -> None:
    """Every bit flip, in real testbed logs, leaves at least the records zcat's output holds."""
    root = Path(__file__).resolve().parents[2] / "traces"
    logs = sorted(root.rglob("server.log.gz"))[::40][:3]
    assert logs, "the repository's traces/ directory holds real logs"
    rng = random.Random(11)
    total = 0
    for log in logs:
        data = log.read_bytes()
        for _ in range(6):
            z = bytearray(data)
            z[rng.randrange(20, len(z) - 8)] ^= 1 << rng.randrange(8)
            good = _zcat(bytes(z))
            (tmp_path / "zcat.log").write_bytes(good[: good.rfind(b"\n") + 1])
            (tmp_path / "flip.log.gz").write_bytes(bytes(z))
            ref = parse_inputs([str(tmp_path / "zcat.log")], require_transitions=False).report.records
            got = parse_inputs([str(tmp_path / "flip.log.gz")], require_transitions=False).report.records
            assert got >= ref, (log, "quicsm kept fewer records than zcat's output holds")
            total += got
    assert total > 100


@pytest.mark.parametrize("version", ["\x1c", "\x85", "2\u2028x", "v" * 100])
def test_unsupported_version_is_quoted_in_one_line(version: str) -> None:
    """Found by the fuzzer: a control character of the input (here a line boundary for str.splitlines)
    went raw into the message, so the CLI's error took two lines."""
    with pytest.raises(ContractError) as info:
        parse_payload(f"v={version} conn=a t_us=1 cc=cubic to=SlowStart")
    text = str(info.value)
    assert len(text.splitlines()) == 1 and "is not supported" in text and len(text) < 120


@pytest.mark.parametrize("field, value", [("v", "1\x1c"), ("t_us", "1\n2")])
def test_trace_file_errors_quote_values_in_one_line(tmp_path: Path, field: str, value: str) -> None:
    """Errors in a trace file name the line and field in one line: a control character must not break it."""
    from quicsm.traces.events import Trace, TraceEvent

    path = tmp_path / "t.jsonl"
    write_traces([Trace(id="a", cc="cubic", events=[TraceEvent(1, "SlowStart", prev="Init")])], str(path))
    record = json.loads(path.read_text().splitlines()[-1])
    if field == "v":
        record["v"] = value
    else:
        record["events"][0]["t_us"] = value
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(InputError) as info:
        list(iter_traces([str(path)]))
    text = str(info.value)
    where = "v" if field == "v" else "events[0].t_us"
    assert len(text.splitlines()) == 1 and text.startswith(f"{path}:1: bad trace record: {where}: ")


# --- inputs that never end, loop or overlap (issue 36 items 9, 11) ----------------------------------


def _tree(tmp_path: Path) -> Path:
    """runs/{top,a/x,a/b/y}.log with two symbolic-link loops (b/up -> a, a/up2 -> runs)."""
    runs = tmp_path / "runs"
    (runs / "a" / "b").mkdir(parents=True)
    for i, rel in enumerate(("top.log", "a/x.log", "a/b/y.log")):
        (runs / rel).write_text("\n".join(synth_cubic_lines(conns=1, steps=5, seed=i)) + "\n")
    (runs / "a" / "b" / "up").symlink_to("..")
    (runs / "a" / "up2").symlink_to("../..")
    return runs


def test_a_quoted_doublestar_glob_does_not_follow_link_loops(tmp_path: Path) -> None:
    runs = _tree(tmp_path)
    want = sorted(str(runs / r) for r in ("a/b/y.log", "a/x.log", "top.log"))
    done = subprocess.run(  # a child, so that the glob that loops (today's) is stopped by the timeout
        [
            "python3",
            "-c",
            "import sys; from quicsm.traces.inputs import expand_inputs; "
            "print('\\n'.join(expand_inputs([sys.argv[1]])))",
            str(runs / "**" / "*.log"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == want
    assert sorted(expand_inputs([str(runs / "*" / "**" / "*.log")])) == want[:2]


def test_overlapping_inputs_are_read_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _tree(tmp_path)
    got = expand_inputs([str(runs), str(runs / "a" / "*.log"), str(runs / "a" / ".." / "top.log")])
    assert sorted(got) == sorted(str(runs / r) for r in ("a/b/y.log", "a/x.log", "top.log"))
    assert "2 input file(s) named more than once" in capsys.readouterr().err
    result = parse_inputs([str(runs), str(runs / "a" / "*.log")])
    ids = [t.id for t in result.traces]
    assert len(ids) == len(set(ids)) == 3


def test_files_from_dev_zero_and_endless_lines_stop_at_once(tmp_path: Path) -> None:
    from quicsm.traces.inputs import MAX_PATH_BYTES, read_file_list

    with pytest.raises(InputError, match="/dev/zero:1: not a list of inputs"):
        read_file_list("/dev/zero")
    long = tmp_path / "long.txt"
    long.write_bytes(b"a" * (MAX_PATH_BYTES * 3))
    with pytest.raises(InputError, match="long.txt:1: a line longer than 4096 bytes"):
        read_file_list(str(long))
    ok = tmp_path / "ok.txt"
    ok.write_bytes(b"a.log\n\n  b \xff.log \n")
    assert read_file_list(str(ok)) == ["a.log", "b \udcff.log"]


@pytest.mark.parametrize("opener", ["open_input", "open_binary", "read_file_list"])
def test_an_input_that_cannot_be_opened_is_said_one_way(tmp_path: Path, opener: str) -> None:
    """Opening a log, a qlog or a --files-from list: each condition in errors.reading's one wording."""
    from quicsm.traces import inputs

    loop = tmp_path / "loop.log"
    loop.symlink_to(loop)
    for path, said in (
        (tmp_path / "none.log", "no such file"),
        (tmp_path, "is a directory"),
        (loop, "cannot read (Too many levels of symbolic links)"),
    ):
        with pytest.raises(InputError) as err:
            getattr(inputs, opener)(str(path))
        assert str(err.value) == f"{path}: {said}"


def test_render_dev_zero_stops_at_once() -> None:
    from quicsm.inference.annotate import load_model

    with pytest.raises(InputError, match="/dev/zero: not a model JSON file"):
        load_model("/dev/zero")


def test_a_gzip_input_is_sniffed_from_the_inflate_that_reads_it_with_the_same_kind_and_bytes(tmp_path: Path) -> None:
    """open_input inflates a .gz head once, for its kind and for the reader: the kind is the one a separate
    inflate of the head gives (conftest.file_head), and the bytes and error are GzipReader's of the whole file,
    on good, multi-member, cut and bit-flipped files, small (read in one go) and larger than the head."""
    from quicsm.traces.inputs import open_input
    from quicsm.traces.readers import kind_of

    rng = random.Random(7)
    qlog = b'\x1e{"qlog_version":"0.3","qlog_format":"JSON-SEQ","trace":{}}\n' + b"".join(
        b'\x1e{"time":%d,"name":"recovery:metrics_updated","data":{"congestion_window":%d}}\n'
        % (i, rng.randrange(9999))
        for i in range(4000)
    )
    log = "".join(
        f"noise {rng.random()}\n" + format_line(conn="c", t_us=i, cc="cubic", to="A") + "\n" for i in range(3000)
    )
    seen = set()
    for n, text in enumerate([qlog, qlog * 40, log.encode(), b"", b"{}\n"]):
        z = gzip.compress(text, mtime=0)
        variants = [z, z + gzip.compress(b"QUICSM v=1\n", mtime=0), z[:11], z[: len(z) // 2], z[:-3]]
        for _ in range(12):
            flipped = bytearray(z)
            flipped[rng.randrange(min(len(z), 70000))] ^= 1 << rng.randrange(8)
            variants.append(bytes(flipped))
        for i, data in enumerate(variants):
            path = tmp_path / f"f{n}_{i}.sqlog.gz"
            path.write_bytes(data)
            kind, stream = open_input(str(path))
            with stream:
                assert kind == kind_of(file_head(str(path)), str(path))
                got, error = _read_all(stream)
            want, want_error = _read_all(GzipReader(io.BytesIO(data)) if data[:2] == b"\x1f\x8b" else io.BytesIO(data))
            assert got == want and repr(error) == repr(want_error)
            seen.add((kind, error is None, len(data) >= 1 << 16))
    assert {("sqlog", True, True), ("sqlog", False, True), ("sqlog", True, False), ("log", True, False)} <= seen


def _read_all(stream: Any) -> tuple[bytes, Exception | None]:
    out = bytearray()
    try:
        while part := stream.read(50000):
            out += part
    except (EOFError, gzip.BadGzipFile) as exc:
        return bytes(out), exc
    return bytes(out), None


def test_gzip_inputs_inflate_with_zlib_ng_as_with_the_stdlib_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """zlib-ng (a dependency) inflates; the stdlib zlib stands in where it is missing: the same bytes and the
    same error, message included, on good, cut, padded and bit-flipped files."""
    import zlib

    from quicsm import files

    assert files._inflate is not zlib and files._inflate.__name__.startswith("zlib_ng")
    rng = random.Random(11)
    texts = [
        b"".join(b'\x1e{"time":%d,"data":{"cwnd":%d}}\n' % (i, rng.randrange(99999)) for i in range(20000)),
        bytes(rng.randrange(256) for _ in range(30000)),
    ]
    cases = []
    for text in texts:
        z = gzip.compress(text, mtime=0)
        cases += [z, z[: len(z) // 2], z[:-3], z + b"junk", z + b"\x00" * 9 + z]
        for _ in range(150):
            flipped = bytearray(z)
            flipped[rng.randrange(len(z))] ^= 1 << rng.randrange(8)
            cases.append(bytes(flipped))
    fast = [_read_all(GzipReader(io.BytesIO(c))) for c in cases]
    monkeypatch.setattr(files, "_inflate", zlib)
    slow = [_read_all(GzipReader(io.BytesIO(c))) for c in cases]
    assert [(d, repr(e)) for d, e in fast] == [(d, repr(e)) for d, e in slow]
    assert sum(e is not None for _, e in fast) > 100 and sum(e is None for _, e in fast) >= 4
