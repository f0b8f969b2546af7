"""Every diagram in every HTML report is readable at its default size, in a real headless browser.

The reports (``quicsm compare --html``, ``quicsm check --html``, and the fairness report of multi-flow
runs) are opened in Debian's Chromium, driven by Playwright, in a 1400-pixel-wide window, as a reader
would open them. In each, every text of every figure is measured where the browser draws it: its
font size times the scale the page gives the picture. Each must be at least MIN_PX CSS pixels, which
Graphviz's smallest labels (9 pt = 12 px at 100 %) keep, and which a diagram squeezed to the column
(the old layout: 4-7 px in README command 1's report) does not. Full-page screenshots are written to
$QUICSM_SCREENSHOTS (default: the test's temporary folder) for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

from _blocks import CHROMIUM_ARGS  # noqa: E402

MIN_PX = 10.0
WIDTH = 1400

MEASURE = """() => {
  document.querySelectorAll("details").forEach(d => { d.open = true; });
  return Array.from(document.querySelectorAll("svg")).filter(s => !s.parentElement.closest("svg")).map((s, i) => {
    const box = s.getBoundingClientRect();
    const sizes = Array.from(s.querySelectorAll("text")).filter(t => t.textContent.trim()).map(t => {
      const m = t.getScreenCTM();
      return parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
    });
    const near = s.closest("div, details, section");
    const heading = Array.from(document.querySelectorAll("h2, h3")).filter(
      h => h.compareDocumentPosition(s) & Node.DOCUMENT_POSITION_FOLLOWING).pop();
    return {index: i, width: box.width, height: box.height, texts: sizes.length,
            min: sizes.length ? Math.min(...sizes) : null,
            where: (heading ? heading.textContent : "top") + " / " + (near ? near.className : "")};
  });
}"""


def _quicsm(*args: str, cwd: Path, ok: tuple[int, ...] = (0,)) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "quicsm", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode in ok, f"quicsm {' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-2000:]}"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three kinds of report, from the bundled real traces (README command 1's among them)."""
    if shutil.which("dot") is None:
        pytest.skip("needs Graphviz's dot (scripts/install.sh)")
    out = tmp_path_factory.mktemp("reports")
    fig13 = [str(ROOT / "traces/fig13/desktop"), str(ROOT / "traces/fig13/mobile")]
    _quicsm("compare", *fig13, "--html", "fig13.html", "-q", cwd=out)
    _quicsm("baseline", "save", fig13[0], "-o", "base.qsb", cwd=out)
    _quicsm("check", "base.qsb", fig13[1], "--html", "check.html", cwd=out, ok=(1,))  # 1: behaviour changed
    runs = sorted(str(p) for p in (ROOT / "traces/table4/quicgo-tcp1").iterdir() if p.is_dir())
    _quicsm("compare", *runs, "--html", "fairness.html", "-q", cwd=out)
    return {name: out / f"{name}.html" for name in ("fig13", "check", "fairness")}


@pytest.fixture(scope="module")
def page() -> Iterator[object]:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("needs Debian's chromium (.ci/install.d/testbed.sh)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip: the test extras)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": WIDTH, "height": 900})
        finally:
            browser.close()


def _shots() -> Path | None:
    d = os.environ.get("QUICSM_SCREENSHOTS")
    return Path(d) if d else None


def _measure(page: object, report: Path, shot: Path | None, *, css: str | None = None) -> list[dict[str, object]]:
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))  # type: ignore[attr-defined]
    page.goto(report.as_uri())  # type: ignore[attr-defined]
    if css is not None:
        page.add_style_tag(content=css)  # type: ignore[attr-defined]
    if shot is not None:
        page.screenshot(path=str(shot), full_page=True)  # type: ignore[attr-defined]
    figures = page.evaluate(MEASURE)  # type: ignore[attr-defined]
    assert not errors, f"{report.name}: script errors {errors}"
    return figures  # type: ignore[no-any-return]


