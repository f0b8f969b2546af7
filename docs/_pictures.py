"""The README's pictures (docs/img/), drawn by README command 1's own commands from the bundled traces.

    python3 docs/_pictures.py          # redraw them after a change to the diagrams or the report

GitHub shows the README without building anything, so its pictures are files in the repository:
the Fig. 13 models of the two bundled sets (``quicsm diagram ... --json`` then ``quicsm render --no-legend``,
small enough to sit side by side at full size) and a screenshot of the top of the compare report
(``quicsm compare ... --html``) in a 1400-pixel-wide Chromium window. tests/docs/test_readme.py checks
that they exist and still show what the commands draw today.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _blocks import CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
SETS = ("desktop", "mobile")


def quicsm(*args: str, cwd: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "quicsm", *args], cwd=cwd, env=env, check=True, capture_output=True)


def draw_models(out: Path) -> dict[str, Path]:
    """Each set's model without its legend (the README says what the colours mean)."""
    pictures = {}
    for name in SETS:
        quicsm(
            "diagram",
            f"traces/fig13/{name}",
            "-o",
            str(out / f"{name}-full.svg"),
            "--json",
            str(out / f"{name}.json"),
            "-q",
            cwd=ROOT,
        )
        quicsm("render", f"{name}.json", "-o", f"fig13-{name}.svg", "--no-legend", "--title", name, cwd=out)
        pictures[name] = out / f"fig13-{name}.svg"
    return pictures


def report_screenshot(out: Path, png: Path) -> None:
    """The top of README command 1's report: sets, occupancy, both models."""
    from playwright.sync_api import sync_playwright

    fig13 = [f"traces/fig13/{name}" for name in SETS]  # relative, as README command 1 gives them
    quicsm("compare", *fig13, "--html", str(out / "fig13.html"), "-q", cwd=ROOT)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or "chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto((out / "fig13.html").as_uri())
            height = page.evaluate("document.querySelector('#models ~ .figures').getBoundingClientRect().bottom")
            clip = {"x": 0, "y": 0, "width": 1400, "height": min(int(height) + 20, 2400)}
            page.screenshot(path=str(png), clip=clip, full_page=True)
        finally:
            browser.close()


def main() -> None:
    IMG.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, svg in draw_models(work).items():
            shutil.copyfile(svg, IMG / f"fig13-{name}.svg")
        report_screenshot(work, IMG / "fig13-report.png")
    print(f"wrote {', '.join(sorted(p.name for p in IMG.glob('fig13-*')))} to {IMG.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
