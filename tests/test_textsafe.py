"""quicsm.textsafe: each destination's rule, held to its standard (Unicode categories, XML 1.0, CommonMark)."""

from __future__ import annotations

import sys
import unicodedata
import xml.etree.ElementTree as ET

import pytest
from markdown_it import MarkdownIt

from quicsm.textsafe import _UNSEEN, csv_cell, html, html_value, md_code, md_name, md_text, terminal, xml

HOSTILE = [
    "evil\x1b]0;PWNED\x07title",
    "clip\x1b]52;c;ZWNobyBoaQ==\x07",
    "line\nquicsm check: same: 0 of 49 checks failed (all good)",
    "<img src=x onerror=alert(1)>",
    "=cmd|'/c calc'!A1",
    "nul\x00bel\x07",
    "rtl\u202eexe.txt",
    "zero\u200bwidth",
    "csi\x9b31m",
    "bad byte \udcff",
    "`code` [link](javascript:alert(1)) *em* @someone #12 &amp; | pipe",
    "  padded  ",
    "",
]


def test_terminal_escapes_every_control_format_and_separator_character() -> None:
    for o in range(sys.maxunicode + 1):
        c = chr(o)
        unseen = unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") or o in (0xFFFE, 0xFFFF)
        if unseen:
            assert _UNSEEN.match(c), hex(o)
        elif _UNSEEN.match(c):  # only what a newer Unicode made a format character (Python 3.12: U+13439..)
            assert unicodedata.category(c) == "Cn", hex(o)


@pytest.mark.parametrize("text", HOSTILE)
def test_terminal_gives_one_printable_line(text: str) -> None:
    out = terminal(text)
    assert out.isprintable() or out == ""
    out.encode("utf-8")  # no lone surrogate left: printing it cannot fail
    assert terminal(out) == out


def test_terminal_notation() -> None:
    assert (
        terminal("a\x1b]0;t\x07\n\t\r\u202e\U000e0041\udcff\\") == "a\\x1b]0;t\\x07\\n\\t\\r\\u202e\\U000e0041\\xff\\"
    )
    assert terminal("SlowStart") == "SlowStart" and terminal("ünï→ 漢") == "ünï→ 漢"
    assert terminal("one\x1b\ntwo", lines=True) == "one\\x1b\ntwo"


@pytest.mark.parametrize("text", HOSTILE)
def test_xml_makes_any_text_well_formed(text: str) -> None:
    root = ET.Element("r", a=text)
    root.text = text
    raw = ET.tostring(root, encoding="unicode")  # ElementTree writes ESC, BEL, NUL as they are
    back = ET.fromstring(xml(raw))
    assert back.text == xml(text) or (back.text is None and not text)
    assert xml("tab\tnew\nline\r") == "tab\tnew\nline\r"  # what XML allows stays


_MD = MarkdownIt("commonmark").enable("table")


def _rendered(md: str) -> str:
    return _MD.render(md)


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_renders_the_text_not_markup(text: str) -> None:
    shown = terminal(text)
    for md in (md_text(text), md_code(text), md_name(text)):
        out = _rendered(md)
        assert "<img" not in out and "<a " not in out and "<em>" not in out, (md, out)
    # in a table cell: one row, its cells intact, the text shown as terminal() shows it
    for cell in (md_code(text, in_table=True), md_name(text, in_table=True), md_text(text)):
        out = _rendered(f"| a | b |\n|---|---|\n| {cell} | end |\n")
        assert out.count("<tr>") == 2 and out.count("<td>") == 2 and "<td>end</td>" in out, (cell, out)
    escaped = shown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    assert f"<code>{escaped}</code>" in _rendered(md_code(text)) or not shown.strip()


def test_md_name_keeps_plain_names_plain() -> None:
    for name in ("SlowStart", "ProbeBw.Up", "SlowStart -> Recovery", "v0.65.0", "runs/desktop", "ünï"):
        assert md_name(name) == name
    assert md_name("a_b_") == "`a_b_`" and md_name("x|y", in_table=True) == "`x\\|y`"


def test_md_text_keeps_arrows_and_quotes_nothing() -> None:
    assert md_text("no A -> B at step 5") == "no A -> B at step 5"  # a raw Markdown file reads as written
    assert "<blockquote>" not in _rendered(md_text("> quoted")) and "&gt; quoted" in _rendered(md_text("> quoted"))
    assert "<b>" not in _rendered(md_text("<b>x</b> & y"))


def test_csv_cell_is_formula_safe() -> None:
    for text in ("=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1"):
        assert csv_cell(text)[0] not in "=+-@\t\r", text
    assert csv_cell("SlowStart") == "SlowStart" and csv_cell("a=b") == "a=b"


def test_html_value_passes_markup_and_numbers() -> None:
    from markupsafe import Markup

    svg = Markup("<svg>\n</svg>")
    assert html_value(svg) is svg and html_value(3) == 3 and html_value("a\x1bb") == "a\\x1bb"
    assert html("<b>\x1b") == "&lt;b&gt;\\x1b"


# ---- any text at all (hypothesis): the invariants each destination needs ------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=60)


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_any_text_is_one_inert_line_on_a_terminal(text: str) -> None:
    out = terminal(text)  # private-use and unassigned characters (Co, Cn) are shown as they are
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in out), repr(out)
    out.encode("utf-8")


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_any_text_is_well_formed_xml(text: str) -> None:
    root = ET.Element("r", a=text)
    root.text = text
    ET.fromstring(xml(ET.tostring(root, encoding="unicode")))


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_any_text_renders_as_text_in_markdown(text: str) -> None:
    for cell in (md_name(text, in_table=True), md_text(text)):
        out = _rendered(f"| a | b |\n|---|---|\n| {cell} | end |\n")
        assert out.count("<td>") == 2 and "<td>end</td>" in out, (cell, out)
        assert not [tag for tag in ("<img", "<a ", "<em>", "<strong>", "<script") if tag in out], (cell, out)


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_any_text_is_a_safe_csv_cell(text: str) -> None:
    import csv
    import io

    cell = csv_cell(text)
    assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r")
    buf = io.StringIO()
    csv.writer(buf).writerow([cell, "end"])
    assert next(csv.reader(io.StringIO(buf.getvalue()))) == [cell, "end"]
    assert "\n" not in cell and "\r" not in cell
