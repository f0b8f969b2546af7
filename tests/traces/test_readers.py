"""The reader registry (quicsm.traces.readers): every input kind has one reader module, every reader
yields columns, each input is opened once, and a new format is one module (here: registered by a test)."""

from __future__ import annotations

import builtins
import gzip
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from quicsm.traces import parse_inputs, readers
from quicsm.traces.columnar import TraceColumns, columns_of
from quicsm.traces.events import Trace, TraceEvent
from quicsm.traces.parse import read_inputs
from quicsm.traces.store import write_traces

ROOT = Path(__file__).resolve().parents[2]
FIG13 = ROOT / "traces" / "fig13" / "desktop"
QLOG = sorted((ROOT / "tests" / "data" / "qlog").rglob("*.qlog*"))[0]


def test_every_kind_has_one_reader_module() -> None:
    specs = {
        kind: readers.spec_for(kind) for kind in ("log", "qlog", "sqlog", "ndjson", "traces-jsonl", "traces-parquet")
    }
    assert {s.name for s in specs.values()} == {"log", "qlog", "jsonl", "parquet"}
    assert specs["qlog"] is specs["sqlog"] is specs["ndjson"]
    with pytest.raises(Exception, match="no reader for inputs of kind 'pcap'"):
        readers.spec_for("pcap")


def _stores(tmp_path: Path) -> list[str]:
    traces = parse_inputs([str(FIG13)]).traces
    out = []
    for name in ("a.jsonl", "b.jsonl.gz", "c.parquet"):
        write_traces(traces, str(tmp_path / name))
        out.append(str(tmp_path / name))
    return out


def test_every_kind_comes_as_columns_and_each_input_is_opened_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = [*sorted(str(p) for p in FIG13.rglob("server.log*")), str(QLOG), *_stores(tmp_path)]
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def counting_open(file, *a, **kw):  # type: ignore[no-untyped-def]
        if isinstance(file, str) and file in inputs:
            opened.append(file)
        return real_open(file, *a, **kw)

    def counting_os_open(path, *a, **kw):  # type: ignore[no-untyped-def]
        if isinstance(path, str) and path in inputs:
            opened.append(path)
        return real_os_open(path, *a, **kw)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(os, "open", counting_os_open)
    items = list(read_inputs(inputs))
    monkeypatch.undo()
    assert items and all(type(i) is TraceColumns for i in items)
    assert sorted(opened) == sorted(inputs)  # once each: sniffed and read from one open
    traces = [t for tc in items for t in tc.traces()]
    assert len(traces) == 11 + len(parse_inputs([str(QLOG)]).traces) + 3 * 11


def test_a_trace_file_gives_the_traces_that_were_written(tmp_path: Path) -> None:
    want = parse_inputs([str(FIG13)]).traces
    for path in _stores(tmp_path):
        got = parse_inputs([path]).traces
        assert [t.events for t in got] == [t.events for t in want]
        assert [t.id for t in got] == [t.id for t in want] and got[0].labels == want[0].labels


def test_objects_as_columns_round_trip() -> None:
    traces = parse_inputs([str(FIG13), str(QLOG)]).traces
    odd = Trace("odd", "cubic", [TraceEvent(1, "", "metrics", cwnd=5), TraceEvent(2, "SlowStart", prev="", trigger="")])
    back = list(columns_of([*traces, Trace("empty", "reno", []), odd]).traces())
    assert back == [*traces, odd]  # empty traces are left out, as every reader leaves them out


# -- a new log format, registered as its own module would register it ------------------------------


class _CsvReader:
    """``t_us,conn,from,to`` lines: one trace per conn, one batch per file."""

    def __init__(self, ctx: readers.ReadContext) -> None:
        self.ctx = ctx

    def read(self, stream: BinaryIO, src: readers.Source) -> Iterator[TraceColumns]:
        by_conn: dict[str, list[TraceEvent]] = {}
        for line in stream.read().decode().splitlines()[1:]:
            t, conn, frm, to = line.split(",")
            by_conn.setdefault(conn, []).append(TraceEvent(int(t), to, prev=frm))
            self.ctx.report.records += 1
        traces = [Trace(f"{src.scope}:{c}", "reno", ev, c, sources=(src.path,)) for c, ev in by_conn.items()]
        self.ctx.report.traces += len(traces)
        yield columns_of([src.meta.apply(t) for t in traces])

    def flush(self) -> Iterator[TraceColumns]:
        return iter(())


def _register_csv(monkeypatch: pytest.MonkeyPatch) -> None:
    """The csv-states kind registered in a copy of the registry's table (monkeypatch swaps it back)."""
    monkeypatch.setattr(readers._SPECS, "items", dict(readers._SPECS.load()))
    readers.register(
        readers.ReaderSpec(
            "csv-states",
            ("csv-states",),
            _CsvReader,
            suffixes=(".conns.csv",),
            sniff=lambda head: head.startswith(b"t_us,conn,from,to"),
        )
    )


