"""Hostile text from qlogs and file names through every output quicsm writes (issue 36 items 1-4).

A qlog's state names are whatever its writer put there: escape sequences that set the window title or
write the clipboard, a newline followed by a forged verdict line, HTML, a spreadsheet formula, NUL.
Every verb's terminal output, error message, and every file format must carry them inertly.
"""

from __future__ import annotations

import csv
import io
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt

from quicsm.cli.main import cli

FORGED = "quicsm check: same: 0 of 49 checks failed (all good)"
HOSTILE = [
    "evil\x1b]0;PWNED\x07title",
    "clip\x1b]52;c;ZWNobyBoaQ==\x07",
    f"line\n{FORGED}",
    "<img src=x onerror=alert(1)>",
    "=cmd|'/c calc'!A1",
    "nul\x00bel\x07",
    "rtl\u202egnp.exe",
]
RAW = ("\x1b", "\x07", "\x00", "\u202e")


def _qlog(path: Path, names: list[str], odcid: str) -> None:
    head = {
        "qlog_format": "JSON-SEQ",
        "trace": {"vantage_point": {"type": "server"}, "common_fields": {"ODCID": odcid}},
    }
    lines = ["\x1e" + json.dumps(head)]
    t = 0.0
    for _ in range(3):
        for n in names:
            t += 1.5
            lines.append("\x1e" + json.dumps({"time": t, "name": "quic:congestion_state_updated", "data": {"new": n}}))
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hostile")
    good, evil = root / "good", root / "evil"
    good.mkdir()
    evil.mkdir()
    for i in range(4):
        _qlog(good / f"g{i}.sqlog", ["slow_start", "congestion_avoidance", "recovery", "congestion_avoidance"], f"g{i}")
        _qlog(evil / f"e{i}.sqlog", ["slow_start", *HOSTILE, "congestion_avoidance"], f"e{i}")
    return good, evil


def _run(args: list[str], code: int = 0) -> str:
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == code, res.output
    return res.output  # stdout and stderr together, as a terminal shows them


def _inert(text: str) -> None:
    """What a terminal would show: no raw control character, no forged line."""
    for c in RAW:
        assert c not in text, repr(c)
    assert not any(line.startswith(FORGED) for line in text.splitlines())


def test_infer_table_and_parse_summary_show_names_escaped(sets: tuple[Path, Path]) -> None:
    out = _run(["infer", str(sets[1]), "--engine", "dfg", "--format", "text"])
    _inert(out)
    assert "evil\\x1b]0;PWNED\\x07title" in out and "line\\nquicsm check" in out  # shown, escaped


def test_error_messages_show_file_names_escaped(tmp_path: Path) -> None:
    missing = tmp_path / "run\x1b]0;PWNED\x07\nquicsm check: same: 0 of 49 checks failed (all good).log"
    out = _run(["parse", str(missing)], 1)
    _inert(out)
    assert "run\\x1b]0;PWNED\\x07\\nquicsm check" in out and "no such file" in out


def test_check_text_report_cannot_be_forged(sets: tuple[Path, Path], tmp_path: Path) -> None:
    base = tmp_path / "base.qsb"
    _run(["baseline", "save", str(sets[0]), "-o", str(base)])
    res = CliRunner().invoke(cli, ["check", str(base), str(sets[1])])
    assert res.exit_code in (0, 1), res.output
    _inert(res.output)
    assert res.output.startswith("quicsm check: ") and "new/gone" in res.output
    show = _run(["baseline", "show", str(base)])
    _inert(show)
    named = tmp_path / f"set\x1b]0;PWNED\x07\n{FORGED}"  # a set is named after its folder
    named.symlink_to(sets[1])
    _inert(_run(["baseline", "save", str(named), "-o", str(tmp_path / "named.qsb")]))
    _inert(_run(["baseline", "show", str(tmp_path / "named.qsb")]))


def test_check_writes_well_formed_junit_and_inert_markdown(sets: tuple[Path, Path], tmp_path: Path) -> None:
    base = tmp_path / "base.qsb"
    _run(["baseline", "save", str(sets[0]), "-o", str(base)])
    junit, md, html = tmp_path / "c.xml", tmp_path / "c.md", tmp_path / "c.html"
    args = ["check", str(base), str(sets[1]), "--junit", str(junit), "--markdown", str(md), "--html", str(html)]
    CliRunner().invoke(cli, args)
    root = ET.parse(junit).getroot()  # well-formed XML 1.0
    names = [c.get("name") or "" for c in root.iter("testcase")]
    assert any(n.startswith("evil\\x1b]0;PWNED") for n in names), names
    rendered = MarkdownIt("commonmark").enable("table").render(md.read_text())
    assert "<img" not in rendered and "&lt;img src=x onerror=alert(1)&gt;" in rendered
    for c in RAW:
        assert c not in md.read_text() and c not in html.read_text()


def test_graphml_and_pictures_are_well_formed(sets: tuple[Path, Path], tmp_path: Path) -> None:
    graphml, svg = tmp_path / "m.graphml", tmp_path / "heat.svg"
    _run(["infer", str(sets[1]), "--engine", "dfg", "-o", str(graphml), "-q"])
    states = [d.text for d in ET.parse(graphml).getroot().iter("{http://graphml.graphdrawing.org/xmlns}data")]
    assert "evil\\x1b]0;PWNED\\x07title" in states
    _run(["compare", str(sets[0]), str(sets[1]), "--engine", "dfg", "--heatmap", str(svg), "-o", os.devnull, "-q"])
    ET.parse(svg)


def test_compare_outputs_are_inert(sets: tuple[Path, Path]) -> None:
    good, evil = map(str, sets)
    text = _run(["compare", good, evil, "--engine", "dfg", "--format", "text", "-q"])
    _inert(text)
    md = _run(["compare", good, evil, "--engine", "dfg", "--format", "markdown", "-q"])
    rendered = MarkdownIt("commonmark").enable("table").render(md)
    assert "<img" not in rendered
    _inert(md)
    rows = list(csv.reader(io.StringIO(_run(["compare", good, evil, "--engine", "dfg", "--format", "csv", "-q"]))))
    cells = [c for r in rows[1:] for c in r[1:4] + r[-1:]]  # set names, item, note: text from the inputs
    assert any("cmd|" in c for c in cells)
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    for c in RAW:
        assert not any(c in cell for cell in cells)