@pytest.mark.parametrize(("name", "least"), [("fig13", 5), ("check", 1), ("fairness", 6)])
def test_every_diagram_is_readable_at_its_default_size(
    name: str, least: int, reports: dict[str, Path], page: object, tmp_path: Path
) -> None:
    """``least``: figures the report draws at least (fig13: heatmap, two models, Fig. 13, diff diagram,
    timelines; check: the diff diagram; fairness: the flows' timelines and the compare figures)."""
    shots = _shots() or tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    figures = _measure(page, reports[name], shots / f"{name}.png")
    drawn = [f for f in figures if f["texts"]]
    assert len(drawn) >= least, f"{name}: expected the report's diagrams, found {figures}"
    graphviz = [f for f in drawn if f["texts"] >= 30]  # state diagrams (many labels), not the small charts
    assert graphviz, f"{name}: no state diagram in the report"
    small = [f for f in drawn if f["width"] == 0 or f["min"] < MIN_PX]
    assert not small, f"{name}: figures drawn too small to read (smallest text < {MIN_PX} px): {small}"
    assert (shots / f"{name}.png").stat().st_size > 10_000


def test_the_measure_fails_a_diagram_squeezed_to_the_column(reports: dict[str, Path], page: object) -> None:
    """Negative control: the old rule (every figure at most the column's width) makes the same
    measurement fail on README command 1's report."""
    squeeze = ".figure svg { max-width: 100% !important; height: auto !important; width: auto !important; }"
    figures = _measure(page, reports["fig13"], None, css=squeeze)
    assert any(f["texts"] and f["min"] < MIN_PX for f in figures), figures


def test_the_zoom_buttons_change_the_drawn_size(reports: dict[str, Path], page: object) -> None:
    page.goto(reports["fig13"].as_uri())  # type: ignore[attr-defined]
    svg = page.locator("#models ~ .figures .figure svg").first  # type: ignore[attr-defined]
    before = svg.bounding_box()["width"]
    page.locator("#models ~ .figures .figure-tools").first.get_by_role("button", name="+").click()  # type: ignore[attr-defined]
    after = svg.bounding_box()["width"]
    assert after == pytest.approx(before * 1.25, rel=0.02)
    page.locator("#models ~ .figures .figure-tools").first.get_by_role("button", name="100 %").click()  # type: ignore[attr-defined]
    assert svg.bounding_box()["width"] == pytest.approx(before, rel=0.02)


@pytest.fixture(scope="module")
def grid_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``quicsm grid report`` of a 2 x 2 grid whose runs carry real fig13 logs (tests/grids' fake testbed)."""
    if shutil.which("dot") is None:
        pytest.skip("needs Graphviz's dot (scripts/install.sh)")
    sys.path.insert(0, str(ROOT / "tests" / "grids"))
    from grid_fixtures import FakeTestbed

    from quicsm.grids.execute import run_grid
    from quicsm.grids.spec import grid_from_data

    out = tmp_path_factory.mktemp("grid")
    data = {
        "name": "readable",
        "runs": 4,
        "axes": {"rate": [10, 50], "size": ["5KB", "1MB"]},
        "arms": {"desktop": {"cc": "reno"}, "mobile": {"cc": "reno", "cpu_quota": "10%"}},
        "report": {"timelines": [{"rate": 50, "size": "1MB"}]},
    }
    tb = FakeTestbed(lambda cfg, r: 1000.0 + 100 * r + (400 if cfg.name == "mobile" else 0), mobile_arm="mobile")
    run_grid(grid_from_data(data), out / "runs", build=tb.build, run=tb.run)
    _quicsm("grid", "report", str(out / "runs"), "-o", str(out / "report"), cwd=out)
    return out / "report" / "report.html"


def test_the_grid_report_is_readable_at_its_default_size(grid_report: Path, page: object, tmp_path: Path) -> None:
    shots = _shots() or tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    figures = _measure(page, grid_report, shots / "grid.png")
    drawn = [f for f in figures if f["texts"]]
    assert len(drawn) >= 2, f"expected the heatmap and a timeline, found {figures}"  # heatmap, Fig. 9 timeline
    small = [f for f in drawn if f["width"] == 0 or f["min"] < MIN_PX]
    assert not small, f"figures drawn too small to read (smallest text < {MIN_PX} px): {small}"
