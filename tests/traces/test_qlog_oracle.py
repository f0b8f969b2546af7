"""The qlog column reader (quicsm/traces/qlog_columns.py) against the object reader it replaced
(tests/traces/qlog_oracle.py): the same traces and the same report (counts, problems with file, line
and reason) on every qlog we have and on mutated ones, read whole and in windows down to a few bytes,
by the C scanner and by its pure-Python twin."""

from __future__ import annotations

import gzip
import io
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from quicsm.traces import qlog_scanner
from quicsm.traces.events import METRIC_FIELDS, Trace, TraceMeta
from quicsm.traces.qlog_columns import QlogBatcher
from quicsm.traces.report import ParseReport
from quicsm.traces.sniff import sniff_bytes
from tests.conftest import SHARED
from tests.fuzz.mutate import load_seeds, mutate
from tests.traces import qlog_oracle

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = SHARED / "reference" / "qlog-samples"
"""The foreign stacks' qlogs beside the checkout on the project's machines (not in the repository)."""
QLOGS = sorted(
    str(p)
    for where in (ROOT / "tests", ROOT / "traces", FOREIGN)
    for pattern in ("*.qlog", "*.qlog.gz", "*.sqlog", "*.sqlog.gz")
    for p in where.rglob(pattern)
)


def in_threads(threads: int, split_min: int = 1, simd: int = 1) -> Any:
    """The C scanner reading records in ``threads`` threads; with two, every run of records of at least
    ``2 * split_min`` bytes (after the header) is split between them (1: runs of two records are), and the
    second part is always read by the second thread and merged (never taken back: the merge is what is held).
    ``simd`` 0: records split and classified 16 bytes at a time (SSE2) even where the CPU has AVX2, and the
    general paths of the rest (no member or name guesses, every number read)."""

    def scanner(table: dict[bytes, int], names: list[str]) -> Any:
        sc = qlog_scanner.Scanner(table, names)
        sc.threads, sc.split_min, sc.take_back, sc.simd = threads, split_min, 0, simd
        return sc

    scanner.__name__ = f"Scanner({threads} thread{'s' * (threads > 1)}{', SSE2' * (not simd)})"
    return scanner


ONE_THREAD, TWO_THREADS = (in_threads(1, simd=0), in_threads(2)) if qlog_scanner.available() else (None, None)
SCANNERS = [ONE_THREAD, TWO_THREADS, qlog_scanner.QlogScannerPy] if qlog_scanner.available() else [qlog_scanner.Scanner]
"""The C scanner in one thread (SSE2 only, its general paths) and in two (every run of records split; AVX2 where
the CPU has it, its guesses), and its twin (only the twin where the extension is not built)."""


def kind_of(data: bytes) -> str:
    kind = sniff_bytes(data[:65536], "qlog")
    return kind if kind in ("qlog", "sqlog", "ndjson") else "qlog"


def oracle(data: bytes, kind: str, meta: TraceMeta = TraceMeta(), path: str = "in/x.sqlog") -> tuple[Any, Any]:
    report = ParseReport(keep=1 << 20)
    read = {"qlog": qlog_oracle.read_qlog, "sqlog": qlog_oracle.read_sqlog}.get(kind, qlog_oracle.read_ndjson)
    return list(read(io.BytesIO(data), path, meta, report)), report.to_json()


def columns(
    data: bytes,
    kind: str,
    meta: TraceMeta = TraceMeta(),
    *,
    window: int | None = None,
    scanner: type[Any] | None = None,
    path: str = "in/x.sqlog",
    metrics: bool = True,
) -> tuple[list[Trace], Any]:
    """The column reader's traces and report: the file read whole (``window`` None) or streamed; ``metrics``
    False: read as ``infer`` reads it (metrics unknown)."""
    report = ParseReport(keep=1 << 20)
    b = QlogBatcher(report, scanner=scanner, window=window, metrics=metrics)
    if window is None:
        batches = b.add(data, path, meta, kind) + b.flush()
    else:
        batches = list(b.read(io.BytesIO(data), path, meta, kind)) + b.flush()
    return [t for tc in batches for t in tc.traces()], report.to_json()


