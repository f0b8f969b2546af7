"""The commands the documentation shows are the CLI's: parsed by the real click commands, and run.

Every ``quicsm`` command in a code block of the README, docs/ and traces/README.md (and in the CLI's
own ``--help`` examples) is parsed without running (docs/_blocks.py ``check_cli``), so a renamed option,
a removed verb or a bad choice fails here. The README's first command runs against the bundled traces and
its outputs are checked to parse; the tutorials' blocks run in the site build (tests/docs/test_docs_site.py),
those needing S3 here, and those needing root and the emulator in the slow lane.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

import _blocks  # noqa: E402


def _documented() -> list[tuple[str, list[str]]]:
    found = []
    for page in _blocks.pages():
        for b in _blocks.blocks(page):
            for argv in _blocks.commands(b.text, b.lang in _blocks.SHELLS):
                found.append((b.where, argv))
    return found


def _help_examples() -> list[tuple[str, list[str]]]:
    from quicsm.cli.main import cli

    found: list[tuple[str, list[str]]] = []

    def walk(cmd: click.Command, name: str, parent: click.Context | None) -> None:
        ctx = click.Context(cmd, info_name=name, parent=parent)
        for argv in _blocks.commands(cmd.help or "", shell=False):
            found.append((f"{ctx.command_path} --help", argv))
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                child = cmd.get_command(ctx, sub)
                if child is not None:
                    walk(child, sub, ctx)

    walk(cli, "quicsm", None)
    return found


def test_every_documented_command_parses() -> None:
    documented = _documented()
    assert len(documented) >= 40  # the README, tutorials, how-tos and references show many
    bad = [
        f"{where}: quicsm {' '.join(argv)}\n    {why}" for where, argv in documented if (why := _blocks.check_cli(argv))
    ]
    assert not bad, "documented commands the CLI refuses:\n" + "\n".join(bad)


def test_every_help_example_parses() -> None:
    examples = _help_examples()
    assert len(examples) >= 10
    bad = [
        f"{where}: quicsm {' '.join(argv)}\n    {why}" for where, argv in examples if (why := _blocks.check_cli(argv))
    ]
    assert not bad, "--help examples the CLI refuses:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("quicsm diagram traces/fig13/desktop --output-file x.svg", "No such option"),
        ("quicsm compare a b --test student", "Invalid value for '--test'"),
        ("quicsm diagrams traces/fig13/desktop -o x.svg", "No such command"),
        ("sudo quicsm testbed run --rate 50 --cpu-quota 10% --runz 3", "No such option"),
        ("quicsm patch list --target\n", "requires an argument"),
    ],
)
def test_a_drifted_snippet_is_caught(text: str, why: str) -> None:
    (argv,) = list(_blocks.commands(text))
    message = _blocks.check_cli(argv)
    assert message is not None and why in message, message


def test_placeholders_and_synopses_are_not_drift() -> None:
    for text in (
        "quicsm diagram runs/new/*/server.log -o new.svg",
        "quicsm patch apply ~/quiche [--set NAME] [-a bbr2]",
        "quicsm check base.qsb 'runs/*' --junit check.xml && echo ok",
    ):
        for argv in _blocks.commands(text):
            assert _blocks.check_cli(argv) is None, text


def test_output_checks_reject_broken_files(tmp_path: Path) -> None:
    cases = {
        "a.svg": "<svg><g></svg>",
        "b.json": "{",
        "c.html": "<p>no page</p>",
        "d.png": "GIF89a",
        "e.svg": "<html/>",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        assert _blocks.check_output(tmp_path / name) is not None, name
    (tmp_path / "ok.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><g/></svg>')
    assert _blocks.check_output(tmp_path / "ok.svg") is None
    (tmp_path / "empty.json").write_text("")
    assert _blocks.check_output(tmp_path / "empty.json") is not None


def test_readme_first_command_runs_and_writes_what_it_says(tmp_path: Path) -> None:
    """README command 1 (after the install, which CI has just run): its outputs exist and parse."""
    first = _blocks.blocks(ROOT / "README.md")[0]
    lines = [ln for ln in first.text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    command = next(ln for ln in lines if "quicsm " in ln and "pytest" not in ln)
    block = _blocks.Block(first.page, first.line, command)
    work = _blocks.workdir(tmp_path / "w")
    ran = _blocks.run(block, work, _blocks.environment(work))
    assert ran.returncode == 0, ran.output[-3000:]
    names = {p.relative_to(work).as_posix() for p in ran.written}
    promised = set(_promised_outputs(command))
    assert promised and promised <= names, (promised, names)
    for p in ran.written:
        assert _blocks.check_output(p) is None, _blocks.check_output(p)


def _promised_outputs(command: str) -> list[str]:
    out = []
    for argv in _blocks.commands(command):
        for flag, value in zip(argv, argv[1:]):
            if flag in ("-o", "--output", "--json", "--html", "--diagram", "--diff-diagram", "--heatmap"):
                out.append(value)
    return out


def _s3_blocks() -> list[_blocks.Block]:
    return [b for p in _blocks.runnable_pages() for b in _blocks.blocks(p) if b.run and "s3" in b.needs]


def test_runnable_pages_mark_what_cannot_run_here() -> None:
    """A tutorial block that is not run says why (root, S3, or a reason); nothing is silently left out."""
    for page in _blocks.runnable_pages():
        for b in _blocks.blocks(page):
            if b.lang in _blocks.SHELLS and not b.run:
                assert b.why_not, b.where


def _pages_with_root_blocks() -> list[Path]:
    return sorted({b.page for p in _blocks.runnable_pages() for b in _blocks.blocks(p) if b.run and b.root})


def test_the_emulator_tutorials_are_found() -> None:
    """The slow-lane test below has pages to run (a parametrisation over nothing would only skip)."""
    names = {p.name for p in _pages_with_root_blocks()}
    assert {"new-quic-go-version.md", "regression-gate.md"} <= names, names


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("page", _pages_with_root_blocks(), ids=lambda p: p.stem)
def test_tutorial_runs_top_to_bottom_with_the_emulator(page: Path, tmp_path: Path) -> None:
    """A tutorial with root blocks, run top to bottom as a reader would, the testbed runs included."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, tc, cgroups)")
    work = _blocks.workdir(tmp_path / "w")
    env = _blocks.environment(work)
    for b in _blocks.blocks(page):
        if b.lang not in _blocks.SHELLS or not b.run or b.needs:
            continue
        ran = _blocks.run(b, work, env, timeout=1800)
        assert ran.returncode == 0, f"{b.where}:\n{ran.output[-4000:]}"
        for p in ran.written:
            assert _blocks.check_output(p) is None, f"{b.where}: {_blocks.check_output(p)}"
