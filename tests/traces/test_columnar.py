"""The columnar path (C scanner -> NumPy columns -> traces cut by array operations) against the object path.

The object path (scan_contract + TraceBuilder) is the reference: for every bundled real log and for a
crafted one with every rule the builder has, the columnar path must give the same traces (ids, order,
events) and the same report, whatever the batch size; and the summaries inference learns from must match.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import input_kind

from quicsm.files import open_binary
from quicsm.traces import columnar
from quicsm.traces.contract import TAG_BYTES, format_line
from quicsm.traces.events import StateView, Trace, TraceEvent, TraceMeta
from quicsm.traces.inputs import FileBatch
from quicsm.traces.parse import Overrides
from quicsm.traces.report import ParseReport
from quicsm.traces.summary import Summary, summarize_traces, summary_task
from tests.traces.oracle import TraceBuilder, column_batches, oracle_visits, scan_contract
from tests.traces.store_oracle import object_store

ROOT = Path(__file__).resolve().parents[2]
LOGS = sorted(
    str(p)
    for base in (ROOT / "traces", ROOT / "tests" / "data")
    for p in base.rglob("*.log*")
    if input_kind(str(p)) == "log"
)
META = TraceMeta(implementation="quic-go", version="v1", labels={"client": "desktop"})
VIEWS = (StateView(), StateView(phases=False), StateView(recovery=True))


def summarize_file(
    path: str,
    scope: str,
    view: StateView,
    labels: dict[str, str],
    implementation: str | None = None,
    version: str | None = None,
    where: dict[str, str] | None = None,
) -> Summary:
    """One file reduced as a Dask task reduces its batch."""
    over = Overrides(labels, implementation, version)
    return summary_task(FileBatch((path,), (scope,)), view=view, over=over, strict=False, where=where)


pytestmark = pytest.mark.skipif(not columnar.available(), reason="needs the C extension quicsm.traces._scan")


def object_path(data: bytes) -> tuple[list, dict]:
    report = ParseReport(keep=1 << 20)
    builder = TraceBuilder("x.log", "s", META, report)
    out = []
    for line, rec in scan_contract(io.BytesIO(data), "x.log", report):
        out += builder.feed(line, rec)
    out += builder.finish()
    return out, report.to_json()


def columnar_path(data: bytes, batch_rows: int, chunk: int | None = None) -> tuple[list, dict]:
    report = ParseReport(keep=1 << 20)
    batches = column_batches(io.BytesIO(data), "x.log", "s", META, report, batch_rows=batch_rows, chunk=chunk)
    return [t for b in batches for t in b.traces()], report.to_json()


def crafted() -> bytes:
    """Every builder rule: reused keys (from=Init restarts), ev=close, updates and metrics without a state,
    timestamps going backwards, a phase, BBR recovery, unknown fields, malformed and non-UTF-8 lines, noise."""
    lines = [
        "[1122/143015.1:INFO:x.cc(1)] noise line",
        format_line(conn="a", t_us=10, cc="cubic", frm="Init", to="SlowStart", cwnd=10),
        format_line(conn="b", t_us=5, cc="bbr", frm="Init", to="Startup", trigger="ack"),
        "QUICSM v=1 conn=a t_us=12 cc=cubic ev=update cwnd=20",
        format_line(conn="a", t_us=30, cc="cubic", frm="SlowStart", to="Recovery"),
        "QUICSM v=1 conn=b t_us=4 cc=bbr from=Startup to=ProbeBw.Up recovery=Conservation",
        "QUICSM v=1 conn=a t_us=25 cc=cubic ev=metrics srtt_us=900",
        "QUICSM v=1 conn=a t_us=oops cc=cubic to=SlowStart",
        "QUICSM v=1 conn=b cc=bbr t_us=40 to=Drain from=ProbeBw.Up weird=1",
        "QUICSM v=1 conn=a t_us=40 cc=cubic ev=close",
        format_line(conn="a", t_us=50, cc="cubic", to="SlowStart"),
        format_line(conn="a", t_us=60, cc="cubic", frm="Init", to="SlowStart"),
        "QUICSM v=1 conn=c t_us=1 cc=reno ev=update",
        "QUICSM v=1 conn=\xff t_us=1 cc=reno to=SlowStart",
        format_line(conn="b", t_us=70, cc="bbr", frm="Drain", to="ProbeRtt", cwnd=4, ssthresh=2**63 - 1),
        format_line(conn="a", t_us=55, cc="cubic", frm="SlowStart", to="CongestionAvoidance"),
        format_line(conn="b", t_us=71, cc="bbr", frm="Init", to="Startup"),
        format_line(conn="d", t_us=80, cc="reno", frm="SlowStart", to="Recovery"),  # changes only: from is a stay
        format_line(conn="e", t_us=81, cc="reno", frm="Init", to="SlowStart"),
        format_line(conn="e", t_us=90, cc="reno", frm="SlowStart", to="Init"),  # a reset: Init is a stay
        format_line(conn="e", t_us=95, cc="reno", frm="Init", to="SlowStart"),
    ]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff")


@pytest.mark.parametrize("batch_rows", [1, 2, 5, columnar.BATCH_ROWS])
def test_crafted_log_gives_the_object_paths_traces_and_report(batch_rows: int) -> None:
    data = crafted()
    expected = object_path(data)
    traces, report = expected
    assert len(traces) >= 6 and report["issues_total"] >= 4  # the log exercises restarts, closes, problems
    assert any("#2" in t.id for t in traces) and any(e.kind == "close" for t in traces for e in t.events)
    assert columnar_path(data, batch_rows) == expected
    assert columnar_path(data, batch_rows, chunk=64) == expected


@pytest.mark.parametrize("path", LOGS, ids=lambda p: Path(p).relative_to(ROOT).as_posix())
def test_bundled_logs_give_the_object_paths_traces(path: str) -> None:
    with open_binary(path) as fh:
        data = fh.read()
    expected = object_path(data)
    for batch_rows in (7, columnar.BATCH_ROWS):
        assert columnar_path(data, batch_rows) == expected


def test_bundled_logs_are_many_and_real() -> None:
    assert len(LOGS) >= 50
    assert sum(len(object_path(open_binary(p).read())[0]) for p in LOGS[:20]) >= 20


@pytest.mark.parametrize("view", VIEWS, ids=str)
def test_stays_from_columns_equal_trace_visits(view: StateView) -> None:
    for data in [crafted()] + [open_binary(p).read() for p in LOGS[::5]]:
        traces, _ = object_path(data)
        report = ParseReport()
        for tc in column_batches(io.BytesIO(data), "x.log", "s", META, report, batch_rows=3):
            stays = columnar.stay_sequences(tc, view)
            objs = list(tc.traces())
            want = [oracle_visits(t, view) for t in objs]
            assert [t.visits(view) for t in objs] == want
            assert stays.states == [tuple(v.state for v in w) for w in want]
            assert stays.durations_us == [[v.duration_us for v in w] for w in want]
            assert stays.events == [len(t.events) for t in objs]
        assert traces  # the comparison ran on something


def _odd_trace(rng: np.random.Generator, i: int) -> Trace:
    """A trace object no reader makes: empty or absent ``from``, resets into Init, updates, metrics
    and closes between transitions, equal times, recovery sub-states."""
    states = ["Init", "SlowStart", "CongestionAvoidance", "Recovery", "ProbeBW:cruise", ""]
    events, t = [], 0
    for _ in range(int(rng.integers(1, 9))):
        t += int(rng.integers(0, 3))
        kind = ("transition", "transition", "update", "metrics", "close")[int(rng.integers(5))]
        prev = (None, "", *states)[int(rng.integers(len(states) + 2))]
        rec = (None, "fast")[int(rng.integers(2))]
        events.append(TraceEvent(t, states[int(rng.integers(len(states)))], kind, prev, cwnd=t or None, recovery=rec))
    return Trace(f"t{i}", "cubic", events, key=f"k{i}")


@pytest.mark.parametrize("view", VIEWS, ids=str)
def test_the_one_stays_rule_holds_for_trace_objects_of_any_shape(view: StateView) -> None:
    rng = np.random.default_rng(7)
    traces = [_odd_trace(rng, i) for i in range(400)]
    want = [oracle_visits(t, view) for t in traces]
    assert [t.visits(view) for t in traces] == want
    stays = columnar.stay_sequences(columnar.columns_of(traces), view)
    assert stays.states == [tuple(v.state for v in w) for w in want]
    assert stays.durations_us == [[v.duration_us for v in w] for w in want]
    assert sum(len(w) > 1 for w in want) > 100  # many traces had several stays


def test_file_summary_from_columns_equals_the_object_summary(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(crafted() + open_binary(LOGS[0]).read())
    traces, _ = object_path(log.read_bytes())
    for view in VIEWS:
        got = summarize_file(str(log), "s", view, dict(META.labels), META.implementation, META.version)
        assert not hasattr(got, "raise_"), got
        want = summarize_traces([t for t in traces if t.events], view)
        assert list(got.sequences) == list(want.sequences)  # same sequences, first-appearance order
        assert {k: (v.count, v.durations_us, v.events) for k, v in got.sequences.items()} == {
            k: (v.count, v.durations_us, v.events) for k, v in want.sequences.items()
        }
        assert got.traces == want.traces and got.transitions and got.ccs == want.ccs


def _cli(args: list[str]) -> tuple[int, str]:
    from click.testing import CliRunner

    from quicsm.cli.main import cli

    result = CliRunner().invoke(cli, args)
    return result.exit_code, result.output


def test_parse_to_parquet_streams_columns_and_reads_back_the_object_paths_traces(tmp_path: Path) -> None:
    from quicsm.traces.store import read_traces

    logs = [str(tmp_path / "a.log"), LOGS[0], LOGS[-1]]
    Path(logs[0]).write_bytes(crafted())
    code, out = _cli(["parse", *logs, "-q", "--label", "client=desktop", "-o", str(tmp_path / "x.parquet")])
    assert code == 0, out
    code, out = _cli(["parse", *logs, "-q", "--label", "client=desktop", "-o", str(tmp_path / "x.jsonl")])
    assert code == 0, out
    columns, objects = read_traces(str(tmp_path / "x.parquet")), read_traces(str(tmp_path / "x.jsonl"))
    assert len(columns) > 5 and columns == objects
    assert {t.labels["client"] for t in columns} == {"desktop"}


def test_parse_to_parquet_where_and_errors_leave_no_half_file(tmp_path: Path) -> None:
    from quicsm.traces.store import read_traces

    log = tmp_path / "a.log"
    log.write_bytes(crafted())
    out = tmp_path / "x.parquet"
    assert _cli(["parse", str(log), "-q", "--where", "cc=bbr", "-o", str(out)])[0] == 0
    kept = read_traces(str(out))
    assert kept and {t.cc for t in kept} == {"bbr"}
    out.unlink()
    code, text = _cli(["parse", str(log), "-q", "--where", "cc=nope", "-o", str(out)])
    assert code != 0 and "no trace matches" in text and not out.exists()
    noise = tmp_path / "noise.log"
    noise.write_text("just noise\nQUICSM v=1 broken\n")
    code, text = _cli(["parse", str(noise), "-q", "-o", str(out)])
    assert code != 0 and "no state transitions" in text and not out.exists()
    code, text = _cli(["parse", str(log), "--strict", "-o", str(out)])  # first problem in line order
    assert code != 0 and ":6: timestamp goes backwards" in text and not out.exists()


def test_parquet_store_read_as_columns_equals_the_object_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from quicsm.traces import parquet
    from quicsm.traces.events import Trace

    traces, _ = object_path(crafted() + open_binary(LOGS[0]).read())
    assert any(e.extra for t in traces for e in t.events) and any(e.recovery for t in traces for e in t.events)
    monkeypatch.setattr(parquet, "ROWS_PER_GROUP", 5)  # traces split across row groups
    store = str(tmp_path / "x.parquet")
    object_store([*traces, Trace(id="empty", cc="cubic", events=[])], store)  # as older quicsm wrote it
    got = [t for tc in parquet.read_parquet_columns(store) for t in tc.traces()]
    assert got == [t for t in parquet.read_parquet(store) if t.events] == traces


def test_summary_of_a_store_equals_the_summary_of_its_log(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(crafted() + open_binary(LOGS[0]).read())
    store = tmp_path / "x.parquet"
    assert _cli(["parse", str(log), "-q", "-o", str(store)])[0] == 0
    for view in VIEWS:
        a = summarize_file(str(log), "x.log", view, {"client": "mobile"})
        b = summarize_file(str(store), "x.parquet", view, {"client": "mobile"})
        assert not hasattr(a, "raise_") and not hasattr(b, "raise_")
        assert list(a.sequences) == list(b.sequences) and a.traces == b.traces > 5
        assert [(s.count, s.durations_us, s.events) for s in a.sequences.values()] == [
            (s.count, s.durations_us, s.events) for s in b.sequences.values()
        ]
        assert a.describe() == b.describe() and b.describe()["labels"] == {"client": "mobile"}


def test_store_read_for_summaries_skips_metrics_but_keeps_the_sequences(tmp_path: Path) -> None:
    from quicsm.traces import parquet

    traces, _ = object_path(crafted() + open_binary(LOGS[0]).read())
    store = str(tmp_path / "x.parquet")
    parquet.write_parquet(parquet.object_batches(traces), store)
    full = [t for tc in parquet.read_parquet_columns(store) for t in tc.traces()]
    lean = [t for tc in parquet.read_parquet_columns(store, metrics=False) for t in tc.traces()]
    assert full == traces
    assert [(t.id, t.visits()) for t in lean] == [(t.id, t.visits()) for t in traces]
    assert all(e.cwnd is None and e.trigger is None and not e.extra for t in lean for e in t.events)
    assert any(e.cwnd is not None for t in full for e in t.events)


def test_v1_store_with_a_forged_trace_meta_is_refused_not_misaligned(tmp_path: Path) -> None:
    """A v1 store's metadata text holding two objects must not shift the traces' metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from quicsm.errors import InputError
    from quicsm.traces import parquet

    store = str(tmp_path / "x.parquet")
    table = pq.read_table(Path(__file__).parents[1] / "data" / "store" / "odd-v1.parquet")
    meta = table.column("trace_meta").combine_chunks()
    texts = meta.dictionary.to_pylist()
    texts[0] = texts[0] + "," + texts[0]
    forged = pa.DictionaryArray.from_arrays(meta.indices, pa.array(texts))
    table = table.set_column(table.schema.get_field_index("trace_meta"), table.schema.field("trace_meta"), forged)
    pq.write_table(table, store)
    with pytest.raises(InputError, match="bad Parquet trace file"):
        list(parquet.read_parquet_columns(store))


