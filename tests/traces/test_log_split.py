"""The text-log scanner in two threads (_scan.c ``scan_split``): a window split at any line start gives what
one thread gives: the same columns, string table (ids and order of first appearance), lines left to the
Python reader, side list and line numbers; and parse_inputs gives the same traces and report."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quicsm.traces import columnar, parse_inputs
from quicsm.traces.contract import TAG_BYTES, format_line
from tests.traces.test_columnar import ALLOWED, REFUSED, crafted

if not columnar.available():
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but the C scanner quicsm.traces._scan is not built", pytrace=False)
    pytest.skip("the C scanner is not built (python3 setup.py build_ext --inplace)", allow_module_level=True)

scan_c: Any = columnar._scan_columns


def mixed() -> bytes:
    """Lines the second thread reads (canonical, general ones without a kind, recovery or extra field) and
    lines it leaves to the first (extra fields, kinds, recoveries, an upper-case cc, non-ASCII and non-UTF-8
    strings, refused lines), strings first seen late, noise, and a last line without its newline."""
    lines = []
    for i in range(12):
        lines.append(format_line(conn=f"k{i % 5}", t_us=10 * i, cc="cubic", frm="SlowStart", to="Recovery", cwnd=i))
        lines.append(f"[1122/143015.{i}:INFO:x.cc(1)] noise line {i}")
        lines.append(ALLOWED[(3 * i) % len(ALLOWED)])
        lines.append(f"QUICSM v=1 conn=n{i} t_us={i} cc=reno to=S{i} ssthresh=inf trigger=t{i}")
        if i % 4 == 3:
            lines.append(REFUSED[i % len(REFUSED)])
    data = ("\n".join(lines) + "\n").encode()
    return data + b"QUICSM v=1 conn=\xff t_us=1 cc=cubic to=X\nQUICSM v=1 conn=last t_us=2 cc=cubic to=Y"


def scan(data: bytes, cuts: list[int], split: int) -> tuple[Any, ...]:
    """scan_columns over ``data`` in the windows that end at ``cuts`` (and at its end), joined as one call's."""
    table: dict[bytes, int] = {}
    names: list[str] = []
    cols: list[list[bytes]] = [[] for _ in range(8)]
    fallback, side, lineno, pos, rows = [], [], 1, 0, 0
    for cut in [*cuts, len(data)]:
        raw, fb, lineno, sd = scan_c(data, pos, cut, TAG_BYTES, lineno, table, names, split)
        for j in range(8):
            cols[j].append(raw[j])
        fallback += [(rows + r, ln, payload) for r, ln, payload in fb]
        side += [(rows + r, *rest) for r, *rest in sd]
        rows += len(raw[0]) // 8
        pos = cut
    return tuple(b"".join(c) for c in cols), fallback, side, lineno, table, names


@pytest.mark.parametrize("data", [mixed(), crafted()], ids=["mixed", "crafted"])
def test_a_window_split_at_any_line_is_read_as_one_thread_reads_it(data: bytes) -> None:
    one = scan(data, [], 0)
    lines = np.frombuffer(one[0][0], np.int64)
    assert len(lines) >= 20 and one[1] and one[2]  # rows, lines left to Python, side entries: all compared
    assert lines.tolist() == sorted(lines.tolist()) and lines[-1] == one[3] - data.endswith(b"\n")
    # a window [0, cut) is split at the first line start past its middle: at every line, in turn
    starts = [i + 1 for i in range(len(data)) if data[i] == 10]
    for b in starts:
        cut = data.rfind(b"\n", 0, 2 * b) + 1
        assert scan(data, [cut], -1) == scan(data, [cut], 0), b
    assert scan(data, [], 1) == one  # a second part not begun in time is taken back: the same


def test_parse_inputs_reads_a_log_the_same_in_one_thread_and_two(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "mixed.log"
    path.write_bytes(mixed() * 40)
    got = []
    for split in (0, -1, -4096):
        monkeypatch.setattr(columnar, "_scan_columns", lambda *a, split=split: scan_c(*a, split))
        res = parse_inputs([str(path)], require_transitions=False)
        got.append(([(t.key, t.events) for t in res.traces], res.report.to_json()))
    assert got[0][0] and all(g == got[0] for g in got)
