"""`quicsm grid report` on a grid of runs whose logs are real (traces/fig13: a desktop client, and a
client held to 10 % of a core, which keeps the server ApplicationLimited): the heatmap colours the cells
by the known page-load differences, and every cell's state comparison names the state that explains it."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from click.testing import CliRunner
from grid_fixtures import FakeTestbed

from quicsm.cli.main import cli
from quicsm.grids.execute import run_grid
from quicsm.grids.metrics import METRICS
from quicsm.grids.report import median_run
from quicsm.grids.results import compare_grid, load_grid_runs
from quicsm.grids.spec import grid_from_data

DATA: dict[str, Any] = {
    "name": "fig13grid",
    "description": "synthetic page-load times over real fig13 logs",
    "runs": 6,
    "axes": {"rate": [10, 50]},
    "arms": {"desktop": {"cc": "reno"}, "mobile": {"cc": "reno", "cpu_quota": "10%"}},
    "report": {"timelines": [{"rate": 50}]},
}


def _make(tmp_path: Path) -> Path:
    rng = np.random.default_rng(5)

    def plt(cfg: Any, r: int) -> float:
        slow = 1.5 if (cfg.name == "mobile" and cfg.rate_mbps == 50) else 1.0  # mobile slower at 50 only
        return float(rng.normal(1000 * slow, 20))

    tb = FakeTestbed(plt, mobile_arm="mobile")
    out = tmp_path / "runs"
    run_grid(grid_from_data(DATA), out, build=tb.build, run=tb.run)
    return out


def test_report_cli_writes_heatmaps_states_and_timelines(tmp_path: Path) -> None:
    out = _make(tmp_path)
    rep = tmp_path / "rep"
    res = CliRunner().invoke(cli, ["grid", "report", str(out), "-o", str(rep)])
    assert res.exit_code == 0, res.output
    assert "1/2 significant" in res.output
    for name in (
        "heatmap-mobile.svg",
        "heatmap-mobile.png",
        "report.html",
        "report.md",
        "cells.csv",
        "grid-report.json",
    ):
        assert (rep / name).is_file(), name
    assert (rep / "timeline-rate-50.svg").read_text().count("<path") >= 2
    rows = {r["cell"]: r for r in csv.DictReader((rep / "cells.csv").open())}
    slow, same = rows["rate=50"], rows["rate=10"]
    assert slow["significant"] == "True" and float(slow["diff_pct"]) < -40
    assert same["significant"] == "False"
    # the explanation of the blue cell: the throttled client keeps the server application-limited
    assert slow["states"].startswith("ApplicationLimited +") and "pp*" in slow["states"]
    html = (rep / "report.html").read_text()
    assert 'id="cell-rate-50"' in html and "cells/rate-50/compare.html" in html
    assert (rep / "cells" / "rate-50" / "compare.html").read_text().count("ApplicationLimited") > 2
    doc = json.loads((rep / "grid-report.json").read_text())
    assert doc["runs"] == {"planned": 24, "made": 24, "good": 24} and len(doc["cells"][0]["values_a"]) == 6


def test_report_options_override_the_file(tmp_path: Path) -> None:
    out = _make(tmp_path)
    runs = load_grid_runs(out)
    comp = compare_grid(runs, baseline="mobile", metric_name="goodput", correction="none", alpha=0.05)
    assert comp.baseline == "mobile" and comp.versus == ("desktop",) and comp.metric.name == "goodput"
    assert comp.cell("rate=50", "desktop").diff_pct > 40  # goodput: desktop better by the same runs
    rep = tmp_path / "r2"
    res = CliRunner().invoke(
        cli, ["grid", "report", str(out), "-o", str(rep), "--no-states", "--timeline", "rate=10", "--metric", "html_ms"]
    )
    assert res.exit_code == 0, res.output
    assert (rep / "timeline-rate-10.svg").is_file() and not (rep / "cells").exists()
    bad = CliRunner().invoke(cli, ["grid", "report", str(out), "-o", str(rep), "--baseline", "tablet"])
    assert bad.exit_code != 0 and "tablet" in bad.output


def test_median_run_and_partial_grids(tmp_path: Path) -> None:
    out = _make(tmp_path)
    runs = load_grid_runs(out)
    m = METRICS["plt"]
    rec = median_run(runs, "rate=50", "mobile", m)
    vals = sorted(runs.values("rate=50", "mobile", m))
    assert rec is not None and m.value(rec.meta) == vals[(len(vals) - 1) // 2]
    for d in (out / "rate-10").glob("mobile-0[3-5]"):
        (d / "meta.json").unlink()
    partial = load_grid_runs(out)
    assert partial.missing == 3 and len(partial.values("rate=10", "mobile", m)) == 3


def test_dry_run_lists_cells_and_what_is_done(tmp_path: Path) -> None:
    out = _make(tmp_path)
    f = tmp_path / "g.toml"
    f.write_text(
        'name = "fig13grid"\ndescription = "synthetic page-load times over real fig13 logs"\nruns = 6\n'
        '[axes]\nrate = [10, 50]\n[arms.desktop]\ncc = "reno"\n[arms.mobile]\ncc = "reno"\ncpu_quota = "10%"\n'
        "[report]\ntimelines = [{rate = 50}]\n"
    )
    res = CliRunner().invoke(cli, ["grid", "run", str(f), "--out", str(out), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "2 cell(s) x 2 arm(s) x 6 run(s) = 24 runs" in res.output and "24 good, 0 bad, 0 to do" in res.output


def test_metrics_read_meta() -> None:
    from quicsm.traces.runmeta import RunMeta

    meta = {
        "params": {"rate_mbps": 10.0},
        "result": {"plt_ms": 800.0, "client": {"bytes": 1_000_000, "page_ms": 100.0}},
        "emulator": {"tbf": {"down": {"packets": 990, "drops": 10}}, "relay": {"down": {"dropped": 20}}},
    }
    meta = msgspec.convert(meta, RunMeta)
    assert METRICS["plt"].value(meta) == 800.0 and METRICS["html_ms"].value(meta) == 100.0
    assert METRICS["goodput"].value(meta) == 10.0 and METRICS["utilization"].value(meta) == 1.0
    assert METRICS["loss_ratio"].value(meta) == 30 / 1000
    long_flow = msgspec.convert(
        {"params": {"rate_mbps": 10.0}, "result": {"plt_ms": 1.0, "client": {"goodput_mbps": 9.5}}}, RunMeta
    )
    assert METRICS["goodput"].value(long_flow) == 9.5 and METRICS["loss_ratio"].value(long_flow) is None


def test_state_names_from_logs_are_made_safe(tmp_path: Path) -> None:
    out = _make(tmp_path)
    for log in out.glob("rate-50/mobile-*/server.log"):  # a hostile state name where the throttled client's was
        log.write_bytes(log.read_bytes().replace(b"ApplicationLimited", b"=App\x1b]0;x\x07|Limited"))
    rep = tmp_path / "rep"
    res = CliRunner().invoke(cli, ["grid", "report", str(out), "-o", str(rep), "--no-diagrams"])
    assert res.exit_code == 0, res.output
    for name in ("cells.csv", "report.md", "report.html", "grid-report.json"):
        assert "\x1b" not in (rep / name).read_text() and "\x07" not in (rep / name).read_text(), name
    rows = {r["cell"]: r for r in csv.DictReader((rep / "cells.csv").open())}
    assert rows["rate=50"]["states"].startswith("'=App\\x1b]0;x\\x07|Limited +")  # no formula, controls shown
    assert "`=App\\x1b]0;x\\x07\\|Limited`" in (rep / "report.md").read_text()  # a code span in the table


def _sqlog(path: Path, times_ms: list[float]) -> None:
    head = {
        "file_schema": "urn:ietf:params:qlog:file:sequential",
        "serialization_format": "application/qlog+json-seq",
        "title": "quic-go qlog",
        "code_version": "v0.65.0",
        "trace": {"vantage_point": {"type": "server"}, "common_fields": {"group_id": path.stem}},
        "qlog_format": "JSON-SEQ",
        "qlog_version": "0.3",
    }
    recs = [head, {"time": times_ms[0], "name": "recovery:congestion_state_updated", "data": {"new": "slow_start"}}]
    recs += [
        {"time": t, "name": "recovery:metrics_updated", "data": {"congestion_window": 12000 + i, "bytes_in_flight": 1}}
        for i, t in enumerate(times_ms[1:])
    ]
    path.write_text("".join("\x1e" + json.dumps(r) + "\n" for r in recs))


def test_the_timeline_takes_the_page_load_not_the_idle_warm_up(tmp_path: Path) -> None:
    from quicsm.grids.timeline import cwnd_trace

    (tmp_path / "qlog").mkdir()
    _sqlog(tmp_path / "qlog" / "warm_server.sqlog", [0.1, 20_000.0])  # opened first, idle, closed at the end
    _sqlog(tmp_path / "qlog" / "page_server.sqlog", [0.2 + i for i in range(50)])  # the page load: 50 samples
    from quicsm.traces.runmeta import ResultMeta, RunMeta

    trace, kind = cwnd_trace(tmp_path, RunMeta(cc="cubic", result=ResultMeta(client={"warmup": 1})))
    assert kind == "qlog" and trace is not None and len([e for e in trace.events if e.cwnd]) == 49
