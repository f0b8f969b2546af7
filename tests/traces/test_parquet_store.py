"""The Parquet store: v3 keeps the traces' metadata once per trace in the Arrow schema's metadata (JSON,
zstd, base64), both writers (trace objects, column batches) write the same values, both readers read
them back, and stores written by earlier releases (v2: a ``meta`` struct on each trace's first row; v1:
metadata as JSON text) still read as they did."""

from __future__ import annotations

import errno
import os
import pickle
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from quicsm.errors import InputError, OutputError
from quicsm.traces import parquet
from quicsm.traces.columnar import SharedMeta, TraceColumns
from quicsm.traces.events import Trace, TraceEvent
from quicsm.traces.parse import iter_traces
from quicsm.traces.store import read_traces
from tests.traces.store_oracle import object_store

DATA = Path(__file__).parents[1] / "data" / "store"
REPO = Path(__file__).parents[2]
ODD = ["", "a", 'q"uote', "back\\slash", "caf\u00e9", "\u2603", "tab\there", "\U0001f600", '"}{,:', "a\x00b"]


def _odd_traces(seed: int, n: int = 60) -> list[Trace]:
    rng = random.Random(seed)
    pick = lambda: rng.choice(ODD) + str(rng.randrange(3))  # noqa: E731
    out = []
    for i in range(n):
        events = [
            TraceEvent(t, rng.choice(["Up", "Down"]), "transition", None, cwnd=t) for t in range(rng.randrange(3))
        ]
        out.append(
            Trace(
                id=f"f:{pick()}:{i}",
                cc=rng.choice(["cubic", "bbr", pick()]),
                events=events,
                key=pick(),
                implementation=rng.choice([None, "quic-go", pick()]),
                version=rng.choice([None, "v1", pick()]),
                sources=rng.choice([(), ("a.log",), (pick(), pick()), ("a\x00", "b"), ("a", "\x00b")]),
                labels=rng.choice([{}, {"client": "desktop"}, {pick(): pick(), "z": pick()}, {"a": "", "": "a"}]),
            )
        )
    return out


def _write_objects(traces: list[Trace], tmp_path: Path, version: int = 3) -> str:
    path = str(tmp_path / f"objects-v{version}.parquet")
    object_store(traces, path, version)  # the frozen object writer (empty traces kept as placeholder rows)
    return path


def _as_columns(traces: list[Trace], tmp_path: Path) -> TraceColumns:
    """``traces`` written by the object writer and read back as one column batch."""
    (got,) = parquet.read_parquet_columns(_write_objects(traces, tmp_path))
    return got


@pytest.mark.parametrize(("seed", "version"), [(0, 3), (1, 3), (2, 3), (0, 2), (1, 2)])
def test_odd_metadata_round_trips_through_both_writers_and_both_readers(
    seed: int, version: int, tmp_path: Path
) -> None:
    """Through a v3 store, and from a v2 one as the previous release wrote it."""
    traces = _odd_traces(seed)
    with_events = [t for t in traces if t.events]
    assert list(parquet.read_parquet(_write_objects(traces, tmp_path, version))) == traces
    (tc,) = parquet.read_parquet_columns(_write_objects(traces, tmp_path, version))
    assert list(tc.traces()) == with_events
    # the metadata shared by traces is kept once per distinct value, and only traces with equal values share
    distinct = {(t.implementation, t.version, t.sources, tuple(t.labels.items())) for t in with_events}
    assert len({tc.shared.of[i] for i in range(len(tc))}) == len(distinct)
    columns = str(tmp_path / "c.parquet")
    parquet.write_parquet([tc], columns)
    assert [t for t in parquet.read_parquet(columns)] == with_events
    assert [t for b in parquet.read_parquet_columns(columns, metrics=False) for t in b.traces()] == [
        Trace(
            t.id,
            t.cc,
            [TraceEvent(e.t_us, e.state, e.kind, e.prev) for e in t.events],
            t.key,
            t.implementation,
            t.version,
            t.sources,
            t.labels,
        )
        for t in with_events
    ]