@pytest.fixture
def csv_format(monkeypatch: pytest.MonkeyPatch) -> None:
    _register_csv(monkeypatch)


CSV = "t_us,conn,from,to\n10,a,Init,SlowStart\n20,b,Init,SlowStart\n30,a,SlowStart,CongestionAvoidance\n"


def test_a_new_format_is_one_registered_reader(csv_format: None, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "x.conns.csv").write_text(CSV)  # by name (a directory's files of the new kind are read)
    with gzip.open(run / "y.txt.gz", "wt") as fh:  # by content, gzipped, under another name
        fh.write(CSV)
    (run / "meta.json").write_text('{"labels": {"client": "mobile"}}')
    result = parse_inputs([str(run)])
    assert [t.states() for t in result.traces] == [["SlowStart", "CongestionAvoidance"], ["SlowStart"]] * 2
    assert {t.labels["client"] for t in result.traces} == {"mobile"} and result.report.files == 2
    assert readers.kind_of(b"t_us,conn,from,to\n", "z.log") == "csv-states"
    assert readers.name_kind("z.conns.csv.gz") == "csv-states" and readers.name_kind("z.log") == "log"


def test_a_reader_registered_for_a_test_is_gone_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The added kinds are kept between files (asked twice a file); a table swapped back, as a fixture
    does at its end, must not leave its kind behind."""
    head = b"t_us,conn,from,to\n"
    with monkeypatch.context() as m:
        _register_csv(m)
        assert readers.kind_of(head, "z.log") == "csv-states" and readers.name_kind("z.conns.csv") == "csv-states"
    assert readers.kind_of(head, "z.log") == "log" and readers.name_kind("z.conns.csv.gz") == "log"
    assert all(s.name != "csv-states" for s in readers._added())


def test_stdin_and_urls_keep_their_kinds_by_name() -> None:
    assert readers.name_kind("-") == "log" and readers.name_kind("s3://b/x.sqlog.gz") == "sqlog"
    assert readers.kind_of(b"", "x.parquet") == "traces-parquet"
    assert readers.kind_of(io.BytesIO(b"\x1e{}").getvalue(), "x.txt") == "sqlog"


QUICHE = Path(__file__).parents[1] / "data" / "qlog" / "quiche-0.30.0-cubic" / "cubic.sqlog.gz"


def test_a_plain_qlog_under_its_readers_size_comes_whole_and_reads_as_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain qlog of 64 KB to 1 MiB comes to its reader read whole (one more read after the sniffed
    head); a text log of that size, a larger qlog and a file that grew after its size was taken come as
    streams from their first byte; the traces are those of the streamed file."""
    from quicsm.traces import inputs
    from quicsm.traces.logscan import MAP_MIN
    from quicsm.traces.sniff import HEAD_BYTES

    text = gzip.decompress(QUICHE.read_bytes())
    assert len(text) > MAP_MIN
    cut = text.index(b"\n", 600_000) + 1  # a real qlog's first records, cut where one ends
    part, full, log = tmp_path / "part.sqlog", tmp_path / "full.sqlog", tmp_path / "server.log"
    part.write_bytes(text[:cut])
    full.write_bytes(text)
    log.write_bytes(b"".join(b"noise %d QUICSM v=1 conn=c t_us=%d cc=cubic to=A\n" % (i, i) for i in range(9000)))
    assert HEAD_BYTES < log.stat().st_size < MAP_MIN
    for path, want_whole in ((part, True), (full, False), (log, False)):
        kind, stream = inputs.open_input(str(path))
        with stream:
            assert (type(stream) is io.BytesIO) is want_whole, path
            assert stream.read() == path.read_bytes()
    real_fstat = os.fstat

    def shrunk(fd: int) -> os.stat_result:  # the size taken before the file grew by a record
        st = list(real_fstat(fd))
        st[6] -= 1000
        return os.stat_result(st)

    monkeypatch.setattr(os, "fstat", shrunk)
    kind, stream = inputs.open_input(str(part))
    monkeypatch.undo()
    with stream:
        assert type(stream) is not io.BytesIO and stream.read() == part.read_bytes()
    whole = parse_inputs([str(part)], dask="off")
    streamed_spec = readers.ReaderSpec("qlog", ("qlog", "sqlog", "ndjson"), readers.spec_for("sqlog").reader)
    monkeypatch.setattr(inputs, "spec_for", lambda kind: streamed_spec)
    streamed = parse_inputs([str(part)], dask="off")
    assert whole.traces and whole.traces == streamed.traces
    assert whole.report.records == streamed.report.records > 1000
