"""The fairness view over a multi-flow run directory (made here in the layout quicsm.testbed.flows
writes), and Jain's index."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from quicsm.compare.fairness import (
    fairness,
    fairness_json,
    fairness_markdown,
    flow_state_metrics,
    flows_timeline_svg,
    is_flow_run,
    jain_index,
    load_flow_run,
)
from quicsm.errors import QuicsmError
from quicsm.traces.contract import format_line

T0_US = 1_700_000_000_000_000  # the relay's first bin, Unix microseconds


def _log(path: Path, events: list[tuple[int, str, str, int]], cc: str, offset_us: int) -> None:
    """Contract lines with a Go-log wall-clock prefix; t_us on the flow's own clock."""
    import time

    lines = []
    for t_us, frm, to, cwnd in events:
        wall = (t_us + offset_us) / 1e6
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(wall)) + f".{int(wall * 1e6) % 1_000_000:06d}"
        lines.append(f"{stamp} " + format_line(conn="c1", t_us=t_us, cc=cc, frm=frm, to=to, cwnd=cwnd, trigger="ack"))
    path.write_text("\n".join(lines) + "\n")


def _run(tmp_path: Path, quic_mbps: float = 3.0, tcp_mbps: float = 2.0) -> Path:
    run = tmp_path / "r-00"
    flows = []
    bins = {"quic": [int(quic_mbps * 1e6 / 8 * 0.1)] * 100, "tcp1": [int(tcp_mbps * 1e6 / 8 * 0.1)] * 100}
    # the QUIC flow's clock starts at its process (offset 1 s before the relay's), the TCP one's at boot
    for name, stack, cc, offset in (
        ("quic", "quic-go", "cubic", T0_US - 1_000_000),
        ("tcp1", "tcp", "cubic", 5_000_000),
    ):
        d = run / f"flow-{name}"
        d.mkdir(parents=True)
        base = T0_US - offset  # t_us of the relay's first bin on this flow's clock
        events = [
            (base + 1_000_000, "Init", "SlowStart", 14_000),
            (base + 1_500_000, "SlowStart", "Recovery", 40_000),
            (base + 1_600_000, "Recovery", "CongestionAvoidance", 28_000),
            (base + 4_000_000, "CongestionAvoidance", "Recovery", 50_000),
            (base + 4_100_000, "Recovery", "CongestionAvoidance", 35_000),
        ]
        _log(d / "server.log", events, cc, offset)
        (d / "meta.json").write_text(json.dumps({"implementation": stack, "cc": cc}))
        flows.append(
            {
                "name": name,
                "stack": stack,
                "cc": cc,
                "start_s": 0.0,
                "throughput_mbps": quic_mbps if name == "quic" else tcp_mbps,
                "t_us_to_unix_us": offset,
                "start_unix_ns": (T0_US + 1_000_000) * 1000,
            }
        )
    meta = {
        "kind": "flows",
        "scenario": {"name": "t", "rate_mbps": 5.0},
        "flows": flows,
        "series": {"bin_s": 0.1, "t0_unix_ns": T0_US * 1000, "bytes": bins},
        "window_s": [2.0, 10.0],
        "clients_start_s": 1.0,
    }
    (run / "meta.json").write_text(json.dumps(meta))
    return run