def test_v3_metadata_is_in_the_schema_once_per_trace_and_survives_an_arrow_rewrite(tmp_path: Path) -> None:
    """No metadata column; the schema's ``quicsm-traces`` decodes to the declared StoreTraces (ids in row
    order, each distinct template once); pyarrow's read_table/write_table keeps it, so the rewritten
    file reads back the same traces."""
    import base64
    import json

    import jsonschema

    traces = [t for t in _odd_traces(7, 20) if t.events]
    path = str(tmp_path / "x.parquet")
    parquet.write_parquet(parquet.object_batches(traces), path)
    schema = pq.read_schema(path)
    assert schema.metadata[b"quicsm"] == b"quicsm-trace v3"
    assert schema.names == [f.name for f in parquet.SCHEMA()] and "meta" not in schema.names
    size, _, packed = schema.metadata[parquet.TRACES_KEY].partition(b":")
    text = pa.Codec("zstd").decompress(base64.b64decode(packed), int(size), asbytes=True)
    doc = json.loads(text)
    jsonschema.validate(doc, json.loads((REPO / "quicsm" / "schemas" / "trace-store.schema.json").read_text()))
    assert doc["format"] == "quicsm-trace-store" and doc["v"] == 3
    assert doc["ids"] == [t.id for t in traces] and doc["ccs"] == [t.cc for t in traces]
    assert [doc["templates"][j].get("labels", {}) for j in doc["shared"]] == [t.labels for t in traces]
    distinct = {(t.implementation, t.version, t.sources, tuple(t.labels.items())) for t in traces}
    assert len(doc["templates"]) == len(distinct)
    rewritten = str(tmp_path / "rewritten.parquet")
    pq.write_table(pq.read_table(path), rewritten, row_group_size=5)
    assert read_traces(rewritten) == traces


def test_v2_metadata_is_arrow_columns_on_each_traces_first_row(tmp_path: Path) -> None:
    traces = _odd_traces(7, 20)
    path = _write_objects(traces, tmp_path, version=2)
    schema = pq.read_schema(path)
    assert schema.metadata[b"quicsm"] == b"quicsm-trace v2"
    meta = schema.field("meta").type
    assert pa.types.is_struct(meta) and "trace_meta" not in schema.names
    assert pa.types.is_map(meta.field("labels").type) and pa.types.is_list(meta.field("sources").type)
    assert pa.types.is_dictionary(meta.field("cc").type)
    table = pq.read_table(path)
    rows = table.to_pylist()
    firsts = [r for i, r in enumerate(rows) if i == 0 or rows[i - 1]["trace"] != r["trace"]]
    assert [r["trace"] for r in firsts] == [t.id for t in traces]
    assert [dict(r["meta"]["labels"]) for r in firsts] == [t.labels for t in traces]
    assert all(r["meta"] is None for r in rows if r not in firsts)


def test_v1_stores_of_the_previous_release_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """fig13-v1.parquet and odd-v1.parquet were written by the release before v2 (quicsm parse of
    traces/fig13, and write_parquet of the traces below)."""
    monkeypatch.chdir(REPO)  # the sources are the paths the store was written from
    logs = list(iter_traces(["traces/fig13"]))
    store = str(DATA / "fig13-v1.parquet")
    assert pq.read_schema(store).metadata[b"quicsm"] == b"quicsm-trace v1"
    assert read_traces(store) == logs
    assert [t for tc in parquet.read_parquet_columns(store) for t in tc.traces()] == logs
    odd = read_traces(str(DATA / "odd-v1.parquet"))
    assert [(t.id, t.key, t.sources, t.labels) for t in odd] == [
        ('f:a"b:1', "k\u00e9", ("a.log", 'b,"c'), {"client": "desk\ttop", "z": "\u2603"}),
        ("f:a:2", "k2", (), {}),
        ("g:3", "k3", ("g.log",), {}),
    ]
    assert [t for tc in parquet.read_parquet_columns(str(DATA / "odd-v1.parquet")) for t in tc.traces()] == [
        t for t in odd if t.events
    ]


def test_v2_stores_of_the_previous_release_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """fig13-v2.parquet and odd-v2.parquet were written by the release before v3 (quicsm parse of
    traces/fig13; the object writer of odd-v1.parquet's traces, one of them empty)."""
    monkeypatch.chdir(REPO)
    logs = list(iter_traces(["traces/fig13"]))
    store = str(DATA / "fig13-v2.parquet")
    assert pq.read_schema(store).metadata[b"quicsm"] == b"quicsm-trace v2"
    assert read_traces(store) == logs
    assert [t for tc in parquet.read_parquet_columns(store) for t in tc.traces()] == logs
    lean = [t for tc in parquet.read_parquet_columns(store, metrics=False) for t in tc.traces()]
    assert [(t.id, t.cc, t.labels, t.visits()) for t in lean] == [(t.id, t.cc, t.labels, t.visits()) for t in logs]
    odd = read_traces(str(DATA / "odd-v2.parquet"))
    assert odd == read_traces(str(DATA / "odd-v1.parquet")) and len(odd) == 3 and not odd[1].events