def without_metrics(traces: list[Trace]) -> list[Trace]:
    """The traces with their events' metrics unknown (what a read without metrics gives)."""
    unknown = dict.fromkeys(METRIC_FIELDS)
    return [replace(t, events=[e._replace(**unknown) for e in t.events]) for t in traces]


def agree(
    data: bytes, kind: str, meta: TraceMeta = TraceMeta(), windows: tuple[int | None, ...] = (None, 4096, 61)
) -> Any:
    """The oracle's traces and report (when it applies), which every scanner and window also gives; and read
    without metrics (``infer``'s read: the C scanner then keeps those of a trace only while its states may come
    from them), the same traces with their metrics unknown and the same report."""
    want = oracle(data, kind, meta) if qlog_oracle.comparable(data, kind) else None
    first = None
    for scanner in SCANNERS:
        for window in windows:
            got = columns(data, kind, meta, window=window, scanner=scanner)
            if want is not None:
                assert got == want, (scanner, window)
            elif first is None:
                first = got
            else:
                assert got == first, (scanner, window)
            if window == windows[-1]:  # (the twin keeps them: the batch says them unknown all the same)
                bare = columns(data, kind, meta, window=window, scanner=scanner, metrics=False)
                assert bare == (without_metrics(got[0]), got[1]), (scanner, window, "without metrics")
    return want if want is not None else first


def _every_qlog(head: int | None, metas: tuple[TraceMeta, ...]) -> None:
    assert len(QLOGS) >= 12, QLOGS
    read = 0
    for path in QLOGS:
        raw = Path(path).read_bytes()
        data = (gzip.decompress(raw) if path.endswith(".gz") else raw)[:head]
        kind = kind_of(data)
        assert qlog_oracle.comparable(data, kind) or head, path
        for meta in metas:
            want = agree(data, kind, meta, (None, 1 << 16, 4093))
        read += bool(want[0])
    assert read >= 10  # most hold traces: the comparison is not of empty outputs


def test_the_head_of_every_qlog_we_have_is_read_as_the_old_reader_read_it() -> None:
    _every_qlog(1 << 16, (TraceMeta(),))  # cut files


@pytest.mark.slow
def test_every_qlog_we_have_is_read_as_the_old_reader_read_it() -> None:
    _every_qlog(None, (TraceMeta(), TraceMeta(cc="cubic", implementation="x")))


@pytest.mark.parametrize("kind", ["sqlog", "ndjson", "qlog"])
def test_mutated_qlogs_are_read_as_the_old_reader_read_them(kind: str) -> None:
    seeds = load_seeds()
    rng = random.Random(18)
    base = "qlog" if kind == "qlog" else "sqlog"
    with_traces = problems = held = held_traces = held_problems = 0
    for _ in range(300):
        data = mutate(seeds.pick(rng, base), rng, seeds, base)
        if kind == "ndjson":  # quic-go's older format: the same records, one a line
            data = data.replace(b"\x1e", b"")
        want = agree(data, kind, windows=(None, 97, 7))
        is_held = qlog_oracle.comparable(data, kind)
        held += is_held
        held_traces += is_held and bool(want[0])
        held_problems += is_held and bool(want[1]["issues"])
        with_traces += bool(want[0])
        problems += bool(want[1]["issues"])
    assert with_traces > 30 and problems > 30, (with_traces, problems)
    # most mutants are held to the oracle, not only C to Python, and those hold traces and problems: every
    # record file; of documents, those still JSON (byte edits seldom leave a document JSON: half the
    # mutants are made by tests.fuzz.mutate.mutate_json, which keeps it JSON)
    least = (100, 80) if kind == "qlog" else (299, 30)
    assert held > least[0] and held_traces > least[1] and held_problems > 15, (held, held_traces, held_problems)


