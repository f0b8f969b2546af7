"""Consistency checks of a server's contract lines, per connection, in the order the server wrote them: the
time never goes back, every transition starts from the state the previous line ended in (``from`` = previous
``to``), the first line is the Init transition, and an ``ev=close`` line (when the stack prints one) is the
connection's last. Used by the end-to-end tests of the stacks that run a patched server."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from quicsm.traces import Trace, parse_inputs
from quicsm.traces.contract import parse_line


@dataclass
class ConnLines:
    conn: str
    cc: str
    times: list[int] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    closed_at: int | None = None


def contract_problems(lines: Iterable[str], *, need_close: bool = True) -> tuple[dict[str, ConnLines], list[str]]:
    """(connections by key, problems found); no problem means the lines pass."""
    conns: dict[str, ConnLines] = {}
    current: dict[str, ConnLines] = {}
    problems: list[str] = []
    for n, line in enumerate(lines, 1):
        rec = parse_line(line)
        if rec is None:
            continue
        ev = rec.event
        c = current.get(rec.conn)
        if c is None or (c.closed_at is not None and ev.kind == "transition" and ev.prev == "Init"):
            c = current[rec.conn] = ConnLines(rec.conn, rec.cc)  # a new connection (or a reused address)
            conns[rec.conn if rec.conn not in conns else f"{rec.conn}#{n}"] = c
        elif c.closed_at is not None:
            problems.append(f"line {n}: conn {rec.conn} has a line after its ev=close")
        if c.times and ev.t_us < c.times[-1]:
            problems.append(f"line {n}: conn {rec.conn} time goes back ({ev.t_us} after {c.times[-1]})")
        c.times.append(ev.t_us)
        if ev.kind == "close":
            c.closed_at = ev.t_us
            continue
        if ev.kind != "transition":
            continue
        if not c.states:
            if ev.prev != "Init":
                problems.append(f"line {n}: conn {rec.conn} starts with from={ev.prev}, not Init")
        elif ev.prev != c.states[-1]:
            problems.append(f"line {n}: conn {rec.conn} from={ev.prev} but the previous line went to {c.states[-1]}")
        c.states.append(ev.state)
    if need_close:
        problems += [f"conn {c.conn} has no ev=close line" for c in conns.values() if c.closed_at is None]
    return conns, problems


def check_contract_file(path: Path, *, need_close: bool = True) -> dict[str, ConnLines]:
    """The connections of ``path``; raises AssertionError listing every problem."""
    conns, problems = contract_problems(path.read_text(errors="replace").splitlines(), need_close=need_close)
    assert conns, f"{path}: no contract lines"
    assert not problems, f"{path}: " + "; ".join(problems[:10])
    return conns


def browser_page_trace(run_dir: Path, first: str) -> Trace:
    """The trace of the connection that carried a browser's page load in ``run_dir/server.log``.

    Chromium may race a second QUIC connection to the origin (seen under load: two connections in one run's
    log, the second idle or short). Every connection the server logged must have its states logged from the
    Init transition into ``first`` and carry the browser's client label; the page's connection is the one
    with the most state events."""
    traces = parse_inputs([str(run_dir / "server.log")]).traces
    assert traces, f"{run_dir}/server.log: no connection logged its states"
    for t in traces:
        assert t.events[0].prev == "Init" and t.states()[0] == first, (t.key, t.states()[:5])
        assert t.labels["client"] == "chromium", t.labels
    return max(traces, key=lambda t: len(t.events))