def test_a_store_version_this_release_does_not_know_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _write_objects(_odd_traces(1, 3), tmp_path)
    table = pq.read_table(path)
    future = str(tmp_path / "future.parquet")
    pq.write_table(table.replace_schema_metadata({b"quicsm": b"quicsm-trace v4"}), future)
    for read in (read_traces, lambda p: list(parquet.read_parquet_columns(p))):
        with pytest.raises(InputError) as err:
            read(future)
        assert str(err.value) == f"{future}: store version 'quicsm-trace v4' is not one this quicsm reads (v1, v2, v3)"


def _with_traces_meta(path: str, out: Path, value: bytes | None) -> str:
    """``path``'s rows under a schema whose ``quicsm-traces`` is ``value`` (None: left out)."""
    table = pq.read_table(path)
    meta = {k: v for k, v in table.schema.metadata.items() if k != parquet.TRACES_KEY}
    pq.write_table(table.replace_schema_metadata(meta if value is None else {**meta, parquet.TRACES_KEY: value}), out)
    return str(out)


def test_a_v3_store_whose_trace_metadata_is_lost_damaged_or_out_of_step_is_refused(tmp_path: Path) -> None:
    """One line naming the file and what is wrong, from both readers; never traces with another's metadata."""
    import base64

    from tests.traces.store_oracle import v3_footer

    traces = _odd_traces(2, 6)
    path = _write_objects(traces, tmp_path)
    others = [replace(t, id=t.id + "x") for t in traces]
    cases = [
        (None, r"bad Parquet trace file \(no quicsm-traces in its schema metadata\)"),
        (b"12:notbase64!", r"bad Parquet trace file \(quicsm-traces: "),
        (v3_footer(traces)[:-8], r"bad Parquet trace file \(quicsm-traces: "),
        (v3_footer(traces[:-1]), r"bad Parquet trace file .*quicsm-traces has 5 traces, the rows more"),
        (v3_footer(traces + traces[:1]), r"bad Parquet trace file .*quicsm-traces has 7 traces, the rows 6"),
        (v3_footer(others), r"bad Parquet trace file .*quicsm-traces differs from the rows' traces at trace 0"),
    ]
    text = b'{"format":"quicsm-trace-store","v":3,"ids":[1],"keys":[],"ccs":[],"shared":[],"templates":[]}'
    packed = b"%d:%s" % (len(text), base64.b64encode(pa.Codec("zstd", 1).compress(text, asbytes=True)))
    cases.append((packed, r"quicsm-traces: ids\[0\]: expected `str`, got `int`"))
    for i, (value, said) in enumerate(cases):
        broken = _with_traces_meta(path, tmp_path / f"broken{i}.parquet", value)
        for read in (read_traces, lambda p: list(parquet.read_parquet_columns(p))):
            with pytest.raises(InputError, match=f"^{broken}: {said}"):
                read(broken)
    assert read_traces(_with_traces_meta(path, tmp_path / "whole.parquet", v3_footer(traces))) == traces


def test_a_trace_whose_first_row_lost_its_metadata_is_refused(tmp_path: Path) -> None:
    path = _write_objects(_odd_traces(2, 4), tmp_path, version=2)
    table = pq.read_table(path)
    meta = table.column("meta").combine_chunks()
    blank = pa.array([None] * len(meta), meta.type)
    broken = str(tmp_path / "broken.parquet")
    pq.write_table(table.set_column(table.schema.get_field_index("meta"), "meta", blank), broken)
    for read in (read_traces, lambda p: list(parquet.read_parquet_columns(p))):
        with pytest.raises(InputError, match="broken.parquet: bad Parquet trace file .*without its metadata"):
            read(broken)


def test_shared_metadata_is_per_distinct_value(tmp_path: Path) -> None:
    base = dict(cc="cubic", events=[TraceEvent(1, "Up", "transition", None)], implementation="x", version="1")
    traces = [
        Trace(id="a", key="a", sources=("s",), labels={"k": "v"}, **base),  # type: ignore[arg-type]
        Trace(id="b", key="b", sources=("s",), labels={"k": "v"}, **base),  # type: ignore[arg-type]
        Trace(id="c", key="c", sources=("s",), labels={"v": "k"}, **base),  # type: ignore[arg-type]
        Trace(id="d", key="d", sources=("s", ""), labels={"k": "v"}, **base),  # type: ignore[arg-type]
    ]
    tc = _as_columns(traces, tmp_path)
    of = tc.shared.of
    assert of[0] == of[1] and len({of[1], of[2], of[3]}) == 3
    assert isinstance(tc.shared, SharedMeta) and list(tc.traces()) == traces


