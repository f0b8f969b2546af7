"""A long qlog trace's row groups handed to the store writer while the file is read (parquet.GroupAhead):
the store is byte for byte the one written from the whole batch, whether what was sent ahead held or the
file had to be read again (a time going back, a state first met late, no close row, a moved first time),
with both scanners; ``--where`` dropping the trace drops its groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicsm.traces import parquet, qlog_columns, qlog_scanner
from quicsm.traces.parse import Overrides, read_inputs, write_store

ROWS = 40
HEAD = (
    b'\x1e{"qlog_format":"JSON-SEQ","qlog_version":"0.3","title":"quic-go qlog","code_version":"v0.65.0",'
    b'"trace":{"vantage_point":{"type":"server"},"common_fields":{"group_id":"8fe6d3ddf641"}}}\n'
)


def _qlog(
    events: int = 400,
    *,
    back_at: int | None = None,
    late_state_at: int | None = None,
    close: bool = True,
    old: str | None = None,
    early_at: int | None = None,
    sep: bytes = b"\x1e",
) -> bytes:
    """One quic-go-shaped JSON-SEQ trace of about ``events`` congestion rows (states, metrics, packets between)."""
    out = [HEAD]
    t = 1.0
    states = ["slow_start", "congestion_avoidance"]
    for i in range(events):
        t += 0.25
        when = 0.5 if i == back_at else t
        if i == early_at:
            out.append(b'\x1e{"time":0.125,"name":"transport:packet_sent","data":{}}\n')
        if i % 17 == 0:
            new = "recovery" if late_state_at is not None and i >= late_state_at else states[(i // 17) % 2]
            extra = f',"old":"{old}"' if old and i == 0 else ""
            line = f'{{"time":{when},"name":"recovery:congestion_state_updated","data":{{"new":"{new}"{extra}}}}}'
        else:
            line = (
                f'{{"time":{when},"name":"recovery:metrics_updated","data":{{"congestion_window":{1000 + i},'
                f'"bytes_in_flight":{i % 50},"smoothed_rtt":{10 + i % 7}.5}}}}'
            )
        out.append(b"\x1e" + line.encode() + b"\n")
        out.append(b'\x1e{"time":%r,"name":"transport:packet_sent","data":{}}\n' % t)
    if close:
        out.append(b'\x1e{"time":%r,"name":"transport:packet_sent","data":{}}\n' % (t + 5))
    data = b"".join(out)
    return data if sep == b"\x1e" else data.replace(b"\x1e", b"")


@pytest.fixture
def small_groups(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Groups of ROWS rows, windows of 1 KiB (many between a trace's rows), and a tally of what the writer
    did with the groups sent ahead."""
    monkeypatch.setattr(parquet, "ROWS_PER_GROUP", ROWS)
    monkeypatch.setattr(qlog_columns, "WINDOW", 1024)
    seen = {"sent": 0, "kept": 0, "dropped": 0}
    put, keep, drop = parquet._Writer.put, parquet._Encoders.keep, parquet._Encoders.drop

    def spy_put(self: parquet._Writer, item: object) -> None:
        seen["sent"] += isinstance(item, parquet.GroupAhead)
        put(self, item)  # type: ignore[arg-type]

    def spy_keep(self: parquet._Encoders) -> None:
        seen["kept"] += 1
        keep(self)

    def spy_drop(self: parquet._Encoders) -> None:
        seen["dropped"] += bool(self.held)
        drop(self)

    monkeypatch.setattr(parquet._Writer, "put", spy_put)
    monkeypatch.setattr(parquet._Encoders, "keep", spy_keep)
    monkeypatch.setattr(parquet._Encoders, "drop", spy_drop)
    return seen