def test_jain_index() -> None:
    assert jain_index([1, 1, 1, 1]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([2.71, 1.62]) == pytest.approx((4.33**2) / (2 * (2.71**2 + 1.62**2)))
    assert math.isnan(jain_index([])) and math.isnan(jain_index([0, 0]))


def test_flows_share_one_time_axis(tmp_path: Path) -> None:
    run = load_flow_run(_run(tmp_path))
    assert is_flow_run(run.path) and run.jain == pytest.approx(jain_index([3.0, 2.0]))
    quic, tcp = run.flows
    # both first events happened 1 s after the relay's first bin, whatever their own clocks
    for f in (quic, tcp):
        assert f.trace is not None and f.t(f.trace.events[0].t_us) == pytest.approx(1.0, abs=1e-5)
    m = flow_state_metrics(tcp, run.window_s)
    # in [2, 10]: Recovery from 4.0 to 4.1 s; the rest CongestionAvoidance, the trace ending at 4.1 s
    assert m["recovery_share"] == pytest.approx(0.1 / 2.1, rel=1e-3) and m["recovery_per_s"] == pytest.approx(
        1 / 2.1, rel=1e-3
    )


def test_markdown_json_and_svg(tmp_path: Path) -> None:
    runs = [load_flow_run(_run(tmp_path / "a", 3.0, 2.0)), load_flow_run(_run(tmp_path / "b", 3.2, 1.8))]
    md = fairness_markdown(fairness(runs))
    assert "| quic | quic-go | cubic | 2 | 3.10 (0.14) | 62.0% |" in md
    assert "Jain's index over the flows of a run" in md
    js = fairness_json(fairness(runs))
    assert [f["name"] for f in js["flows"]] == ["quic", "tcp1"] and len(js["runs"]) == 2
    svg = flows_timeline_svg(runs[0])
    assert svg.startswith("<svg") and svg.count("<path") >= 4 and "Recovery" in svg and "tcp1" in svg


def test_not_a_flow_run(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text(json.dumps({"implementation": "quic-go"}))
    assert not is_flow_run(tmp_path)
    with pytest.raises(QuicsmError, match="not a multi-flow run"):
        load_flow_run(tmp_path)


def test_compare_on_flow_runs_gives_the_fairness_view(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from quicsm.cli.main import cli

    a, b = _run(tmp_path / "a", 3.0, 2.0), _run(tmp_path / "b", 3.2, 1.8)
    html = tmp_path / "f.html"
    res = CliRunner().invoke(cli, ["compare", str(a), str(b), "--html", str(html), "--timelines", "1"])
    assert res.exit_code == 0, res.output
    # the fairness table first, then the usual comparison of the two flows' traces (one set per flow)
    assert "| quic | quic-go | cubic | 2 |" in res.output and "Jain's index" in res.output
    assert res.output.index("Jain's index") < res.output.index("tcp1 vs quic")
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "0.962" in page
    assert page.index("Fairness of flows on one bottleneck (2 runs)") < page.index('id="occupancy"')
    res = CliRunner().invoke(cli, ["compare", str(a), "--format", "csv"])
    assert res.exit_code == 0 and res.stdout.splitlines()[0].startswith("name,stack,cc,runs,mean_mbps")
    res = CliRunner().invoke(cli, ["compare", str(a), "--format", "json", "-q"])
    data = json.loads(res.stdout)
    assert [s["name"] for s in data["comparison"]["sets"]] == ["quic", "tcp1"] and len(data["runs"]) == 1
    res = CliRunner().invoke(cli, ["compare", str(a), str(b), "--name", "x"])
    assert res.exit_code != 0 and "the sets are the flows" in res.output


TABLE4 = Path(__file__).resolve().parents[2] / "traces" / "table4" / "quicgo-tcp2"


def test_html_report_of_bundled_flow_runs_holds_fairness_and_state_tables(tmp_path: Path) -> None:
    """IMC'17 Table 4 runs (quic-go Cubic vs two kernel TCP Cubic flows): the main compare report holds
    the fairness view (shares, Jain's index, one Fig. 5 timeline per run shown) above the usual state
    tables of the flows' traces, one set per flow; the Python API gives the same page as the verb."""
    from html import unescape

    from click.testing import CliRunner

    from quicsm.cli.main import cli
    from quicsm.compare import CompareOptions
    from quicsm.compare.fairness import compare_flow_runs, flows_report_html

    runs = sorted(str(p) for p in TABLE4.iterdir())[:3]
    assert len(runs) == 3
    html = tmp_path / "report.html"
    res = CliRunner().invoke(cli, ["compare", *runs, "--html", str(html), "--timelines", "1", "-q"])
    assert res.exit_code == 0, res.output
    page = html.read_text()
    fair = page.index("Fairness of flows on one bottleneck (3 runs)")
    assert fair < page.index('id="occupancy"') < page.index("tcp1 vs quic") < page.index("tcp2 vs quic")
    assert "Jain's index over the flows of a run" in unescape(page)
    for flow in ("quic", "tcp1", "tcp2"):
        assert f"<td>{flow}</td>" in page and f"flow-{flow} of 3 runs" in page
    loaded = [load_flow_run(r) for r in runs]
    for r in loaded:  # each run's Jain index, as the page prints it
        assert f"<td>{r.jain:.3f}</td>" in page
    assert '<td class="l">CongestionAvoidance</td>' in page and '<td class="l">Recovery</td>' in page
    assert page.count("(Jain ") == 1  # --timelines 1: one Fig. 5 timeline
    fc = compare_flow_runs(runs, CompareOptions(engine="synoptic", timelines=1))  # the verb's default engine
    assert [s.name for s in fc.sets] == ["quic", "tcp1", "tcp2"] and [len(s) for s in fc.sets] == [3, 3, 3]
    assert flows_report_html(fc, timelines=1) == page


def test_html_report_renders_extra_sections_above_the_state_tables() -> None:
    """The hook the fairness view uses: (title, HTML) sections come before the occupancy table,
    the title escaped, the HTML as given."""
    from compare_fixtures import make_set

    from quicsm.compare import CompareOptions, compare
    from quicsm.compare.html import to_html

    c = compare(
        [make_set("a", 4, 0.1, seed=1), make_set("b", 4, 0.5, seed=2)], CompareOptions(resamples=0, models=False)
    )
    html = to_html(c, sections=[("Flows <&> shares", '<table id="extra"><tr><td>x</td></tr></table>')])
    assert '<h2 id="section1">Flows &lt;&amp;&gt; shares</h2>' in html
    assert html.index('<table id="extra">') < html.index('id="occupancy"')
    assert "section1" not in to_html(c)