@pytest.mark.parametrize(
    ("column", "reason"),
    [
        ("trace", "a row without trace"),
        ("t_us", "a row without t_us"),
        ("kind", "a row without kind"),
        ("state", "an event without a state"),
    ],
)
def test_store_with_a_null_where_every_row_has_a_value_is_refused_by_both_readers(
    tmp_path: Path, column: str, reason: str
) -> None:
    """Both readers used to invent values (entry 0's metadata, a time of 0, an empty state) or disagree."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from quicsm.errors import InputError
    from quicsm.traces import parquet

    traces, _ = object_path(crafted())
    store = str(tmp_path / "x.parquet")
    parquet.write_parquet(parquet.object_batches(traces), store)
    table = pq.read_table(store).combine_chunks()
    col = table.column(column).chunk(0)
    nulls = np.zeros(len(col), bool)
    nulls[1] = True
    if pa.types.is_dictionary(col.type):
        indices = pa.array(col.indices.to_numpy(zero_copy_only=False), col.type.index_type, mask=nulls)
        holed = pa.DictionaryArray.from_arrays(indices, col.dictionary)
    else:
        holed = pa.array(col.to_numpy(zero_copy_only=False), col.type, mask=nulls)
    table = table.set_column(table.schema.get_field_index(column), table.schema.field(column), holed)
    pq.write_table(table, store)  # the schema's metadata (the traces') kept
    for read in (parquet.read_parquet_columns, parquet.read_parquet):
        with pytest.raises(InputError, match=reason):
            list(read(store))


@pytest.mark.parametrize("group_rows", [1, 3, 7])
def test_store_whose_row_groups_split_traces_reads_back_whole_traces(tmp_path: Path, group_rows: int) -> None:
    """quicsm ends row groups at trace boundaries; stores rewritten by other tools may not."""
    import pyarrow.parquet as pq

    from quicsm.traces import parquet

    traces, _ = object_path(crafted() + open_binary(LOGS[0]).read())
    store = str(tmp_path / "x.parquet")
    parquet.write_parquet(parquet.object_batches(traces), store)
    pq.write_table(pq.read_table(store), store, row_group_size=group_rows)
    assert pq.ParquetFile(store).num_row_groups > 1
    assert [t for tc in parquet.read_parquet_columns(store) for t in tc.traces()] == traces
    lean = [t for tc in parquet.read_parquet_columns(store, metrics=False) for t in tc.traces()]
    assert [t.visits() for t in lean] == [t.visits() for t in traces]


@pytest.mark.parametrize("where", [{"cc": "bbr"}, {"cc": "cubic"}, {"cc": "nope"}, {"client": "desktop"}])
def test_file_summary_with_a_selector_equals_the_object_summary(tmp_path: Path, where: dict[str, str]) -> None:
    """--where on the columnar path: the kept traces' sequences and metadata, transitions from all."""
    from quicsm.traces.select import trace_matches

    log = tmp_path / "x.log"
    log.write_bytes(crafted() + open_binary(LOGS[0]).read())
    traces, _ = object_path(log.read_bytes())
    store = tmp_path / "x.parquet"
    assert _cli(["parse", str(log), "-q", "-o", str(store)])[0] == 0
    for path in (log, store):
        got = summarize_file(str(path), "s", StateView(), dict(META.labels), META.implementation, META.version, where)
        assert not hasattr(got, "raise_"), got
        kept = [t for t in traces if t.events and trace_matches(t, where)]
        want = summarize_traces(kept)
        assert [(k, v.count, v.durations_us, v.events) for k, v in got.sequences.items()] == [
            (k, v.count, v.durations_us, v.events) for k, v in want.sequences.items()
        ]
        assert got.traces == len(kept) and got.transitions  # transitions are looked for before --where
        assert got.ccs == want.ccs and (not kept or got.describe()["cc"] == want.describe()["cc"])