def _both(tmp_path: Path, files: list[Path], **kw: object) -> tuple[bytes, bytes]:
    """The store ``parse -o`` writes (groups ahead), and the one written from the whole batches."""
    got, want = tmp_path / "ahead.parquet", tmp_path / "whole.parquet"
    write_store([str(f) for f in files], str(got), dask="off", **kw)  # type: ignore[arg-type]
    parquet.write_parquet(read_inputs([str(f) for f in files], Overrides()), str(want))
    return got.read_bytes(), want.read_bytes()


@pytest.mark.parametrize("scanner", ["c", "python"])
@pytest.mark.parametrize(
    ("shape", "held"),
    [
        ({}, True),
        ({"old": "congestion_avoidance"}, True),  # a changes-only logger's first state: a row at the first time
        ({"sep": b""}, True),  # NDJSON
        ({"back_at": 300}, False),  # a time before the groups sent
        ({"late_state_at": 250}, False),  # a state the groups' dictionaries do not hold
        ({"close": False}, False),  # no close row: the kind dictionary was guessed with it
        ({"old": "congestion_avoidance", "early_at": 300}, False),  # the first time moved: the first row's
    ],
)
def test_a_long_trace_is_written_while_it_is_read_into_the_store_of_its_whole_batch(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    small_groups: dict[str, int],
    scanner: str,
    shape: dict[str, object],
    held: bool,
) -> None:
    if scanner == "python":
        monkeypatch.setattr(qlog_scanner, "Scanner", qlog_scanner.QlogScannerPy)
    elif not qlog_scanner.available():
        pytest.skip("C scanner not built")
    path = tmp_path / ("a.ndjson" if shape.get("sep") == b"" else "a.sqlog")
    path.write_bytes(_qlog(**shape))  # type: ignore[arg-type]
    short = tmp_path / "b.sqlog"  # a short trace after it: a batch of its own
    short.write_bytes(_qlog(12))
    got, want = _both(tmp_path, [path, short])
    assert got == want
    assert small_groups["sent"] > 3
    assert (small_groups["kept"], small_groups["dropped"]) == ((1, 0) if held else (0, 1))


def test_groups_ahead_go_with_their_trace_where_it_is_not_kept(tmp_path: Path, small_groups: dict[str, int]) -> None:
    import json

    files = []
    for name, events in (("long", 400), ("short", 30)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.json").write_text(json.dumps({"labels": {"run": name}}))
        files.append(tmp_path / name / "a.sqlog")
        files[-1].write_bytes(_qlog(events))
    got = tmp_path / "where.parquet"
    n, _, kept = write_store([str(f) for f in files], str(got), dask="off", where={"run": "long"})
    assert n == kept.kept == 1 and small_groups["kept"] == 1
    n, _, kept = write_store([str(f) for f in files], str(got), dask="off", where={"run": "short"})
    assert n == kept.kept == 1 and small_groups["dropped"] == 1
    (trace,) = parquet.read_parquet(str(got))
    assert trace.labels["run"] == "short"


def test_a_trace_before_it_in_its_batch_or_a_gzip_file_sends_nothing_ahead(
    tmp_path: Path, small_groups: dict[str, int]
) -> None:
    """A long trace that shares its batch with one read before it, or whose file cannot be read again
    (gzip), is cut when it ends, as before."""
    import gzip

    first, long = tmp_path / "a.sqlog", tmp_path / "b.sqlog"
    first.write_bytes(_qlog(10))
    long.write_bytes(_qlog())
    packed = tmp_path / "c.sqlog.gz"
    packed.write_bytes(gzip.compress(_qlog()))
    got, want = _both(tmp_path, [first, long, packed])
    assert got == want and small_groups["sent"] == 0


def test_the_writer_refuses_groups_whose_batch_never_came(tmp_path: Path) -> None:
    import pyarrow as pa

    table = pa.table({f.name: pa.nulls(0, f.type) for f in parquet.SCHEMA()}, schema=parquet.SCHEMA())
    out = tmp_path / "x.parquet"
    with pytest.raises(ValueError, match="did not come"):
        parquet.write_parquet([parquet.GroupAhead(table, False)], str(out))
    assert not out.exists()
