"""The documentation site builds in strict mode, and what it generates from the code is all there.

One build (a subprocess, as a user runs it: ``mkdocs build --strict``) checks: every page in the nav
exists, every link and anchor resolves (mkdocs' validation, warnings are errors), the tutorials' runnable
blocks ran and wrote files that parse (docs/_hooks.py runs them; a failure is a warning), the CLI page
carries every verb's ``--help``, the API page every public name, the gallery every committed picture.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

import _blocks  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="needs mkdocs (pip: the test extras)")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-6000:]}"
    return out


def test_cli_reference_has_every_verb(site: Path) -> None:
    from quicsm.cli.main import COMMANDS

    text = (site / "reference" / "cli.html").read_text()
    for verb in COMMANDS:
        assert f"Usage: quicsm {verb} [OPTIONS]" in text, verb


def test_api_reference_has_every_public_name(site: Path) -> None:
    import quicsm

    text = (site / "reference" / "api.html").read_text()
    for name in quicsm.__all__:
        if not name.startswith("__"):
            assert f"quicsm.{name}" in text, name
    for sub in ("check", "compare", "instrumentation"):
        mod = importlib.import_module(f"quicsm.{sub}")
        for name in mod.__all__:
            assert f"quicsm.{sub}.{name}" in text, f"quicsm.{sub}.{name}"


def test_generated_references_follow_the_data(site: Path) -> None:
    from quicsm.instrumentation import shipped_patch_sets
    from quicsm.testbed import stacks

    catalogue = (site / "reference" / "patch-sets.html").read_text()
    for ps in shipped_patch_sets():
        assert ps.name in catalogue, ps.name
    stack_page = (site / "reference" / "stacks.html").read_text()
    for s in stacks.all_stacks():
        assert f"<code>{s.name}</code>" in stack_page, s.name
    schemas = (site / "reference" / "schemas.html").read_text()
    for schema in (ROOT / "quicsm" / "schemas").glob("*.schema.json"):
        assert schema.name in schemas and (site / "reference" / "schemas" / schema.name).is_file()


def test_gallery_shows_every_committed_picture(site: Path) -> None:
    gallery = (site / "gallery.html").read_text()
    pictures = [p for p in (ROOT / "experiments").iterdir() if p.suffix in (".svg", ".png", ".html")]
    assert pictures
    for pic in pictures:
        assert f"experiments/{pic.name}" in gallery, pic.name
        assert (site / "experiments" / pic.name).is_file()
    assert "(not recorded)" not in gallery


def test_tutorial_pictures_are_drawn_by_the_build(site: Path) -> None:
    """Every image a tutorial shows exists in the site and parses (it was written by the page's commands)."""
    for page in sorted((site / "tutorials").glob("*.html")):
        for src in re.findall(r'<img[^>]+src="([^"]+)"', page.read_text()):
            if src.startswith(("http:", "https:", "data:")):
                continue
            target = (page.parent / src).resolve()
            assert target.is_file(), f"{page.name}: {src}"
            assert _blocks.check_output(target) is None, _blocks.check_output(target)