def test_columnar_store_holds_the_object_writers_metadata(tmp_path: Path) -> None:
    """The columnar writer stores metadata kept once per batch: the values stored must be exactly what
    the object writer stores for each trace (quotes, backslashes, non-ASCII, % in values)."""
    from quicsm.traces import parquet

    meta = TraceMeta(implementation='quic"go %s', version="v%d\\1", labels={"client": "bür\u00f6", "z": "1"})
    odd = ['k"1', "k\\2", "caf\u00e9", "\u2603%s", "plain"]
    data = (
        crafted()
        + "".join(
            format_line(conn=k, t_us=i + 1, cc="cubic", frm="Init", to="SlowStart") + "\n" for i, k in enumerate(odd)
        ).encode()
    )
    report = ParseReport()
    batches = list(column_batches(io.BytesIO(data), "d\u00e9/x.log", "s\u00e9", meta, report))
    assert sum(len(b) for b in batches) > len(odd)
    traces = [t for b in batches for t in b.traces()]
    parquet.write_parquet(batches, str(tmp_path / "columns.parquet"))
    object_store(traces, str(tmp_path / "objects.parquet"))  # the frozen object writer
    got, want = (parquet._open_store(str(tmp_path / f))[2] for f in ("columns.parquet", "objects.parquet"))
    assert got is not None and want is not None and got.doc == want.doc
    assert {'k"1', "k\\2", "\u2603%s"} <= set(got.doc.keys)
    assert {t.implementation for t in got.doc.templates} == {'quic"go %s'}


