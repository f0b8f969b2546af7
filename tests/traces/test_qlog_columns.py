"""The qlog column reader (quicsm/traces/qlog_columns.py) against the object reader it replaced
(tests/traces/qlog_oracle.py), on files made of tricky records, many files in one batch, documents of
any shape, and on the Parquet bytes; and its limits. Each test also counts the records the C scanner
decided itself, so that none passes by handing everything to the Python handler."""

from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quicsm.traces import parquet, qlog_scanner
from quicsm.traces.columnar import TraceColumns
from quicsm.traces.events import Trace, TraceMeta
from quicsm.traces.parquet import write_parquet
from quicsm.traces.qlog import QlogFile
from quicsm.traces.qlog_columns import QlogBatcher
from quicsm.traces.report import ParseReport
from tests.fuzz.mutate import load_seeds, mutate
from tests.traces import qlog_oracle
from tests.traces.test_qlog_oracle import SCANNERS, agree

META = TraceMeta()


def _python(files: list[tuple[str, bytes, str]], meta: TraceMeta = META) -> tuple[list[Trace], dict[str, object]]:
    report = ParseReport(keep=1 << 20)
    traces: list[Trace] = []
    for path, data, kind in files:
        read = {"qlog": qlog_oracle.read_qlog, "sqlog": qlog_oracle.read_sqlog}.get(kind, qlog_oracle.read_ndjson)
        traces += read(io.BytesIO(data), path, meta, report)
    return traces, report.to_json()


def _columns(
    files: list[tuple[str, bytes, str]], meta: TraceMeta = META, scanner: type | None = None, window: int | None = None
) -> tuple[list[TraceColumns], dict[str, object]]:
    report = ParseReport(keep=1 << 20)
    b = QlogBatcher(report, scanner=scanner) if window is None else QlogBatcher(report, scanner=scanner, window=window)
    batches: list[TraceColumns] = []
    for path, data, kind in files:
        batches += b.add(data, path, meta, kind) if window is None else list(b.read(io.BytesIO(data), path, meta, kind))
    batches += b.flush()
    return batches, report.to_json()


def _agree(files: list[tuple[str, bytes, str]], meta: TraceMeta = META) -> list[Trace]:
    """Many files in one batch: the oracle's traces (in file order) and report, by every scanner, read whole and streamed."""
    want, want_report = _python(files, meta)
    for scanner in SCANNERS:
        for window in (None, 251):
            batches, got_report = _columns(files, meta, scanner, window)
            got = [t for tc in batches for t in tc.traces()]
            assert got == want, (scanner, window)
            assert got_report == want_report, (scanner, window)
    return want


