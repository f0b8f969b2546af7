"""``quicsm compare`` from connection rows read from columns (text logs and Parquet stores) gives byte
for byte what it gives from rows made of trace objects (the object readers as the oracle): JSON, HTML, diagrams and heatmap, on the bundled sets and on logs written
to hit every odd case (restarts, ``ev=close``, timestamps going backwards, updates, single events,
malformed lines, labels, ``--where``, a Parquet store, a JSONL set next to logs, Dask workers)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.traces import columnar, parse
from quicsm.traces.contract import format_line
from quicsm.traces.report import ParseReport

pytestmark = pytest.mark.skipif(not columnar.available(), reason="needs the C extension quicsm.traces._scan")

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "traces"
OUTPUTS = ("c.json", "r.html", "side.dot", "diff.dot", "heat.svg")


_READ = parse.read_inputs


def _objects(
    paths,
    over=parse.Overrides(),
    *,
    report=None,
    on_bytes=None,
    metrics=True,
    scopes=None,
    storage_options=None,
):  # type: ignore[no-untyped-def]
    """Every input's traces, text logs cut by the oracle (tests/traces/oracle.py), as the readers give
    them: columns (of the oracle's trace objects)."""
    from conftest import input_kind

    from quicsm.files import open_binary
    from quicsm.traces.inputs import Sidecars, expand_inputs, trace_scopes
    from tests.traces.oracle import object_traces

    files = list(paths) if scopes else expand_inputs(paths)
    scopes = scopes or trace_scopes(files)
    report = report if report is not None else ParseReport()
    for path in files:
        if input_kind(path) != "log":
            yield from _READ([path], over, report=report, metrics=metrics, scopes={path: scopes[path]})
            continue
        report.files += 1
        with open_binary(path) as fh:
            traces = object_traces(fh.read(), path, scopes[path], over.over(Sidecars()(path)), report)
        yield columnar.columns_of(traces)


def _run(args: list[str], out: Path, *, rows: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    out.mkdir(parents=True, exist_ok=True)
    files = [
        *("--format", "json", "-o", str(out / "c.json"), "--heatmap", str(out / "heat.svg")),
        *("--diagram", str(out / "side.dot"), "--diff-diagram", str(out / "diff.dot"), "-q"),
    ]
    if shutil.which("dot"):  # the HTML report inlines Graphviz's SVG
        files += ["--html", str(out / "r.html")]
    with monkeypatch.context() as m:
        if not rows:
            m.setattr(parse, "read_inputs", _objects)
        res = CliRunner().invoke(cli, ["compare", *args, *files], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def assert_same(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """The outputs from rows equal the object path's; returns them."""
    want = _run(args, tmp_path / "objects", rows=False, monkeypatch=monkeypatch)
    got = _run(args, tmp_path / "rows", rows=True, monkeypatch=monkeypatch)
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name
    return got


@pytest.mark.parametrize(
    "sets",
    [
        ["fig13/desktop", "fig13/mobile"],
        ["fig10/v0.33.0", "fig10/v0.65.0"],
        ["quiche-fig13-bbr2/desktop", "quiche-fig13-bbr2/mobile"],
    ],
)
def test_bundled_sets_identical(sets: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got = assert_same([str(TRACES / s) for s in sets] + ["--bootstrap", "200"], tmp_path, monkeypatch)
    data = json.loads(got["c.json"])
    assert all(s["connections"] > 0 for s in data["sets"])


def test_bundled_by_label_recovery_states(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = [str(TRACES / "fig10"), "--by", "version", "--where", "jitter_ms=0", "--order", "v0.65.0"]
    assert_same([*args, "--bootstrap", "100", "--engine", "ktails", "--recovery-states"], tmp_path, monkeypatch)


def _odd_log(path: Path, seed: int, app: float, *, ccs: tuple[str, ...] = ("cubic",)) -> None:
    """Connections with every case the trace cutter handles, interleaved, with noise and a bad line."""
    rng = random.Random(seed)
    cubic = ["SlowStart", "CongestionAvoidance", "ApplicationLimited", "Recovery"]
    bbr = ["Startup", "Drain", "ProbeBw", "ProbeRtt"]
    lines: list[tuple[int, str]] = []
    for c in range(24):
        conn = f"0x{c + 1:x}"
        cc = ccs[c % len(ccs)]
        states = bbr if cc == "bbr" else cubic
        t = rng.randrange(1_000, 50_000)
        for _ in range(1 + (c % 5 == 0)):  # some keys start again after Init (a restart)
            prev = "Init"
            steps = 1 if c == 7 else rng.randrange(3, 12)  # connection 7: a single transition, no time
            for k in range(steps):
                nxt = states[0] if k == 0 else rng.choice([s for s in states if s != prev])
                if nxt == "ApplicationLimited" and rng.random() > app:
                    nxt = "CongestionAvoidance" if prev != "CongestionAvoidance" else "SlowStart"
                rec = rng.choice(["-", "conservation", "growth"]) if cc == "bbr" else None
                lines.append(
                    (
                        t,
                        format_line(
                            conn=conn, t_us=t, cc=cc, frm=prev, to=nxt, cwnd=rng.randrange(14600, 10**6), recovery=rec
                        ),
                    )
                )
                if rng.random() < 0.3:
                    lines.append((t + 5, format_line(conn=conn, t_us=t + 5, cc=cc, ev="metrics", inflight=1000)))
                if rng.random() < 0.2:
                    lines.append((t + 7, format_line(conn=conn, t_us=t + 7, cc=cc, ev="update", to=nxt)))
                if c % 6 == 3 and k == 2:  # a record timed before the trace's latest one
                    lines.append((t + 9, format_line(conn=conn, t_us=t - 4_000, cc=cc, frm=nxt, to=states[1])))
                prev = nxt
                t += rng.randrange(1_000, 300_000)
            if c % 4 == 1:  # closed; some keys are used again after their close
                lines.append((t, format_line(conn=conn, t_us=t, cc=cc, ev="close")))
                t += 10
                if c % 8 == 1:
                    lines.append((t, format_line(conn=conn, t_us=t, cc=cc, frm="SlowStart", to="Recovery")))
                    lines.append((t + 50_000, format_line(conn=conn, t_us=t + 50_000, cc=cc, ev="close")))
    lines.sort(key=lambda x: x[0])
    text = [line for _, line in lines]
    text.insert(len(text) // 2, "QUICSM v=1 conn=0xbad t_us=oops cc=cubic from=Init to=SlowStart")
    text.insert(3, "[noise] something unrelated 12345")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(text) + "\n")


@pytest.fixture
def odd(tmp_path: Path) -> Path:
    """Two runs per side, labels from meta.json, one side with a second controller."""
    root = tmp_path / "odd"
    for side, app, seed, ccs in (("desktop", 0.1, 1, ("cubic",)), ("mobile", 0.6, 5, ("cubic", "bbr"))):
        for run in range(2):
            d = root / side / f"run{run}"
            _odd_log(d / "server.log", seed + run, app, ccs=ccs)
            (d / "meta.json").write_text(json.dumps({"labels": {"client": side, "run": str(run)}}))
    return root


def test_odd_logs_identical(odd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got = assert_same([str(odd / "desktop"), str(odd / "mobile"), "--bootstrap", "100"], tmp_path, monkeypatch)
    data = json.loads(got["c.json"])
    assert any("left out of occupancy" in w for w in data["warnings"])  # the single-transition connection
    assert any("mixes congestion controllers" in w for w in data["warnings"])


@pytest.mark.parametrize(
    "extra",
    [
        ["--where", "client=desktop", "--vs", "client=mobile", "--engine", "dfg", "--recovery-states"],
        ["--by", "run", "--where", "cc=cubic", "--no-phases", "--timelines", "5"],
        ["--where", "run=0", "--vs", "run=1", "--vs", "cc=bbr", "--all-pairs", "--engine", "ktails", "-k", "1"],
    ],
)
def test_odd_logs_selectors(extra: list[str], odd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_same([str(odd), *extra, "--bootstrap", "50"], tmp_path, monkeypatch)


def test_where_on_every_set(odd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = [str(odd / "desktop"), str(odd / "mobile"), "--where", "run=1", "--where", "cc=cubic", "--bootstrap", "50"]
    assert_same(args, tmp_path, monkeypatch)


def test_parquet_store_and_jsonl_sets(odd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyarrow")
    store = tmp_path / "mobile.parquet"
    jsonl = tmp_path / "desktop.jsonl"
    for target, src in ((store, odd / "mobile"), (jsonl, odd / "desktop")):
        res = CliRunner().invoke(cli, ["parse", str(src), "-o", str(target)])
        assert res.exit_code == 0, res.output
    # a log, a store and a JSONL file (the object path) side by side, store timelines in the HTML
    args = [str(odd / "desktop"), str(store), str(jsonl), "--timelines", "4", "--bootstrap", "50"]
    got = assert_same(args, tmp_path / "three", monkeypatch)
    assert len(json.loads(got["c.json"])["sets"]) == 3
    assert_same([str(store), "--by", "run", "--bootstrap", "50"], tmp_path / "by", monkeypatch)


def test_rows_make_no_event_objects(odd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without timelines, no trace object with events is made on the columnar path."""

    def fail(*args: object, **kw: object) -> None:
        raise AssertionError("an object per event was made")

    monkeypatch.setattr(columnar.TraceColumns, "traces", fail)
    monkeypatch.setattr("tests.traces.oracle.TraceBuilder.feed", fail)
    args = [str(odd / "desktop"), str(odd / "mobile"), "--bootstrap", "0", "--format", "json", "-q"]
    res = CliRunner().invoke(cli, ["compare", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output


def test_dask_workers_return_rows(odd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--dask local:2``: each worker turns one file into rows (never whole traces); same outputs."""
    pytest.importorskip("distributed")
    import os

    from quicsm.traces import parse as parse_module

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))

    def fail(*args: object, **kw: object) -> None:
        raise AssertionError("compare asked the workers for traces")

    monkeypatch.setattr(parse_module, "traces_task", fail)
    args = [str(odd / "desktop"), str(odd / "mobile"), "--bootstrap", "50", "--timelines", "2"]
    want = _run(args, tmp_path / "objects", rows=False, monkeypatch=monkeypatch)
    got = _run([*args, "--dask", "local:2"], tmp_path / "dask", rows=True, monkeypatch=monkeypatch)
    assert got == want