def test_arrow_arrays_equal_what_pyarrow_builds_from_python_values() -> None:
    import numpy as np
    import pyarrow as pa

    from quicsm.traces import arrow_arrays

    values = np.array([5, -1, 2**62, 0, 7], np.int64)
    mask = np.array([False, True, False, False, True])
    built = arrow_arrays.ints(values, pa.int64(), mask)
    assert built.equals(pa.array([5, None, 2**62, 0, None], pa.int64())) and built.null_count == 2
    assert arrow_arrays.ints(values[[0, 1, 3]], pa.int8()).equals(pa.array([5, -1, 0], pa.int8()))
    texts = ["", "a", "caf\u00e9", "\u2603" * 3, 'q"\\']
    assert arrow_arrays.strings(texts).equals(pa.array(texts, pa.string()))
    d = arrow_arrays.dictionary(np.array([4, 0, 2, 2]), pa.int32(), texts, np.array([False, False, True, False]))
    assert d.to_pylist() == ['q"\\', "", None, "caf\u00e9"] and d.type == pa.dictionary(pa.int32(), pa.string())


def _many_files() -> list[tuple[str, bytes]]:
    """Small logs (keys reused across files, restarts, closes, problems) and a bundled one, in order."""
    small = [
        format_line(conn="a", t_us=1, cc="cubic", frm="Init", to="SlowStart"),
        format_line(conn="a", t_us=9, cc="cubic", frm="SlowStart", to="Recovery"),
    ]
    files = [(f"h{i % 3}/f{i}.log", ("\n".join(small[: 1 + i % 2]) + "\n").encode()) for i in range(7)]
    files.insert(3, ("h1/crafted.log", crafted()))
    files.insert(5, ("h2/real.log", open_binary(LOGS[0]).read()))
    files.append(("h0/empty.log", b"no contract here\n"))
    files.append(("h1/binary.log", b"\x00\x01\x02 not a log\n\x00"))
    files.append(("h2/no-newline.log", ("\n".join(small)).encode()))
    files.append(("h0/zero.log", b""))
    return files