def test_a_trace_longer_than_a_row_group_is_written_in_groups_as_pyarrow_cuts_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch over twice ROWS_PER_GROUP rows (a long trace: a 1 GB qlog of one connection) is written in
    groups of ROWS_PER_GROUP rows, built one at a time: the bytes pyarrow writes when it cuts the whole
    batch's table at that size (the object writer's), and every trace reads back whole."""
    monkeypatch.setattr(parquet, "ROWS_PER_GROUP", 7)
    rng = random.Random(3)
    traces = _odd_traces(4, 30)
    for t in traces[::4]:  # some traces span several groups, with metrics, triggers and extras
        t.events = [
            TraceEvent(
                i,
                rng.choice(["Up", "Down", "caf\u00e9"]),
                rng.choice(["transition", "update"]),
                rng.choice([None, "Up"]),
                cwnd=rng.choice([None, i]),
                trigger=rng.choice([None, "loss"]),
                recovery=rng.choice([None, "fast"]),
                extra=rng.choice([(), (("k", str(i)),)]),
            )
            for i in range(rng.choice([9, 10, 30, 59]))
        ]
    traces = [t for t in traces if t.events]
    want = str(tmp_path / "objects.parquet")
    object_store(traces, want)
    batches = list(parquet.object_batches(traces))
    assert any(len(b.order) > 2 * 7 for b in batches)
    got = str(tmp_path / "columns.parquet")
    assert parquet.write_parquet(batches, got) == len(traces)
    assert Path(got).read_bytes() == Path(want).read_bytes()
    groups = pq.ParquetFile(got)
    sizes = [groups.metadata.row_group(g).num_rows for g in range(groups.num_row_groups)]
    assert 7 < max(sizes) <= 2 * 7 and sizes.count(7) > 5  # batches whole up to 14 rows, longer ones cut
    assert list(parquet.read_parquet(got)) == traces
    assert [t for b in parquet.read_parquet_columns(got) for t in b.traces()] == traces
    stored = parquet.store_batches(parquet.object_batches(traces))  # a Dask task's row groups, encoded
    rows = [sum(v for f, _, v in b.part.footer if f == 3) for b in stored]
    assert sum(b.traces for b in stored) == len(traces) and max(rows) == max(sizes)
    sent = pickle.loads(pickle.dumps(stored))  # as a worker sends them, spliced by the parent: the same bytes
    assert all(isinstance(b.part.chunks, bytes) for b in sent)
    again = str(tmp_path / "sent.parquet")
    assert parquet.write_parquet(sent, again) == len(traces)
    assert Path(again).read_bytes() == Path(want).read_bytes()


WRITE_TABLE = pq.ParquetWriter.write_table


def _qlog_batches(monkeypatch: pytest.MonkeyPatch, rows: int) -> list[TraceColumns]:
    """Column batches of the bundled qlogs (rows in table order, dictionaries by first appearance) and
    a text log, closed at ``rows`` rows."""
    from quicsm.traces import qlog_columns
    from quicsm.traces.parse import Overrides, read_inputs

    monkeypatch.setattr(parquet, "ROWS_PER_GROUP", rows)
    monkeypatch.setattr(qlog_columns, "ROWS_PER_GROUP", rows, raising=False)
    return list(read_inputs([str(REPO / "tests/data/qlog"), str(REPO / "tests/data/quic-go-v0.65")], Overrides()))


def test_batches_in_table_order_are_sliced_into_the_bytes_a_gather_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """qlog batches hold their rows in table order: their columns are sliced, not gathered by ``order``;
    the store is byte for byte the one the gather (every other batch's path) writes, whole batches and
    batches cut into groups alike."""
    for rows in (50, 100_000):
        batches = _qlog_batches(monkeypatch, rows)
        assert any(parquet._in_order(b.order) and b.events.first_seen for b in batches)
        sliced = tmp_path / f"sliced-{rows}.parquet"
        assert parquet.write_parquet(batches, str(sliced)) == sum(len(b) for b in batches)
        with monkeypatch.context() as m:
            m.setattr(parquet, "_in_order", lambda order: False)
            gathered = tmp_path / f"gathered-{rows}.parquet"
            parquet.write_parquet(batches, str(gathered))
        assert sliced.read_bytes() == gathered.read_bytes()
        assert [t for b in parquet.read_parquet_columns(str(sliced)) for t in b.traces()] == [
            t for b in batches for t in b.traces()
        ]
    assert not parquet._in_order(np.asarray([0, 2, 1])) and not parquet._in_order(np.asarray([1, 2]))
    assert parquet._in_order(np.asarray([0, 1, 2])) and parquet._in_order(np.zeros(0, np.int64))


def test_row_groups_are_encoded_on_other_threads_into_the_file_one_writer_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row groups are encoded on the encoder threads (each as a Parquet part) while the caller builds the
    next, and spliced in the order given: byte for byte the file one pyarrow writer writes, whether one
    thread or several encode, and whatever finishes first."""
    batches = _qlog_batches(monkeypatch, 50)
    assert len(batches) > 3
    alone = tmp_path / "alone.parquet"
    schema = parquet._schema()
    index = parquet.TraceIndex()
    for tc in batches:
        index.add(tc)
    final = schema.with_metadata({**schema.metadata, parquet.TRACES_KEY: index.encode()})  # known at the end
    with pq.ParquetWriter(str(alone), final, **parquet._writer_options(schema)) as w:
        for tc in batches:
            for table, _ in parquet._columns_tables(tc, schema):
                w.write_table(table, row_group_size=max(parquet.ROWS_PER_GROUP, table.num_rows))
    threads: list[str] = []

    def spy(self: pq.ParquetWriter, table: pa.Table, **kw: object) -> None:
        threads.append(threading.current_thread().name)
        time.sleep(0.02 * (len(threads) % 3 == 1))  # some groups finish after later ones
        WRITE_TABLE(self, table, **kw)

    for encoders, idle in ((1, True), (2, True), (3, True), (3, False)):  # one thread when no core is idle
        threads.clear()
        with monkeypatch.context() as m:
            m.setattr(parquet, "ENCODERS", encoders)
            m.setattr("quicsm.fleet.machine.spare_core", lambda idle=idle: idle)
            m.setattr(pq.ParquetWriter, "write_table", spy)
            spliced = tmp_path / f"spliced-{encoders}-{idle}.parquet"
            parquet.write_parquet(batches, str(spliced))
        assert spliced.read_bytes() == alone.read_bytes()
        assert len(threads) >= len(batches) and all(t.startswith("quicsm-parquet-writer") for t in threads)
        assert len(set(threads)) <= (encoders if idle else 1)
    empty = tmp_path / "empty.parquet"
    assert parquet.write_parquet([], str(empty)) == 0
    assert pq.ParquetFile(str(empty)).metadata.num_rows == 0 and list(parquet.read_parquet(str(empty))) == []
    final = schema.with_metadata({**schema.metadata, parquet.TRACES_KEY: parquet.TraceIndex().encode()})
    pq.ParquetWriter(str(alone), final, **parquet._writer_options(schema)).close()
    assert empty.read_bytes() == alone.read_bytes()


def _failing_writes(monkeypatch: pytest.MonkeyPatch, at: int) -> list[int]:
    """write_table fails with a full disk at its ``at``-th call (0-based); the calls are counted."""
    calls: list[int] = []

    def full(self: pq.ParquetWriter, table: pa.Table, **kw: object) -> None:
        calls.append(table.num_rows)
        if len(calls) > at:
            time.sleep(0.3)  # the caller meets its own error meanwhile
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        WRITE_TABLE(self, table, **kw)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    return calls


def _source(batches: list[TraceColumns], taken: list[int], fail: int | None) -> Iterator[TraceColumns]:
    """The batches, counted in ``taken``; a reader's error at batch ``fail``."""
    for i, b in enumerate(batches):
        taken.append(i)
        if i == fail:
            raise InputError("later.log:1: a later problem")
        yield b


def test_a_write_that_fails_on_the_writer_thread_is_the_callers_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row group the thread cannot write (a full disk) is one OutputError naming the output, raised in
    the caller; no file and no temporary is left, and the batches after it are not all read. The
    reader's own error on a later batch does not hide it: one thread would have met the write first."""
    batches = _qlog_batches(monkeypatch, 200)
    assert len(batches) > 3 and all(len(b.order) <= 2 * 200 for b in batches[:2])  # a group each
    out = tmp_path / "out" / "x.parquet"
    for later_error in (False, True):
        calls = _failing_writes(monkeypatch, 1)
        taken: list[int] = []

        with pytest.raises(OutputError, match=r"x\.parquet: cannot write \(No space left on device\)"):
            parquet.write_parquet(_source(batches, taken, 2 if later_error else None), str(out))
        assert 2 <= len(calls) <= 2 + parquet.ENCODERS and len(taken) < len(batches)
        assert os.listdir(out.parent) == []
