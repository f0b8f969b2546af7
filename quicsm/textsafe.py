"""Text from inputs made safe for where it goes: a terminal, XML, Markdown, CSV.

State names, labels, connection ids and file names come from logs, qlogs and other people's files.
Written raw they can drive a terminal (``ESC ] 52`` writes the clipboard, ``ESC ] 0`` sets the window
title), forge lines in a report (a newline in a state name), make XML unreadable (ESC, BEL and NUL are
not XML 1.0), put HTML into a pull-request comment, or start a spreadsheet formula. Every writer puts
such text through one function here, chosen by where the text goes; no other module has an escaping
rule of its own.

One notation everywhere: a character that must not appear is written as Python writes it in a string
literal (``\\x1b``, ``\\n``, ``\\u202e``); a lone surrogate that stands for an undecodable byte of a
file name (``os.fsdecode``) is written as that byte (``\\xff``). Backslashes are left as they are, so
text without such characters reads exactly as it was.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["csv_cell", "html", "html_env", "html_value", "md_code", "md_name", "md_text", "terminal", "xml"]

_UNSEEN = re.compile(
    "["
    "\x00-\x1f\x7f-\x9f\xad"  # C0, DEL, C1 controls; soft hyphen
    "\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"  # zero widths, bidi marks, line/paragraph separators
    "\ud800-\udfff\ufeff\ufff9-\ufffb\ufffe\uffff"  # surrogates, BOM, interlinear annotation, non-characters
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"  # language tags
    "]"
)
"""What :func:`terminal` escapes: controls (Unicode category Cc), format characters (Cf: bidi overrides
that reorder what is shown, zero-width characters that make two names look alike), surrogates (Cs),
line and paragraph separators (Zl, Zp) and the two non-characters XML refuses. A test holds this to
:mod:`unicodedata`."""

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters XML 1.0 does not allow (its ``Char`` production), which no parser reads back."""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_FORMULA_START = ("=", "+", "-", "@")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_MD_MEANS = re.compile(r"[\\`*_\[\]<|~&@#!:]")
"""Characters that may mean something to Markdown or GitHub within a line (``>`` only at a line's start)."""


def _escaped(m: re.Match[str]) -> str:
    c = m.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte: show the byte
        return f"\\x{o - 0xDC00:02x}"
    if o < 0x100:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def terminal(text: str, *, lines: bool = False) -> str:
    """``text`` as one line a terminal shows as written: controls, newlines, bidi overrides and
    zero-width characters escaped (``\\x1b``, ``\\n``, ``\\u202e``). For every value from an input
    that reaches stdout or stderr: table cells, summaries, error messages. ``lines``: keep the newlines
    of a message made of several lines (a build tool's output), escaping the rest of each line."""
    if text.isprintable():  # the common case, at C speed: nothing here is printable
        return text
    if lines:
        return "\n".join(_UNSEEN.sub(_escaped, line) for line in text.split("\n"))
    return _UNSEEN.sub(_escaped, text)


def xml(text: str) -> str:
    """``text`` with the characters XML 1.0 refuses written escaped (tabs and newlines stay). Safe to
    run over a whole serialized document: such characters are never part of markup."""
    if _NOT_XML.search(text) is None:
        return text
    return _NOT_XML.sub(_escaped, text)


def html(text: str) -> str:
    """``text`` for HTML or SVG text and attributes: shown escaped (:func:`terminal`: a control
    character is not XML, so an SVG holding one is no picture), then HTML-escaped."""
    import html as _html  # here: html.entities is large, and the CLI's start-up needs only terminal()

    return _html.escape(terminal(text), quote=True)


def html_value(value: Any) -> Any:
    """A template's value as :func:`html` shows it (Jinja's ``finalize``; autoescape does the rest):
    plain strings are shown escaped; ``Markup`` (quicsm's own SVG) and numbers pass."""
    return terminal(value) if type(value) is str else value


def html_env(*packages: str) -> Any:
    """The Jinja environment of the HTML reports over the ``templates`` of ``packages`` (the first that has
    a template wins): values shown through :func:`html_value`, autoescaped, an undefined name an error."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.ChoiceLoader([jinja2.PackageLoader(p, "templates") for p in packages]),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=html_value,
    )


def md_code(text: str, *, in_table: bool = False) -> str:
    """``text`` as a Markdown code span: shown as written, nothing in it is markup, a link, HTML or a
    mention. The fence is one backtick longer than any run of backticks inside; in a table cell a
    ``|`` is escaped as GitHub's tables require."""
    text = terminal(text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ") and text.strip()):
        text = f" {text} "
    if in_table:
        text = text.replace("|", "\\|")
    return f"{fence}{text}{fence}" if text else "` `"


def md_name(text: str, *, in_table: bool = False) -> str:
    """A name (state, edge, set, connection) in Markdown: as it is when nothing in it can mean anything
    to Markdown or GitHub (``SlowStart``, ``ProbeBw.Up``, ``SlowStart -> Recovery``), else a
    :func:`md_code` span."""
    if text.isprintable() and text.strip() == text and text and _MD_MEANS.search(text) is None:
        return text
    return md_code(text, in_table=in_table)


def md_text(text: str) -> str:
    """``text`` as Markdown prose, within a line, that renders as written in any Markdown (CommonMark,
    GitHub's, Python-Markdown): one line, ``&`` and ``<`` as entities (no HTML tag, no entity of
    the input's) and every character that could start emphasis, a link, code or a table cell
    backslash-escaped. ``>`` means something only at the start (a quote), so ``A -> B`` stays as written.
    (A name is better a :func:`md_name`: GitHub links ``@name`` and ``#12`` in prose.)"""
    text = _MD_SPECIAL.sub(r"\\\1", terminal(text).replace("&", "&amp;").replace("<", "&lt;"))
    return "\\" + text if text.startswith(">") else text


def csv_cell(text: str) -> str:
    """``text`` as a CSV cell that a spreadsheet does not run: one line (:func:`terminal`), and a cell
    that would start a formula (``=``, ``+``, ``-``, ``@``) gets a ``'`` in front (OWASP's advice).
    For text from inputs only: numbers the writer formats stay numbers."""
    text = terminal(text)
    return "'" + text if text.startswith(_FORMULA_START) else text
