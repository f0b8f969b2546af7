"""The qlog reader against the reader it replaced (tests/traces/qlog_oracle.py): the same traces and the
same report (counts, problems with file, line and reason) on every qlog we have and on mutated ones."""

from __future__ import annotations

import gzip
import io
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from quicsm.traces import qlog
from quicsm.traces.events import TraceMeta
from quicsm.traces.report import ParseReport
from tests.fuzz.mutate import load_seeds, mutate
from tests.traces import qlog_oracle

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = ROOT.parent.parent / "shared" / "reference" / "qlog-samples"
"""The foreign stacks' qlogs beside the checkout on the project's machines (not in the repository)."""
QLOGS = sorted(
    str(p)
    for where in (ROOT / "tests", ROOT / "traces", FOREIGN)
    for pattern in ("*.qlog", "*.qlog.gz", "*.sqlog", "*.sqlog.gz")
    for p in where.rglob(pattern)
)


def _reader(module: Any, data: bytes) -> Callable[..., Iterator[Any]]:
    from quicsm.traces.sniff import sniff_bytes

    kind = sniff_bytes(data[:65536], "qlog")
    return {"qlog": module.read_qlog, "sqlog": module.read_sqlog}.get(kind, module.read_ndjson)


def _both(data: bytes, meta: TraceMeta = TraceMeta()) -> tuple[object, object]:
    """The old reader's and today's reading; today's held to logged states (the old one inferred none)."""
    out = []
    for module in (qlog_oracle, qlog):
        report = ParseReport(keep=1 << 20)
        read = _reader(module, data)
        use = replace(meta, states="logged") if module is qlog else meta
        traces = list(read(io.BytesIO(data), "in/x.sqlog", use, report))
        out.append((traces, report.to_json()))
    return out[0], out[1]


def _every_qlog(head: int | None, metas: tuple[TraceMeta, ...]) -> None:
    assert len(QLOGS) >= 12, QLOGS
    read = 0
    for path in QLOGS:
        raw = Path(path).read_bytes()
        data = (gzip.decompress(raw) if path.endswith(".gz") else raw)[:head]
        for meta in metas:
            want, got = _both(data, meta)
            assert got == want, path
        read += bool(want[0])  # type: ignore[index]
    assert read >= 10  # most hold traces: the comparison is not of empty outputs


def test_the_head_of_every_qlog_we_have_is_read_as_the_old_reader_read_it() -> None:
    _every_qlog(1 << 16, (TraceMeta(),))  # cut files: whole-document qlogs are salvaged


@pytest.mark.slow
def test_every_qlog_we_have_is_read_as_the_old_reader_read_it() -> None:
    _every_qlog(None, (TraceMeta(), TraceMeta(cc="cubic", implementation="x")))


@pytest.mark.parametrize("kind", ["sqlog", "ndjson", "qlog"])
def test_mutated_qlogs_are_read_as_the_old_reader_read_them(kind: str) -> None:
    seeds = load_seeds()
    rng = random.Random(18)
    base = "qlog" if kind == "qlog" else "sqlog"
    with_traces = problems = 0
    for _ in range(300):
        data = mutate(seeds.pick(rng, base), rng, seeds, base)
        if kind == "ndjson":  # quic-go's older format: the same records, one a line
            data = data.replace(b"\x1e", b"")
        want, got = _both(data)
        assert got == want, data[:300]
        with_traces += bool(want[0])  # type: ignore[index]
        problems += bool(want[1]["issues"])  # type: ignore[index]
    assert with_traces > 30 and problems > 30, (with_traces, problems)
