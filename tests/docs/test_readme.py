"""The README is a front page: the two commands first, short, no dated measurements, pictures that exist
and still show what README command 1's commands draw today, links that resolve.

Its first command runs in tests/docs/test_snippets.py (outputs checked to parse); the second is CI itself.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
sys.path.insert(0, str(ROOT / "docs"))


def _text() -> str:
    return README.read_text(encoding="utf-8")


def test_the_two_commands_come_first() -> None:
    lines = _text().splitlines()
    assert lines[0].startswith("# ")
    fence = next(i for i, line in enumerate(lines) if line.startswith("```"))
    assert fence <= 3, "the commands are the README's first lines"
    block = lines[fence + 1 : lines.index("```", fence + 1)]
    commands = [line for line in block if line.strip() and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[0].startswith("bash scripts/install.sh && quicsm ")
    assert commands[1] == "bash scripts/install.sh && python3 -m pytest -q tests"


def test_it_is_a_front_page() -> None:
    text = _text()
    assert len(text.splitlines()) <= 130
    # measured times live in experiments/run_times.md; nothing dated in the README
    dated = re.findall(r"\b20\d\d-\d\d-\d\d\b|\bload (?:average )?~?\d|\b\d+ min \d+ s\b", text)
    assert not dated, f"dated measurements belong to experiments/ or bench/: {dated}"


def test_links_and_pictures_resolve() -> None:
    text = _text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'<img src="([^"]+)"', text)
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert local
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


def _labels(svg: Path) -> list[str]:
    """The state names a diagram shows (its node titles), not the numbers, which move with layout."""
    ns = "{http://www.w3.org/2000/svg}"
    root = ET.parse(svg).getroot()
    names = []
    for g in root.iter(f"{ns}g"):
        if g.get("class") == "node":
            texts = [t.text or "" for t in g.iter(f"{ns}text")]
            names.append(
                " ".join(t.strip() for t in texts if t.strip() and not re.fullmatch(r"[<>]?[\d.]+%|#\d+", t.strip()))
            )
    return sorted(names)


def test_readme_pictures_show_what_the_commands_draw_today(tmp_path: Path) -> None:
    import shutil

    if shutil.which("dot") is None:
        pytest.skip("needs Graphviz's dot (scripts/install.sh)")
    import _pictures

    for name, fresh in _pictures.draw_models(tmp_path).items():
        committed = ROOT / "docs" / "img" / f"fig13-{name}.svg"
        assert committed.is_file()
        assert _labels(committed) == _labels(fresh), (
            f"{committed.relative_to(ROOT)} no longer shows what the commands draw: run python3 docs/_pictures.py"
        )
    png = ROOT / "docs" / "img" / "fig13-report.png"
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and png.stat().st_size > 50_000