def test_a_window_held_by_a_view_is_replaced_not_fatal() -> None:
    """A view of the kept window alive elsewhere (BufferError on resize, seen once on a Dask worker) makes
    the reader copy the window and read on: the same traces as with a free window."""
    from quicsm.traces.report import ParseReport

    path = ROOT / "tests" / "data" / "quic-go-v0.65" / "server.sqlog.gz"
    raw = gzip.decompress(path.read_bytes())

    def read(hold: bool) -> list[Any]:
        b = QlogBatcher(ParseReport())
        b.window = 4096
        b.buf.extend(b"x" * 8)
        view = memoryview(b.buf) if hold else None
        out = list(b.read(io.BytesIO(raw), str(path), TraceMeta(), "sqlog")) + b.flush()
        if view is not None:
            assert bytes(view) == b"x" * 8  # the held window is left alone
            view.release()
        return out

    free, held = read(False), read(True)
    assert free and [c.ids for c in free] == [c.ids for c in held]
    assert [c.state.tolist() for c in free] == [c.state.tolist() for c in held] and len(free[0].state) > 100


def _number_texts(rng: random.Random, n: int) -> list[str]:
    """JSON numbers of every shape the scanner's own float parser takes or hands to strtod: short and
    19-plus digit mantissas, leading zeros, exponents around 10^+-22, 2^53 +- 1, subnormals, negative zero."""
    fixed = [
        "0",
        "-0",
        "-0.0",
        "0.1",
        "0.000123",
        "9007199254740992",
        "9007199254740993",
        "9007199254740991.5",
        "1e22",
        "1e23",
        "123456789012345678",
        "1234567890123456789",
        "12345678901234567890",
        "5e-324",
        "1.7976931348623157e308",
        "2.2250738585072014e-308",
        "0.30000000000000004",
        "1e15",
        "1000000000000000.1",
        "4.35",
        "0.517971",
        "12.970761",
        "1E5",
        "1e+5",
        "1e-5",
        "00.5e0",
        "7e-23",
        "7e22",
    ]
    out = fixed[:]
    while len(out) < n:
        shape = rng.randrange(4)
        if shape == 0:
            out.append(repr(rng.uniform(0, 10 ** rng.randrange(0, 16))))
        elif shape == 1:
            whole = str(rng.randrange(0, 10 ** rng.randrange(1, 12)))
            frac = "".join(rng.choice("0123456789") for _ in range(rng.randrange(0, 14)))
            out.append(whole + ("." + frac if frac else ""))
        elif shape == 2:
            digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 24)))
            out.append(digits.lstrip("0") or "0")
        else:
            mant = f"{rng.randrange(1, 10 ** rng.randrange(1, 18))}.{rng.randrange(0, 10**6)}"
            out.append(f"{mant}e{rng.choice(['', '+', '-'])}{rng.randrange(0, 30)}")
    return out


def test_numbers_are_read_as_float_reads_them() -> None:
    """The C scanner parses times and metrics without strtod where the result is exact (Clinger's fast
    path); the traces must be those of Python's float() in the oracle, for every number shape."""
    texts = _number_texts(random.Random(7), 600)
    head = (
        '{"qlog_format":"NDJSON","qlog_version":"draft-02","title":"quic-go qlog","trace":{"vantage_point":'
        '{"type":"server"},"common_fields":{"ODCID":"ab","group_id":"ab","time_format":"relative"}}}\n'
    )
    lines = [head]
    for i, x in enumerate(texts):
        state = ("slow_start", "congestion_avoidance")[i % 2]
        lines.append(f'{{"time":{x},"name":"recovery:congestion_state_updated","data":{{"new":"{state}"}}}}\n')
        lines.append(f'{{"time":{x},"name":"transport:packet_sent","data":{{"header":{{"packet_number":{i}}}}}}}\n')
        lines.append(
            f'{{"time":{x},"name":"recovery:metrics_updated","data":{{"smoothed_rtt":{x},"min_rtt":{x},'
            f'"congestion_window":{i + 1000},"bytes_in_flight":{i},"ssthresh":{x},"latest_rtt":{x}}}}}\n'
        )
    data = "".join(lines).encode()
    traces, _ = agree(data, "ndjson")
    events = [e for t in traces for e in t.events]
    assert len(events) >= len(texts)  # the comparison is of read numbers, not of an empty output
    # ssthresh (a count: decimals are reported) and latest_rtt (read for states read from the metrics)
    assert any(e.ssthresh for e in events)
    traces, _ = agree(data, "ndjson", TraceMeta(states="metrics"))
    assert traces


