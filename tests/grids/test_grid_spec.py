"""Grid files: what they expand to (cells, arms, the run plan and its order, every run's configuration and
labels), what a fingerprint ties a run to, and the errors a user meets, each naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicsm.errors import InputError, TestbedError
from quicsm.grids.spec import grid_from_data, load_grid

GRID = """
name = "fig6a"
description = "QUIC vs TCP"
runs = 3

[base]
rtt = "36ms"
buffer = "1bdp"

[axes]
rate = [10, "50mbit"]
size = ["5KB", "10MB"]

[arms.tcp]
stack = "tcp"
cc = "cubic"

[arms.quic]
stack = "quic-go"
cc = "cubic"
zero_rtt = true

[report]
baseline = "tcp"
timelines = [{rate = 10, size = "10MB"}]
"""


def _grid(tmp_path: Path, text: str = GRID, name: str = "g.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_cells_arms_and_configs(tmp_path: Path) -> None:
    g = load_grid(_grid(tmp_path))
    assert (g.name, g.runs, g.arm_names) == ("fig6a", 3, ["tcp", "quic"])
    cells = g.cells()
    assert [c.id for c in cells] == [
        "rate=10,size=5KB",
        "rate=10,size=10MB",
        "rate=50mbit,size=5KB",
        "rate=50mbit,size=10MB",
    ]
    assert cells[1].dirname == "rate-10_size-10MB"
    quic = g.configs[(cells[3].id, "quic")]
    assert (quic.rate_mbps, quic.size, quic.rtt_ms, quic.queue, quic.zero_rtt, quic.stack) == (
        50.0,
        10_000_000,
        36.0,
        "1bdp",
        True,
        "quic-go",
    )
    tcp = g.configs[(cells[0].id, "tcp")]
    assert (tcp.stack, tcp.zero_rtt, tcp.size, tcp.name) == ("tcp", False, 5000, "tcp")
    labels = tcp.label_dict()
    assert (labels["grid"], labels["cell"], labels["arm"], labels["rate"], labels["size"]) == (
        "fig6a",
        "rate=10,size=5KB",
        "tcp",
        "10",
        "5KB",
    )
    assert g.timeline_cells() == [cells[1]]


def test_plan_orders_rounds_then_cells_with_arms_back_to_back(tmp_path: Path) -> None:
    g = load_grid(_grid(tmp_path))
    plan = g.plan()
    assert len(plan) == 4 * 2 * 3
    # rounds: every cell's round 0 (tcp, quic back to back) before any round 1
    assert [(p.cell.id, p.arm, p.round) for p in plan[:4]] == [
        ("rate=10,size=5KB", "tcp", 0),
        ("rate=10,size=5KB", "quic", 0),
        ("rate=10,size=10MB", "tcp", 0),
        ("rate=10,size=10MB", "quic", 0),
    ]
    assert plan[8].round == 1 and plan[8].rel_dir == "rate-10_size-5KB/tcp-01"
    by_cells = load_grid(_grid(tmp_path, GRID.replace("runs = 3", 'runs = 3\norder = "cells"')))
    assert [(p.cell.id, p.round) for p in by_cells.plan()[:6:2]] == [("rate=10,size=5KB", r) for r in range(3)]


def test_a_loss_cell_keeps_its_run_directory_and_gets_a_url_safe_report_name() -> None:
    g = grid_from_data({"name": "x", "axes": {"loss": ["0.1%", "1%"]}, "arms": {"a": {"stack": "tcp"}}})
    cells = g.cells()
    # the run directories keep "%" (runs already made resume by them); report files and links spell it out
    assert [c.dirname for c in cells] == ["loss-0.1%", "loss-1%"]
    assert [c.slug for c in cells] == ["loss-0.1pct", "loss-1pct"]


def test_fingerprint_follows_what_a_run_measures(tmp_path: Path) -> None:
    a = load_grid(_grid(tmp_path)).plan()
    b = load_grid(_grid(tmp_path, GRID.replace("runs = 3", "runs = 5"), "b.toml")).plan()
    assert [p.fingerprint for p in a] == [p.fingerprint for p in b[: len(a)]]  # more rounds: same runs
    c = load_grid(_grid(tmp_path, GRID.replace('rtt = "36ms"', "rtt = 40"), "c.toml")).plan()
    assert a[0].fingerprint != c[0].fingerprint
    assert a[0].fingerprint != a[1].fingerprint  # tcp and quic of one cell


def test_a_grid_without_axes_has_one_cell(tmp_path: Path) -> None:
    g = grid_from_data({"arms": {"a": {"cc": "reno"}, "b": {"cc": "cubic"}}}, name="pair")
    assert [c.id for c in g.cells()] == ["all"] and len(g.plan()) == 2 * 10
    assert g.plan()[0].rel_dir == "all/a-00"


@pytest.mark.parametrize(
    ("edit", "msg"),
    [
        (("[arms.quic]", "[arms.quic]\nrat = 5"), r"\[arms.quic\]: rat: unknown key \(known: .*rate"),
        (("[base]", "[base]\nrate = 10"), "rate is an axis and also in \\[base\\]"),
        (("[arms.quic]", "[arms.quic]\nsize = 5"), "size is an axis and also set by \\[arms.quic\\]"),
        (('rate = [10, "50mbit"]', "rate = [10, 10]"), "rate: a value is listed twice"),
        (('rate = [10, "50mbit"]', "rate = []"), "rate: give at least one value"),
        (('rate = [10, "50mbit"]', 'rate = [10, "fast"]'), "rate: rate 'fast'"),
        (('rate = [10, "50mbit"]', "rate = [10]\nseed = [1, 2]"), "seed: not an axis"),
        (('baseline = "tcp"', 'baseline = "udp"'), "names arm 'udp'"),
        (('baseline = "tcp"', 'metric = "speed"'), "metric 'speed'"),
        (('timelines = [{rate = 10, size = "10MB"}]', "timelines = [{rate = 7}]"), "no cell has"),
        (('name = "fig6a"', 'name = "fig6a"\nrunz = 3'), r"bad.toml: runz: unknown key \(known: arms, axes, base"),
        (("runs = 3", "runs = 0"), "runs"),
        (("zero_rtt = true", 'zero_rtt = "yes"'), "zero_rtt"),
        (('cc = "cubic"\nzero_rtt = true', 'cc = "bbr2"'), "cc 'bbr2' on quic-go"),
        (("[arms.tcp]", "[arms.tcp]\nzero_rtt = true"), "0-RTT: stack tcp"),
        (("[arms.tcp]", '[arms.tcp]\nhttp = "h3"'), "http 'h3' on tcp"),
        (("[arms.tcp]", '[arms."bad/name"]\n[arms.tcp]'), "use letters"),
    ],
)
def test_errors_name_file_table_and_key(tmp_path: Path, edit: tuple[str, str], msg: str) -> None:
    p = _grid(tmp_path, GRID.replace(*edit, 1), "bad.toml")
    with pytest.raises(TestbedError, match=msg) as info:
        load_grid(p)
    assert "bad.toml" in str(info.value)


def test_a_cell_with_a_run_it_cannot_make_is_named(tmp_path: Path) -> None:
    text = GRID.replace('size = ["5KB", "10MB"]', 'size = ["5KB", "10MB"]\nhttp = ["h2", "h1"]')
    with pytest.raises(TestbedError, match=r"cell rate=10,size=5KB,http=h2, arm quic: http 'h2' on quic-go"):
        load_grid(_grid(tmp_path, text))


def test_no_arms_and_not_toml(tmp_path: Path) -> None:
    with pytest.raises(TestbedError, match="needs at least one arm"):
        load_grid(_grid(tmp_path, "[axes]\nrate = [1]\n"))
    with pytest.raises(TestbedError, match=r"not valid TOML \(.*line 1"):
        load_grid(_grid(tmp_path, "[axes\n"))
    with pytest.raises(InputError, match="missing.toml: no such file"):
        load_grid(tmp_path / "missing.toml")


def test_axis_values_that_would_share_a_cell_directory_are_refused() -> None:
    with pytest.raises(TestbedError, match="grid g: two cells would share a directory"):
        grid_from_data({"axes": {"cc": ["x y", "x/y"]}, "arms": {"a": {"stack": "quic-go"}}}, name="g")