def _handed(files: list[tuple[str, bytes, str]], monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(files whose every record the C scanner decided but the header, files) over these files."""
    if not qlog_scanner.available():
        return len(files), len(files)
    calls: list[int] = []
    real = QlogFile.record

    def record(self: QlogFile, part: bytes, line: int, record_no: int) -> None:
        calls.append(1)
        real(self, part, line, record_no)

    monkeypatch.setattr(QlogFile, "record", record)
    decided = 0
    for path, data, kind in files:
        calls.clear()
        b = QlogBatcher(ParseReport())
        b.add(data, path, META, kind)
        decided += len(calls) <= 1
    monkeypatch.undo()
    return decided, len(files)


def _store(items: list[Trace] | list[TraceColumns], tmp: Path, name: str) -> bytes:
    from tests.traces.store_oracle import object_store

    if items and isinstance(items[0], Trace):
        object_store(items, str(tmp / name))  # type: ignore[arg-type]  # the frozen object writer
    else:
        write_parquet(items, str(tmp / name))  # type: ignore[arg-type]
    return (tmp / name).read_bytes()


def test_every_qlog_we_have_is_decided_by_the_c_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real files' records are the plain shape: the C scanner decides all but their headers."""
    from tests.traces.test_qlog_oracle import QLOGS, kind_of

    files = []
    for path in QLOGS:
        raw = Path(path).read_bytes()
        data = gzip.decompress(raw) if path.endswith(".gz") else raw
        if kind_of(data) in ("sqlog", "ndjson"):
            files.append((path, data, kind_of(data)))
    assert len(files) >= 10
    decided, n = _handed(files, monkeypatch)
    assert decided == n
    assert _agree(files)  # one batch, traces in file order


def _record(rng: random.Random) -> bytes:
    """One event record, mostly plain, sometimes in a shape the scanner must hand back."""
    num = rng.choice(
        ["0", "12", "12.5", "1e3", "1E-2", "-5", "1.0", "123456789012.125", "1e16", "1e400", '"7"', "null", "true"]
    )
    time = rng.choice(["12.345", "0", "7", "1.5e2", "-1", num])
    roll = rng.random()
    if roll < 0.35:
        name = rng.choice(
            [
                "recovery:congestion_state_updated",
                "quic:congestion_state_updated",
                "CONGESTION_STATE_UPDATED",
                "x:cc_state_update",
            ]
        )
        new = rng.choice(
            [
                '"slow_start"',
                '"congestion_avoidance"',
                '"recovery"',
                '"application_limited"',
                '"startup"',
                '"probe_bw"',
                '"ProbeBw.Up"',
                '"weird"',
                '"3"',
                '""',
                "null",
                "5",
                '"slow\\u005fstart"',
            ]
        )
        data = [f'"new":{new}']
        if rng.random() < 0.3:
            data.append('"trigger":' + rng.choice(['"loss"', '""', "5", "null", json.dumps("x" * 250)]))
        if rng.random() < 0.1:
            data.append('"old":"slow_start"')
        if rng.random() < 0.1:
            data.append(rng.choice(['"new":"recovery"', '"state":"recovery"', '"new_state":"recovery"']))
    elif roll < 0.7:
        name = rng.choice(["recovery:metrics_updated", "quic:recovery_metrics_updated", "METRIC_UPDATE"])
        keys = [
            "congestion_window",
            "cwnd",
            "bytes_in_flight",
            "ssthresh",
            "min_rtt",
            "smoothed_rtt",
            "pacing_rate",
            "other",
        ]
        vals = [
            "14600",
            "0",
            str(2**63 - 1),
            str(2**63),
            str(2**64 - 1),
            "12.5",
            "-1",
            "null",
            '"12"',
            "25.25",
            "1e2",
            "{}",
        ]
        data = [f'"{rng.choice(keys)}":{rng.choice(vals)}' for _ in range(rng.randint(0, 4))]
    else:
        name = rng.choice(["transport:packet_sent", "transport:packet_received", "recovery:loss_timer_updated"])
        data = [
            rng.choice(['"header":{"packet_number":5}', '"note":"metric"', '"a":[1,2,{"b":null}]', '"s":"\\u00e9"'])
        ]
    fields = [f'"time":{time}', f'"name":"{name}"', '"data":{' + ",".join(data) + "}"]
    if rng.random() < 0.1:
        fields.pop(rng.randrange(3))
    if rng.random() < 0.05:
        fields.append(rng.choice(['"category":"x"', '"time":3', '"Name":"y"']))
    rng.shuffle(fields) if rng.random() < 0.2 else None
    sep = rng.choice([",", ", ", " ,\t"])
    text = "{" + sep.join(fields) + "}"
    if rng.random() < 0.03:
        text = rng.choice(
            [
                "not json",
                "[1,2]",
                '{"time": 1,',
                "",
                '{"time":1,"name":"a:congestion_state_updated","data":{"new":"recovery"}}x',
            ]
        )
    return text.encode()


def _header(rng: random.Random, odcid: str) -> bytes:
    common = {"ODCID": odcid, "time_format": rng.choice(["relative"] * 8 + ["delta"])}
    trace: dict[str, object] = {"common_fields": common, "vantage_point": {"type": "server"}}
    if rng.random() < 0.2:
        trace["configuration"] = {"time_units": "us"}
    head: dict[str, object] = {
        "qlog_version": "0.3",
        "qlog_format": "JSON-SEQ",
        "title": rng.choice(["quic-go qlog", "x"]),
        "trace": trace,
    }
    if rng.random() < 0.2:
        head["code_version"] = "v1.2"
    if rng.random() < 0.05:
        return b'{"time":1,"name":"x:y"}'
    return json.dumps(head).encode()


def _file(rng: random.Random, i: int, plain: bool = False) -> tuple[str, bytes, str]:
    kind = rng.choice(["sqlog", "ndjson"])
    recs = [_header(rng, f"{i:04x}")] + [_record(rng) for _ in range(rng.randint(0, 12))]
    if plain:
        recs = [json.dumps({"qlog_version": "0.3", "trace": {"common_fields": {"ODCID": f"c{i}"}}}).encode()]
        recs += [
            b'{"time":%d.5,"name":"recovery:congestion_state_updated","data":{"new":"%s"}}' % (j, s)
            for j, s in enumerate([b"slow_start", b"congestion_avoidance"][: rng.randint(1, 2)])
        ]
        recs += [
            b'{"time":%d,"name":"recovery:metrics_updated","data":{"congestion_window":%d}}' % (j, j) for j in range(3)
        ]
        recs += [b'{"time":%d,"name":"transport:packet_sent","data":{}}' % (9 + i % 3)]
    if kind == "sqlog":
        data = b"".join(b"\x1e" + r + rng.choice([b"\n", b"", b" \n"]) for r in recs)
    else:
        data = b"\n".join(recs) + rng.choice([b"\n", b""])
    return f"h{i % 3}/{i:04x}_server.{kind}", data, kind


def test_files_of_tricky_records_are_read_as_the_python_reader_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(18)
    files = [_file(rng, i) for i in range(600)]
    decided, n = _handed(files, monkeypatch)
    assert 30 < decided < n  # the scanner decides many, hands back many
    traces = _agree(files)
    assert len(traces) > 100
    for i in range(0, 600, 97):  # and each alone
        _agree(files[i : i + 1])


def test_packet_record_times_are_read_as_float_reads_the_regex_match() -> None:
    """A packet-level record's time is qlog._TIME's match read by float(): the scanner reads a JSON number that is
    the whole match in one pass and leaves every other text (float()-only forms, broken ones) to the slow path.
    Each time ends a trace, so a wrong one moves its close."""
    texts = ["12.5", "0", "-0.0", "007", "1.", "1.e5", "00.5", "1e+5", "1E-2", "1e400", "-1e-400", "1.2.3", "1e"]
    texts += ["123456789012345678901234567890", "3.14159265358979323846", "9007199254740993", "1e22", "1e23", "-", "5-"]
    files = []
    for i, text in enumerate(texts):
        head = json.dumps({"qlog_version": "0.3", "trace": {"common_fields": {"ODCID": f"t{i}"}}}).encode()
        recs = [head, b'{"time":1,"name":"recovery:congestion_state_updated","data":{"new":"slow_start"}}']
        recs.append(b'{"time":%s,"name":"transport:packet_sent","data":{"header":{"packet_number":1}}}' % text.encode())
        files.append((f"t{i}.sqlog", b"".join(b"\x1e" + r + b"\n" for r in recs), "sqlog"))
    assert len(_agree(files)) == len(texts)


def test_metric_numbers_of_every_length_are_read_as_the_python_reader_reads_them() -> None:
    """Times, RTTs and windows whose digit runs fit 19 digits (read without a check per digit) or not (the careful
    loop), shorter than 8 (read 8 bytes at a time) or not, with leading zeros in the fraction, at 2^53 and past it: every scanner against the oracle."""
    times = ["0", "7", "0.000123456789012345678", "0.1234567890123456789", "0.12345678901234567891", "1.5"]
    times += ["1234567890.123456789", "12345678901234567890", "123456789.0123456789", "9007199254740993"]
    times += ["12345678901234.5", "0.0000000000000000001", "1e2", "67.503e-1", "99999999999999999999.9", "36.176372"]
    times += ["12345678", "1234567.7654321", "0.00000001", "98765432.12345678", "1.99999999", "9999999.9999999"]
    rtts = ["0", "36.176372", "0.00012345678", "67.503", "123456789.25", "1e2", "0.1234567890123"]
    windows = ["0", "14600", "1234567890123456789", str(2**63 - 1), str(2**64 - 1), "12345678", "9999999"]
    files = []
    for i, time in enumerate(times):
        head = json.dumps({"qlog_version": "0.3", "trace": {"common_fields": {"ODCID": f"n{i}"}}}).encode()
        recs = [head, b'{"time":1,"name":"recovery:congestion_state_updated","data":{"new":"slow_start"}}']
        for j, rtt in enumerate(rtts):
            data = f'"min_rtt":{rtt},"smoothed_rtt":{rtts[-1 - j]},"congestion_window":{windows[j % len(windows)]}'
            recs.append(b'{"time":%s,"name":"recovery:metrics_updated","data":{%s}}' % (time.encode(), data.encode()))
        files.append((f"n{i}.sqlog", b"".join(b"\x1e" + r + b"\n" for r in recs), "sqlog"))
    assert len(_agree(files)) == len(times)


@given(st.integers(0, 2**32))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_files_are_read_as_the_python_reader_reads_them(seed: int) -> None:
    rng = random.Random(seed)
    _agree([_file(rng, i) for i in range(rng.randint(1, 6))])


def _document(rng: random.Random, i: int) -> tuple[str, bytes, str]:
    """A JSON qlog document of tricky events: one to three traces, headers in varied places, dict and
    positional events, pretty-printed or on one line."""
    traces: list[object] = []
    for t in range(rng.randint(1, 3)):
        if rng.random() < 0.05:
            traces.append(rng.choice([5, "error", {"error": "x"}, {"events": 3}]))
            continue
        events: list[object] = []
        positional = rng.random() < 0.2
        for _ in range(rng.randint(0, 12)):
            try:
                ev = json.loads(_record(rng))
            except ValueError:
                continue
            if positional and isinstance(ev, dict):
                name = str(ev.get("name", ":"))
                cat, _, evn = name.rpartition(":")
                ev = [ev.get("time"), cat, evn, ev.get("data")]
            events.append(ev)
        trace: dict[str, object] = {}
        head = {
            "common_fields": {"ODCID": f"{i:04x}{t}", "time_format": rng.choice(["relative"] * 6 + ["delta"])},
            "vantage_point": {"name": rng.choice(["quic-go", "picoquic server", "x"]), "type": "server"},
        }
        if rng.random() < 0.3:
            head["configuration"] = {"time_units": "us", "code_version": "v9"}
        if positional:
            head["event_fields"] = ["relative_time", "category", "event", "data"]
        after = rng.random() < 0.3  # aioquic writes vantage_point after the events
        for k, v in head.items():
            if not (after and k == "vantage_point"):
                trace[k] = v
        trace["events"] = events
        if after:
            trace["vantage_point"] = head["vantage_point"]
        traces.append(trace)
    doc = {"qlog_version": "draft-00", "title": rng.choice(["picoquic", "x", "neqo"]), "traces": traces}
    text = json.dumps(doc, indent=rng.choice([None, 1, 4]))
    return f"d/{i}.qlog", text.encode(), "qlog"


def test_documents_of_tricky_events_are_read_as_the_python_reader_reads_them() -> None:
    rng = random.Random(7)
    files = [_document(rng, i) for i in range(150)]
    traces = _agree(files)
    assert len(traces) > 50
    for one in files[:40]:  # and each alone, in windows down to a few bytes
        agree(one[1], "qlog", windows=(None, 64, 5))


def test_mutated_qlogs_are_read_as_the_python_reader_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    seeds = load_seeds()
    rng = random.Random(24)
    small = [_file(rng, i, plain=True)[1] for i in range(20)]
    files = []
    for i in range(300):
        base = seeds.pick(rng, "sqlog") if i % 2 else rng.choice(small)
        data = mutate(base, rng, seeds, "sqlog")
        kind = "ndjson" if i % 3 == 0 else "sqlog"
        if kind == "ndjson":
            data = data.replace(b"\x1e", b"")
        files.append((f"m/{i}.{kind}", data, kind))
    assert _handed(files, monkeypatch)[0] > 30
    _agree(files)


@pytest.mark.parametrize("group", [97, 3])
def test_the_store_is_the_store_the_trace_objects_make(
    group: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row groups close where the object writer closes them (made small here: several per store; at 3
    rows some traces are longer than two groups, and their batches are cut in groups of 3), string
    dictionaries in order of first appearance: the same bytes."""
    monkeypatch.setattr(parquet, "ROWS_PER_GROUP", group)
    rng = random.Random(5)
    files = [_file(rng, i, plain=i % 5 != 0) for i in range(200)] + [_document(rng, i) for i in range(20)]
    rng.shuffle(files)
    want, _ = _python(files)
    for window in (None, 333):
        batches, _ = _columns(files, window=window)
        assert len(batches) > 3
        assert _store(batches, tmp_path, "a.parquet") == _store(want, tmp_path, "b.parquet")
    meta = TraceMeta(cc="bbr", labels={"k": "v"})
    want, _ = _python(files, meta)
    batches, _ = _columns(files, meta)
    assert _store(batches, tmp_path, "c.parquet") == _store(want, tmp_path, "d.parquet")


def test_a_bad_record_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    from quicsm.errors import ParseError
    from quicsm.traces.parse import read_inputs

    head = b'\x1e{"qlog_version":"0.3","trace":{"common_fields":{"ODCID":"c%d"}}}\n'
    state = b'\x1e{"time":1,"name":"recovery:congestion_state_updated","data":{"new":"slow_start"}}\n'
    metric = b'\x1e{"time":2,"name":"recovery:metrics_updated","data":{"congestion_window":%s}}\n'
    for i in range(4):
        (tmp_path / f"{i}.sqlog").write_bytes(head % i + state + metric % (b'"1"' if i == 2 else b"1"))
    report = ParseReport()
    got = [t for tc in read_inputs([str(tmp_path)], report=report) for t in tc.traces()]  # type: ignore[union-attr]
    assert [t.key for t in got] == ["c0", "c1", "c2", "c3"]
    assert [(i.path, i.line) for i in report.issues] == [(str(tmp_path / "2.sqlog"), 3)]
    assert "congestion_window is str '1', not a number" in report.issues[0].reason
    with pytest.raises(ParseError) as err:
        list(read_inputs([str(tmp_path)], report=ParseReport(strict=True)))
    assert f"{tmp_path / '2.sqlog'}:3" in str(err.value)


@pytest.mark.parametrize("seed", range(40))
def test_time_order_is_lexsort(seed: int) -> None:
    """The batch's row order (qlog_columns._time_order) is the stable lexsort by trace, class, time, whether
    a trace's event times never go back (the fast path) or do (ties, equal times and reversals included)."""
    import numpy as np

    from quicsm.traces.qlog_columns import _time_order

    rng = random.Random(seed)
    t, cls, tr = [], [], []
    for trace in range(rng.randint(1, 6)):
        n = rng.randint(0, 30)
        times = sorted(rng.randint(0, 20) for _ in range(n))
        if seed % 2 and n > 1:  # every other seed: some times go back
            i = rng.randrange(n - 1)
            times[i], times[i + 1] = times[i + 1] + 1, times[i]
        t += times
        cls += [1] * n
        tr += [trace] * n
        for c in (0, 2):  # placeholders after the events, times anywhere
            if rng.random() < 0.6:
                t.append(rng.randint(0, 20))
                cls.append(c)
                tr.append(trace)
    t_us, c, trs = np.array(t, np.int64), np.array(cls, np.int8), np.array(tr, np.int32)
    assert _time_order(t_us, c, trs).tolist() == np.lexsort((t_us, c, trs)).tolist()


def _big(rng: random.Random, i: int) -> tuple[str, bytes, str]:
    """A file of tricky records past the sniffed head (64 KiB), so it is opened as a plain file."""
    kind = rng.choice(["sqlog", "ndjson"])
    recs = [_header(rng, f"{i:04x}")]
    while sum(map(len, recs)) < 70_000 + rng.randint(0, 200_000):
        recs.append(_record(rng))
    if kind == "sqlog":
        data = b"".join(b"\x1e" + r + rng.choice([b"\n", b"", b" \n"]) for r in recs)
    else:
        data = b"\n".join(recs) + rng.choice([b"\n", b""])
    return f"{i:04x}_server.{kind}", data[: rng.choice([len(data), len(data) - rng.randint(1, 300)])], kind


def _big_document(rng: random.Random, i: int) -> tuple[str, bytes, str]:
    ev = b'{"time":%d,"name":"recovery:metrics_updated","data":{"congestion_window":%d,"smoothed_rtt":%d.25}}'
    events = b",\n".join(ev % (j, 1000 + j, j % 50) for j in range(1200 + rng.randint(0, 3000)))
    data = b'{"qlog_version":"0.3","traces":[{"common_fields":{"ODCID":"d%d"},"events":[%s]}]}' % (i, events)
    return f"{i:04x}.qlog", data[: rng.choice([len(data), len(data) - rng.randint(1, 300)])], "qlog"


@pytest.mark.parametrize("seed", range(6))
def test_plain_files_under_a_window_read_whole_as_streamed(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain file smaller than a window is read with one read() (QlogBatcher.add): the same traces and
    the same problems (file, line, reason) as the windowed read of the same files, through read_inputs."""
    from quicsm.errors import ParseError
    from quicsm.traces import qlog_columns
    from quicsm.traces.parse import read_inputs

    rng = random.Random(seed)
    files = [_big(rng, i) for i in range(5)] + [_big_document(rng, 5)]
    paths = []
    for path, data, _ in files:
        (tmp_path / path).write_bytes(data)
        paths.append(str(tmp_path / path))
    whole_calls: list[str] = []
    add = QlogBatcher.add

    def counted(self: QlogBatcher, data: bytes, path: str, *args: object) -> list[TraceColumns]:
        whole_calls.append(path)
        return add(self, data, path, *args)  # type: ignore[arg-type]

    def read(small: int) -> tuple[list[Trace], dict[str, object], str]:
        monkeypatch.setattr(qlog_columns, "MAP_MIN", small)
        report = ParseReport(keep=1 << 20)
        got = [t for tc in read_inputs(paths, report=report) for t in tc.traces()]  # type: ignore[union-attr]
        with pytest.raises(ParseError) as err:
            list(read_inputs(paths, report=ParseReport(strict=True)))
        return got, report.to_json(), str(err.value)

    monkeypatch.setattr(QlogBatcher, "add", counted)
    streamed = read(0)  # every file through the window loop
    assert whole_calls == []
    whole = read(1 << 20)
    assert whole_calls == paths + paths[:1]
    assert whole == streamed
    assert whole[1]["issues"]


@pytest.mark.skipif(not qlog_scanner.available(), reason="the C scanner is not built")
@pytest.mark.parametrize("states", ["auto", "metrics"])
def test_a_read_without_metrics_stores_them_only_while_they_may_give_the_states(states: str) -> None:
    """``infer`` reads without metrics: the C scanner then stores none for a trace whose state events give
    its states (72 of a row's 97 bytes), and all of a trace's while its states may be read from them; the
    batch says them unknown, as a store read without them does."""
    from quicsm.traces.columnar import NULL

    data = gzip.decompress((Path(__file__).parents[1] / "data" / "quic-go-v0.65" / "server.sqlog.gz").read_bytes())
    b = QlogBatcher(ParseReport(), metrics=False)
    b.sc.new_file()
    b.sc.header, b.sc.states = 1, {"auto": 1, "metrics": 2}[states]  # (the header record: to the handler, here none)
    b.sc.records(data, 0, len(data), 0x1E, True, lambda *a: None)
    rows = b.sc.rows
    assert rows > 500
    if states == "auto":  # the state events give the states
        with pytest.raises(RuntimeError, match="metrics were not kept"):
            b.sc.trace()
    else:
        t, _, metrics, rtt, _, _ = b.sc.trace()
        assert (len(t), len(metrics), len(rtt)) == (8 * rows, 56 * rows, 16 * rows)
    t, _, _, _, _, _, metrics, rtt = b.sc.take()
    assert (len(t), len(metrics), len(rtt)) == (8 * rows, 0, 0)
    bare = QlogBatcher(ParseReport(), metrics=False)
    (batch,) = bare.add(data, "x.sqlog", TraceMeta(states=states), "sqlog") + bare.flush()
    assert (batch.events.metrics == NULL).all() and len(batch.events.metrics) == len(batch.events.t_us)