def _split_file(first: list[str], second: list[str]) -> bytes:
    """An NDJSON qlog whose records after the header are ``first`` then ``second``, each padded by packet records
    so a split at the middle falls between the two lists."""
    head = '{"qlog_format":"NDJSON","qlog_version":"draft-02","title":"quic-go qlog","trace":{}}\n'
    pad = [f'{{"time":{500 + i},"name":"transport:packet_sent","data":{{"raw":{{"length":1200}}}}}}' for i in range(40)]
    lines = first + pad + [f'{{"time":{600 + i},"name":"transport:packet_received","data":{{}}}}' for i in range(40)]
    return (head + "\n".join(lines + second) + "\n").encode()


def _metrics(t: int, cwnd: int) -> str:
    return (
        f'{{"time":{t},"name":"recovery:metrics_updated","data":{{"congestion_window":{cwnd},"bytes_in_flight":{cwnd // 2},'
        f'"latest_rtt":{t % 7 + 20},"packets_in_flight":3,"pto_count":0}}}}'
    )


def _state(t: int, new: str, old: str | None = None) -> str:
    was = f',"old":"{old}"' if old else ""
    return f'{{"time":{t},"name":"recovery:congestion_state_updated","data":{{"new":"{new}"{was},"trigger":"t{t}"}}}}'


@pytest.mark.parametrize(
    "first, second",
    [
        # metrics before any state event on both sides; the first state event (with an old state) in the second
        (
            [_metrics(t, 1000 + t) for t in range(1, 30)],
            [_metrics(700, 5000), _state(701, "recovery", "slow_start")] + [_metrics(702 + t, 4000) for t in range(20)],
        ),
        # a state current at the split (the second part's metrics take it); new states there, one unknown, each
        # followed by metrics (in the next window's or part's rows: the state current after the merge)
        (
            [_state(1, "slow_start")] + [_metrics(2 + t, 1000) for t in range(20)],
            [_metrics(700 + t, 2000) for t in range(10)]
            + [_state(720, "Mystery_State")]
            + [_metrics(721 + t, 10) for t in range(10)]
            + [_state(740, "congestion_avoidance")]
            + [_metrics(741 + t, 20) for t in range(10)],
        ),
        # a record the C scanner hands to Python in the second part (a count as a string): it stops there, after
        # a state event the first thread's rows then take
        (
            [_state(1, "slow_start")],
            [_state(699, "recovery"), _metrics(700, 10)]
            + ['{"time":701,"name":"recovery:metrics_updated","data":{"congestion_window":"12"}}']
            + [_metrics(702 + t, 30) for t in range(5)]
            + [_state(710, "congestion_avoidance")],
        ),
        # the first part makes times deltas (delta_time): the second part is read again by the first thread
        (
            ['{"delta_time":1,"name":"recovery:congestion_state_updated","data":{"new":"slow_start"}}'],
            [_metrics(2, 10), _state(3, "recovery"), _metrics(4, 20)],
        ),
        # losses and timers on both sides (the metric-state reader's marks)
        (
            [_metrics(t, 1000 * t) for t in range(1, 12)]
            + ['{"time":12,"name":"recovery:packet_lost","data":{"packet_number":3}}'],
            ['{"time":700,"name":"recovery:loss_timer_updated","data":{"event_type":"expired","timer_type":"pto"}}']
            + [_metrics(701 + t, 500 * t + 100) for t in range(12)],
        ),
    ],
)
def test_records_split_between_two_threads_are_read_as_one_thread_reads_them(
    first: list[str], second: list[str]
) -> None:
    """The edges of the two-thread merge (_scan.c work_merge), each on both sides of the split: the state current
    at the split, the first state event and its old state, side tables kept before it, strings first seen in the
    second part, a record the second thread leaves to the handler, times made deltas before the split. One
    thread, two threads (every run split, always merged) and the twin against the oracle, states from every
    source."""
    data = _split_file(first, second)
    for meta in (TraceMeta(), TraceMeta(states="metrics"), TraceMeta(states="logged")):
        traces, _ = agree(data, "ndjson", meta, windows=(None, 333, 1000))
        assert traces or meta.states == "logged", (
            meta
        )  # (a trace with no state events is kept only when read from metrics)


