"""The heatmaps' significance colouring on synthetic run results with known differences: a cell is red
when the compared arm is really better, blue when really worse, white when the arms do not differ (or
differ by less than the noise lets a test tell), grey when an arm has fewer than two runs; the percent
difference has the paper's sign for page-load time and goodput; the correction is over the whole grid."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats as sps

from quicsm.grids.heatmap import NO_TEST, NOT_SIGNIFICANT, cell_colour, heatmap_dot, nice_scale, write_heatmap
from quicsm.grids.metrics import METRICS
from quicsm.grids.results import compare_cells, percent_difference
from quicsm.grids.spec import grid_from_data

GRID = {
    "name": "synthetic",
    "axes": {"rate": [10, 50], "size": ["5KB", "1MB", "10MB"]},
    "arms": {"tcp": {"stack": "tcp", "cc": "cubic"}, "quic": {"stack": "quic-go", "cc": "cubic"}},
}
EFFECT = {  # quic's page-load time relative to tcp's, and the noise (SD as a share of the mean)
    "rate=10,size=5KB": (0.70, 0.03),  # 30 % faster: red
    "rate=10,size=1MB": (1.30, 0.03),  # 30 % slower: blue
    "rate=10,size=10MB": (1.00, 0.03),  # no difference: white
    "rate=50,size=5KB": (0.97, 0.40),  # 3 % faster, drowned in noise: white
    "rate=50,size=1MB": (0.90, 0.02),  # 10 % faster: red, paler than 30 %
    "rate=50,size=10MB": (0.50, 0.02),  # n = 1 in an arm: grey
}


def _values(seed: int = 7, n: int = 10) -> dict[tuple[str, str], list[float]]:
    rng = np.random.default_rng(seed)
    out = {}
    for cell, (ratio, noise) in EFFECT.items():
        k = 1 if cell == "rate=50,size=10MB" else n
        out[(cell, "tcp")] = list(rng.normal(1000, 1000 * noise, n))
        out[(cell, "quic")] = list(rng.normal(1000 * ratio, 1000 * ratio * noise, k))
    return out


def _compare(correction: str = "holm", values: dict[tuple[str, str], list[float]] | None = None):  # type: ignore[no-untyped-def]
    vals = values or _values()
    g = grid_from_data(GRID)
    return g, compare_cells(
        lambda c, a: vals[(c, a)], g.cells(), baseline="tcp", versus=["quic"], m=METRICS["plt"], correction=correction
    )


def _rgb(fill: str) -> tuple[int, int, int]:
    return int(fill[1:3], 16), int(fill[3:5], 16), int(fill[5:7], 16)


def test_colours_follow_the_known_differences() -> None:
    _, comp = _compare()
    by = {r.cell.id: r for r in comp.cells}
    scale = nice_scale(comp.cells)
    fills = {c: cell_colour(r, scale)[0] for c, r in by.items()}
    red, blue = _rgb(fills["rate=10,size=5KB"]), _rgb(fills["rate=10,size=1MB"])
    assert red[0] > red[2] + 60 and blue[2] > blue[0] + 60
    assert by["rate=10,size=5KB"].diff_pct == pytest.approx(30, abs=4) and by["rate=10,size=5KB"].significant
    assert by["rate=10,size=1MB"].diff_pct == pytest.approx(-30, abs=4) and by["rate=10,size=1MB"].significant
    assert fills["rate=10,size=10MB"] == NOT_SIGNIFICANT and not by["rate=10,size=10MB"].significant
    assert fills["rate=50,size=5KB"] == NOT_SIGNIFICANT
    assert fills["rate=50,size=10MB"] == NO_TEST and by["rate=50,size=10MB"].p_adjusted is None
    pale = _rgb(fills["rate=50,size=1MB"])
    assert by["rate=50,size=1MB"].significant and pale[0] > pale[2]
    assert sum(pale) > sum(red)  # a smaller difference is paler, and still not white
    assert fills["rate=50,size=1MB"] != NOT_SIGNIFICANT


def test_dot_carries_each_cells_fill_text_and_link(tmp_path) -> None:  # type: ignore[no-untyped-def]
    g, comp = _compare()
    dot = heatmap_dot(g, comp, "quic", rows="rate", columns="size")
    scale = nice_scale(comp.cells)
    for r in comp.cells:
        fill = cell_colour(r, scale)[0]
        td = re.search(rf'<TD BGCOLOR="{fill}"[^>]*HREF="#cell-{re.escape(r.cell.slug)}"', dot)
        assert td, r.cell.id
    big = comp.cell("rate=10,size=5KB", "quic")
    assert f"<B>{big.diff_pct:+.0f}%</B>" in dot  # significant: bold; the number printed as the paper does
    assert "rate \\ size" in dot and "not significant (holm p ≥ 0.01)" in dot
    svg = tmp_path / "h.svg"
    assert write_heatmap(dot, str(svg)) == "svg"
    text = svg.read_text()
    assert text.count('xlink:href="#cell-') == len(comp.cells) and "Welch p=" in text
    png = tmp_path / "h.png"
    write_heatmap(dot, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_welch_is_scipys_and_the_correction_spans_the_grid() -> None:
    _, comp = _compare(correction="none")
    for r in comp.cells:
        if len(r.a) > 1 and len(r.b) > 1:
            assert r.test.p_value == pytest.approx(sps.ttest_ind(r.b, r.a, equal_var=False).pvalue, rel=1e-12)
            assert r.p_adjusted == r.test.p_value
    # one cell barely significant on its own is not after Holm over the grid's five tests
    vals = _values()
    for seed in range(200):
        rng = np.random.default_rng(seed)
        a, b = list(rng.normal(1000, 50, 10)), list(rng.normal(940, 50, 10))
        p = sps.ttest_ind(b, a, equal_var=False).pvalue
        if 0.002 < p < 0.008:
            break
    vals[("rate=10,size=10MB", "tcp")], vals[("rate=10,size=10MB", "quic")] = a, b
    _, raw = _compare("none", vals)
    _, holm = _compare("holm", vals)
    assert raw.cell("rate=10,size=10MB", "quic").significant
    assert not holm.cell("rate=10,size=10MB", "quic").significant
    assert holm.cell("rate=10,size=5KB", "quic").significant  # the large differences survive


def test_percent_difference_sign_is_better_is_positive() -> None:
    assert percent_difference([100, 100], [80, 80], higher_is_better=False) == pytest.approx(20)  # PLT: faster
    assert percent_difference([10, 10], [12, 12], higher_is_better=True) == pytest.approx(20)  # goodput: more
    assert percent_difference([10, 10], [8, 8], higher_is_better=True) == pytest.approx(-20)
    assert percent_difference([], [1], higher_is_better=True) is None


def test_facets_make_one_panel_per_other_axis_value() -> None:
    data = {**GRID, "axes": {**GRID["axes"], "loss": ["0%", "1%"]}}  # type: ignore[dict-item]
    g = grid_from_data(data)
    rng = np.random.default_rng(1)
    comp = compare_cells(
        lambda c, a: list(rng.normal(1000, 10, 5)), g.cells(), baseline="tcp", versus=["quic"], m=METRICS["plt"]
    )
    dot = heatmap_dot(g, comp, "quic", rows="rate", columns="size")
    assert "<B>loss = 0%</B>" in dot and "<B>loss = 1%</B>" in dot
    assert dot.count("HREF=") == len(g.cells())