def _object_files(files: list[tuple[str, bytes]]) -> tuple[list, dict]:
    report = ParseReport(keep=1 << 20)
    out = []
    for path, data in files:
        builder = TraceBuilder(path, path[:2], META, report)
        for line, rec in scan_contract(io.BytesIO(data), path, report):
            out += builder.feed(line, rec)
        out += builder.finish()
    return out, report.to_json()


@pytest.mark.parametrize("joined", [False, True])
@pytest.mark.parametrize(
    ("batch_rows", "batch_files"),
    [(1, columnar.BATCH_FILES), (2, 1), (3, 2), (11, 3), (columnar.BATCH_ROWS, 2), (columnar.BATCH_ROWS, 1 << 13)],
)
def test_many_files_through_one_reader_give_each_files_object_path_traces(
    batch_rows: int, batch_files: int, joined: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files share batches (and a file spans batches): ids, events, order and report stay per file;
    ``joined``: small files read whole are scanned together (one call), the bundled log streamed between
    them. A batch closes at ``batch_rows`` records or ``batch_files`` files, whichever comes first."""
    files = _many_files()
    expected = _object_files(files)
    report = ParseReport(keep=1 << 20)
    reader = columnar.ColumnReader(report, batch_rows=batch_rows, batch_files=batch_files)
    monkeypatch.setattr(columnar, "JOIN_BYTES", 1)  # joined files are scanned as they come: batches can close
    got, batches = [], 0
    for path, data in files:
        if joined and not path.endswith("real.log"):
            out = reader.add(data, path, path[:2], META)
        else:
            out = list(reader.read(io.BytesIO(data), path, path[:2], META))
        got += [t for b in out for t in b.traces()]
        batches += len(out)
    out = list(reader.flush())
    got += [t for b in out for t in b.traces()]
    batches += len(out)
    if (
        batch_rows == columnar.BATCH_ROWS
    ):  # the files alone cut the batches (the last file is empty: no batch of its own)
        assert len(files) // batch_files <= batches <= -(-len(files) // batch_files), batches
    assert len(expected[0]) > 10 and len({t.sources for t in expected[0]}) == 10
    assert any(i.reason.startswith("binary data") for i in report.issues)
    assert (got, report.to_json()) == expected


def test_joined_files_scan_in_c_as_in_python() -> None:
    """``scan_files`` (C) and its Python twin give the same columns, fallback rows, side rows (kinds,
    recoveries, extra fields) and line counts."""
    files = [data for _, data in _many_files()]
    bounds = np.zeros(len(files) + 1, np.int64)
    np.cumsum([len(d) for d in files], out=bounds[1:])
    buf = b"".join(files)
    ta: dict[bytes, int] = {}
    tb: dict[bytes, int] = {}
    na: list[str] = []
    nb: list[str] = []
    from quicsm.traces._scan import scan_files

    c = scan_files(buf, bounds.tobytes(), TAG_BYTES, ta, na)
    py = columnar.scan_files_py(buf, bounds.tobytes(), TAG_BYTES, tb, nb)
    assert c == py and na == nb and len(c[1]) >= 2 and len(c[3]) > 3
    assert np.frombuffer(c[2], np.int64).tolist()[-3:] == [2, 2, 0]


def test_a_run_over_many_files_opens_each_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from quicsm.traces import parse_inputs

    for i in range(30):
        (tmp_path / f"s{i}.log").write_bytes(crafted() if i % 7 == 0 else b"x\n" + crafted()[-200:])
    opened: list[str] = []
    real_open = builtins.open

    def counting(file, *a, **k):  # type: ignore[no-untyped-def]
        if str(file).endswith(".log"):
            opened.append(str(file))
        return real_open(file, *a, **k)

    real_os_open = os.open

    def counting_os(file, *a, **k):  # type: ignore[no-untyped-def]
        if str(file).endswith(".log"):
            opened.append(str(file))
        return real_os_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(os, "open", counting_os)
    result = parse_inputs([str(tmp_path)], require_transitions=False)
    assert result.report.files == 30 and sorted(opened) == sorted(str(p) for p in tmp_path.glob("*.log"))


def test_a_truncated_gzip_does_not_hold_the_shared_window_for_the_next_file(tmp_path: Path) -> None:
    """The window buffer is kept from file to file; a read error must not keep a view of it."""
    import gzip

    from quicsm.traces import parse_inputs

    cut = tmp_path / "a.log.gz"
    cut.write_bytes(gzip.compress(crafted() * 40)[:-30])
    big = tmp_path / "b.log"
    big.write_bytes(crafted() + b"a last line without its newline")  # carried over: the window grows
    result = parse_inputs([str(cut), str(big)], require_transitions=False)
    assert result.report.files == 2 and any("truncated" in str(i) for i in result.report.issues)


@pytest.mark.parametrize(
    "text",
    [
        b"QUICSM v=1 conn=a t_us=" + b"1" * 400 + b" cc=cubic from=Init to=SlowStart\n",
        b"QUICSM bad\nnoise\n",
        b"QUICSM bad\nQUICSM v=1 conn=a t_us=1 cc=cubic from=Init to=SlowStart\n",
    ],
)
def test_the_python_scanners_read_files_whose_contract_lines_are_all_bad(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: bytes
) -> None:
    """Issue 36 item 18: the Python twin's placeholder rows named string 0, so a batch whose lines the
    Python reader dropped (none interned) crashed with IndexError; now the twins give the C scanner's
    traces and report, through parse_inputs as users call it."""
    from quicsm.traces import parse_inputs
    from tests.fuzz.targets import readers

    path = tmp_path / "s.log"
    path.write_bytes(text)
    out = []
    for python in (False, True):
        with readers(python):
            res = parse_inputs([str(path)], require_transitions=False)
        out.append((res.traces, res.report.to_json()))
    assert out[0] == out[1]
    assert out[0][1]["issues_total"] >= 1  # type: ignore[index]


ALLOWED = [
    *(
        f"QUICSM v=1 conn=a t_us={i} cc=cubic from=SlowStart to=SlowStart ssthresh={v}"
        for i, v in enumerate(
            (
                "inf",
                "Inf",
                "INF",
                "infinity",
                "Infinity",
                "INFINITY",
                "+inf",
                "+Infinity",
                str(2**64 - 1),
                str(2**63 - 1),
                str(2**63),
                "9" * 20,
                "1e30",
                "-0",
                "12.9",
                "-.5",
                "1E3",
            )
        )
    ),
    "QUICSM v=1 conn=a t_us=20 cc=cubic to=Recovery cwnd=9223372036854775807 inflight=0 srtt_us=1.5e3 min_rtt_us=7.",
    "QUICSM v=1 conn=a t_us=-9223372036854775808 cc=cubic to=Recovery",
    "QUICSM v=1 conn=b t_us=9223372036854775807 cc=reno to=SlowStart",
    "QUICSM v=1 conn=b t_us=-0.5 cc=reno to=SlowStart cwnd=- inflight=- from=- trigger=-",
    "QUICSM to=CongestionAvoidance cc=reno t_us=31 conn=b v=1 cwnd=12",  # any order
    "QUICSM v=1 conn=b t_us=32 cc=reno from=SlowStart to=Recovery trigger=loss cycle=3 weird=x =y k=a=b",
    "QUICSM v=1 conn=b t_us=33 cc=reno ev=update cwnd=5 recovery=Conservation",
    "QUICSM v=1 conn=b t_us=34 cc=reno ev=metrics srtt_us=900 to=- recovery=-",
    "QUICSM v=1 conn=b t_us=35 cc=reno ev=update to=Recovery trigger= recovery=",
    "QUICSM v=1 conn=c t_us=36 cc=CUBIC to=SlowStart",
    "QUICSM v=1 conn=c t_us=37 cc=Cubic to=Sl\u00f6wStart\u00a0x from=",
    "QUICSM \t v=1\x0bconn=c\x0ct_us=38\rcc=cubic  to=Recovery \t",
    "QUICSM v=1 conn=c t_us=39 cc=cubic ev=close",
]
"""Contract lines outside the canonical order and values: every one is allowed (docs/log-format.md)."""
REFUSED = [
    "QUICSM v=1 conn=d t_us=1 cc=cubic to=SlowStart cwnd=inf",
    "QUICSM v=1 conn=d t_us=1 cc=cubic to=SlowStart ssthresh=-1",
    "QUICSM v=1 conn=d t_us=1 cc=cubic to=SlowStart cwnd=9223372036854775808",
    "QUICSM v=1 conn=d t_us=9223372036854775808 cc=cubic to=SlowStart",
    "QUICSM v=1 conn=d t_us=1 cc=cubic to=SlowStart cwnd=1e999",
    "QUICSM v=1 conn=d t_us=1 cc=cubic to=SlowStart cwnd=+5",
    "QUICSM v=1 conn=d t_us=1 cc=cubic to=SlowStart to=Recovery",
    "QUICSM v=1 conn=d t_us=1 cc=cubic ev=transition",
    "QUICSM v=2 conn=d t_us=1 cc=cubic to=SlowStart",
    "QUICSM v=1 conn=d t_us=1 cc=cubic to=SlowStart junk",
    "QUICSM v=1 conn=d t_us=1 cc=- to=SlowStart",
]
"""Lines the contract refuses: left to the Python reader, which reports each."""


@pytest.mark.parametrize("scanner", ["c", "python"])
def test_every_value_the_contract_allows_is_read_by_the_c_scanner(
    scanner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``inf``/``Infinity``/2^64-1, decimals, ``-``, absent and unknown fields, any field order, event kinds:
    the C scanner reads every allowed line itself (none is left to the Python reader), and the traces are
    the object path's; its pure-Python twin gives the same on the same input."""
    from quicsm.traces._scan import scan_columns

    data = ("\n".join(ALLOWED + REFUSED) + "\n").encode()
    raw, fallback, _, side = scan_columns(data, 0, len(data), TAG_BYTES, 1, {}, [])
    assert [ln for _, ln, _ in fallback] == list(range(len(ALLOWED) + 1, len(ALLOWED) + len(REFUSED) + 1))
    assert len(side) == 5  # kinds, recoveries, extra fields beside the columns
    ssthresh = np.frombuffer(raw[6], np.int64).reshape(-1, 7)[:17, 2]
    assert ssthresh.tolist() == [2**63 - 1] * 13 + [0, 12, 0, 1000]
    if scanner == "python":
        monkeypatch.setattr(columnar, "_scan_columns", columnar.scan_columns_py)
    expected = object_path(data)
    traces, report = expected
    malformed = [i["line"] for i in report["issues"] if i["reason"].startswith("malformed contract line")]
    assert report["records"] == len(ALLOWED) and malformed == [ln for _, ln, _ in fallback]
    events = [e for t in traces for e in t.events]
    assert {e.kind for e in events} == {"transition", "update", "metrics", "close"}
    assert any(e.extra == (("cycle", "3"), ("weird", "x"), ("", "y"), ("k", "a=b")) for e in events)
    assert columnar_path(data, columnar.BATCH_ROWS) == expected
    assert columnar_path(data, 3, chunk=64) == expected