def _guess_breakers(rng: random.Random, n: int) -> list[str]:
    """Records in quic-go's shape (its metrics' 7 members, its timers' 4) mixed with near misses of them: what the
    C scanner's member and name guesses (learnt from the records before) and its numbers only checked when a row
    keeps no metrics must not get wrong."""
    go = (
        '"min_rtt":{a},"smoothed_rtt":{b},"latest_rtt":{b},"rtt_variance":0.2,"congestion_window":{c},'
        '"bytes_in_flight":{d},"packets_in_flight":3'
    )
    shapes = [
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{' + go + "}}}}",
        '{{"time":{t},"name":"recovery:loss_timer_updated","data":{{"event_type":"set","timer_type":"pto",'
        '"packet_number_space":"application_data","delta":9.5}}}}',
        '{{"time":{t},"name":"recovery:loss_timer_updated","data":{{"event_type":"expired","timer_type":"pto"}}}}',
        '{{"time":{t},"name":"transport:packet_sent","data":{{"raw":{{"length":1200}}}}}}',
        # a member written otherwise (white space before the colon, another order, a longer or an escaped key)
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min_rtt" :{a},"congestion_window":{c}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"congestion_window":{c},"min_rtt":{a}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min_rtt_x":{a},"congestion_window":{c}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min\\u005frtt":{a},"congestion_window":{c}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min_rtt":{a},"min_rtt":{b}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"rtt_variance":{c},"ssthresh":{d}}}}}',
        '{{"name":"recovery:metrics_updated","time":{t},"data":{{"congestion_window":{c}}}}}',
        '{{"time" :{t},"name":"recovery:metrics_updated","data":{{"congestion_window":{c}}}}}',
        # white space or another byte around a comma (a member guessed with the comma before it), a member more
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min_rtt":{a} ,"smoothed_rtt":{b}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min_rtt":{a}, "smoothed_rtt":{b} }}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min_rtt":{a},,"smoothed_rtt":{b}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min_rtt":{a},}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min_rtt":{a}"smoothed_rtt":{b}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{' + go + ',"pto_count":1}}}}',
        '{{"time":{t}, "event_type":"x","name":"recovery:metrics_updated","data":{{"congestion_window":{c}}}}}',
        '{{"time":{t} ,"Name":"recovery:metrics_updated","data":{{"congestion_window":{c}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated" ,"data":{{"congestion_window":{c}}}}} ',
        # names: another case, a prefix of a learnt one, one sharing its slot, one with an escape
        '{{"time":{t},"name":"recovery:Metrics_Updated","data":{{"congestion_window":{c}}}}}',
        '{{"time":{t},"name":"recovery:metrics_update","data":{{"congestion_window":{c}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updatex","data":{{"congestion_window":{c}}}}}',
        '{{"time":{t},"name":"recovery:m_trics_updated","data":{{"congestion_window":{c}}}}}',
        '{{"time":{t},"name":"recovery:metrics\\u005fupdated","data":{{"congestion_window":{c}}}}}',
        '{{"time":{t},"name":"recovery:loss_timer_updated","data":{{"timer_type":"pto","event_type":"expired"}}}}',
        # numbers at the edges of what a row takes (read or only checked): RTTs at 1e15, counts at 2^63 - 1
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min_rtt":1e15,"congestion_window":{c}}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"min_rtt":9.99e14,"smoothed_rtt":1E2}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"smoothed_rtt":999999999999999,"min_rtt":-0}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"smoothed_rtt":1000000000000000}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"congestion_window":9223372036854775807}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"congestion_window":9223372036854775806}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"bytes_in_flight":9999999999999999999}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"ssthresh":18446744073709551615}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"bytes_in_flight":1.0,"min_rtt":"1"}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"congestion_window":-1}}}}',
        '{{"time":{t},"name":"recovery:metrics_updated","data":{{"congestion_window":1e3}}}}',
    ]
    out = []
    for i in range(n):
        near = rng.random() < 0.3
        shape = shapes[rng.randrange(len(shapes))] if near else shapes[i % 4]
        for k in range(1 + near):  # a near miss twice: what a guess learnt from the first would get wrong next
            a, b = rng.choice(("36.27944", "1", "0.5", "64.416")), rng.choice(("64.475952", "7", "1e1"))
            c, d = rng.randrange(1, 10**6), rng.randrange(10**6)
            out.append(shape.format(t=f"{i}.{k}{rng.randrange(100):02d}", a=a, b=b, c=c, d=d))
    return out


@pytest.mark.parametrize("logged", [True, False])
def test_records_that_break_the_guesses_are_read_as_the_old_reader_read_them(logged: bool) -> None:
    """quic-go's records mixed with near misses of them, with a state event first (a read without metrics then
    keeps none: the numbers are only checked) or without (metrics kept while they may give the states): one
    thread without the guesses (SSE2), two threads with them, and the twin, against the oracle."""
    head = '\x1e{"qlog_format":"JSON-SEQ","qlog_version":"0.3","title":"quic-go qlog","trace":{}}\n'
    first = ['{"time":0,"name":"recovery:congestion_state_updated","data":{"new":"slow_start"}}'] if logged else []
    # a member (after white space, or not) whose key, not refused, would let C decide what Python reads otherwise
    alt = [
        f'{{"name":"transport:packet_sent",{ws}"relative_time":{10**5 + k},"data":{{"note":"metric"}}}}'
        for ws, k in ((" ", 1), (" ", 2), ("", 3), ("", 4))
    ]
    for seed in range(3):
        records = first + _guess_breakers(random.Random(seed), 400) + alt
        data = (head + "".join(f"\x1e{r}\n" for r in records)).encode()
        for meta in (TraceMeta(), TraceMeta(states="metrics")):
            traces, report = agree(data, "sqlog", meta, windows=(None, 4096, 97))
            assert traces and report["issues"], (seed, meta)  # (the near misses are reported: read by Python)


@pytest.mark.parametrize(
    "word",
    [
        "congestion",
        "Congestion",
        "CC_STATE",
        "cc_state",
        "Metric",
        "metric",
        "packet_lost",
        "loss_timer",
        "spurious_loss",
        "congestio",
        "metri",
        "cc_stat",
        "los",
        "loss",
        "",
    ],
)
def test_record_class_at_every_offset(word: str) -> None:
    """The word that decides a record's class (decoded, a loss or timer record, or only its time) found
    wherever it sits: at every offset of a packet record (across the scanner's 16-byte SSE2 blocks, its 64- and
    32-byte AVX2 steps and its scalar tail), in records cut short as JSON (then the class decides whether that is
    reported), with newlines inside a record (the lines of what is reported), after bytes >= 0x80 (which the AVX2
    steps look at as they look at separators); the oracle and the twin agree."""
    header = b'\x1e{"qlog_format":"JSON-SEQ","qlog_version":"0.3","trace":{}}\n'
    state = b'\x1e{"time":1,"name":"recovery:congestion_state_updated","data":{"new":"slow_start"}}\n'
    out = [header, state]
    for pad in range(72):
        text = ("x" * pad + word).encode()
        rec = b'{"time":%d,"name":"transport:packet_sent","data":{"note":"%s"}}' % (pad + 2, text)
        out.append(b"\x1e" + rec + b"\n")
        out.append(b"\x1e" + rec[: 30 + pad] + b"\n")  # cut short: not JSON
        out.append(b"\x1e" + rec[:-1] + b"\n")  # not JSON, the word in it: reported only if the word is found
        out.append(b'\x1e{\n "time": %d,\n "name": "x",\n "data": {"n": "%s"}}\n' % (pad + 100, text))
        out.append(b"\x1e" + rec.replace(b"note", "n\u00f6te\t\u00e9".encode()) + b"\n")
    for pad in range(40):  # a loss record read only as one (its time as a string: float() takes it)
        name = b"x" * pad + b"recovery:packet_lost"
        out.append(b'\x1e{"time":"%d","name":"%s","data":{}}\n' % (1000 + pad, name))
    agree(b"".join(out), "sqlog", windows=(None, 4096, 61, 17))
