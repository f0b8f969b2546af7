"""Unified-diff reading and writing.

The engine never applies a diff itself (git apply / GNU patch do that); it only needs to know which
files a diff touches, to split it per file, to rewrite its paths for a tree's layout, and to give the
porter the hunks' lines. Errors name the diff file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from quicsm.errors import PatchError

__all__ = ["Edit", "FilePatch", "Hunk", "parse_diff", "render_file_patch"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
_NO_NEWLINE = "\\ No newline at end of file"


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` block: ``lines`` are ``(tag, text)`` with tag ``' '``, ``'-'`` or ``'+'`` (text without EOL)."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    section: str
    lines: tuple[tuple[str, str], ...]
    line_no: int
    """1-based line of the ``@@`` header in the diff file (for messages)."""

    @property
    def old_lines(self) -> list[str]:
        return [t for tag, t in self.lines if tag != "+"]

    @property
    def added(self) -> int:
        return sum(1 for tag, _ in self.lines if tag == "+")


@dataclass(frozen=True)
class FilePatch:
    """The hunks for one file. ``old_path``/``new_path`` are without the ``a/``/``b/`` prefix; None = /dev/null."""

    old_path: str | None
    new_path: str | None
    hunks: tuple[Hunk, ...]
    extended: tuple[str, ...]
    """git extended header lines (``index``, ``new file mode``, ...), kept for refusal checks."""
    line_no: int
    no_newline_old: bool = False
    no_newline_new: bool = False

    @property
    def path(self) -> str:
        """The path the patch writes to (the old one for a deletion)."""
        p = self.new_path if self.new_path is not None else self.old_path
        assert p is not None
        return p

    @property
    def creates(self) -> bool:
        return self.old_path is None

    @property
    def deletes(self) -> bool:
        return self.new_path is None


def _strip_path(raw: str, where: str) -> str | None:
    path = raw.split("\t", 1)[0].rstrip()
    if path.startswith('"'):
        raise PatchError(f"{where}: quoted path {path} is not supported; use plain ASCII paths")
    if path == "/dev/null":
        return None
    if path.startswith(("a/", "b/")):
        return path[2:]
    raise PatchError(f"{where}: path {path!r} lacks the a/ or b/ prefix of a -p1 diff")


def parse_diff(text: str, *, source: str = "<diff>") -> list[FilePatch]:
    """Parse a ``-p1`` unified diff (``git diff`` or ``diff -u`` output) into per-file patches."""
    lines = text.splitlines()
    files: list[FilePatch] = []
    i = 0
    n = len(lines)
    extended: list[str] = []
    while i < n:
        line = lines[i]
        if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            start = i + 1
            old = _strip_path(line[4:], f"{source}:{i + 1}")
            new = _strip_path(lines[i + 1][4:], f"{source}:{i + 2}")
            if old is None and new is None:
                raise PatchError(f"{source}:{i + 1}: both sides are /dev/null")
            i += 2
            hunks: list[Hunk] = []
            nn_old = nn_new = False
            while i < n and lines[i].startswith("@@"):
                m = _HUNK.match(lines[i])
                if not m:
                    raise PatchError(f"{source}:{i + 1}: malformed hunk header {lines[i]!r}")
                os_, ol, ns, nl = int(m[1]), int(m[2] or 1), int(m[3]), int(m[4] or 1)
                header_no = i + 1
                i += 1
                body: list[tuple[str, str]] = []
                seen_old = seen_new = 0
                while (seen_old < ol or seen_new < nl) and i < n:
                    raw = lines[i]
                    tag, txt = (raw[:1] or " "), raw[1:]
                    if raw == "":
                        tag, txt = " ", ""  # some tools drop the space of an empty context line
                    if tag not in " +-":
                        raise PatchError(f"{source}:{i + 1}: unexpected line in hunk (expected ' ', '+' or '-')")
                    body.append((tag, txt))
                    seen_old += tag != "+"
                    seen_new += tag != "-"
                    i += 1
                    if i < n and lines[i] == _NO_NEWLINE:
                        if tag == "-":
                            nn_old = True
                        elif tag == "+":
                            nn_new = True
                        else:
                            nn_old = nn_new = True
                        i += 1
                if seen_old != ol or seen_new != nl:
                    raise PatchError(
                        f"{source}:{header_no}: hunk is truncated: header says -{ol} +{nl} lines, "
                        f"body has -{seen_old} +{seen_new}"
                    )
                hunks.append(Hunk(os_, ol, ns, nl, m[5].strip(), tuple(body), header_no))
            if not hunks and not extended:
                raise PatchError(f"{source}:{start}: file header without hunks")
            files.append(FilePatch(old, new, tuple(hunks), tuple(extended), start, nn_old, nn_new))
            extended = []
            continue
        if line.startswith("diff "):
            extended = []
        elif line.startswith(
            (
                "index ",
                "new file mode",
                "deleted file mode",
                "old mode",
                "new mode",
                "similarity index",
                "rename ",
                "copy ",
                "dissimilarity index",
            )
        ):
            extended.append(line)
        elif line.startswith(("GIT binary patch", "Binary files ")):
            raise PatchError(f"{source}:{i + 1}: binary patches are not supported")
        elif line.startswith("@@"):
            raise PatchError(f"{source}:{i + 1}: hunk without a ---/+++ file header")
        i += 1
    if not files:
        raise PatchError(f"{source}: no file patches found (is it a unified diff?)")
    return files


def render_file_patch(fp: FilePatch, *, path: str | None = None) -> str:
    """Write one file patch back as text, optionally under another path (same path on both sides)."""
    old = "/dev/null" if fp.old_path is None else f"a/{path or fp.old_path}"
    new = "/dev/null" if fp.new_path is None else f"b/{path or fp.new_path}"
    out = [f"diff --git a/{path or fp.path} b/{path or fp.path}"]
    out += [e for e in fp.extended if e.startswith(("new file mode", "deleted file mode"))]
    out += [f"--- {old}", f"+++ {new}"]
    for h in fp.hunks:
        sect = f" {h.section}" if h.section else ""
        out.append(f"@@ -{h.old_start},{h.old_len} +{h.new_start},{h.new_len} @@{sect}")
        out += [tag + txt for tag, txt in h.lines]
        _no_newline_markers(fp, h, out)
    return "\n".join(out) + "\n"


def _no_newline_markers(fp: FilePatch, h: Hunk, out: list[str]) -> None:
    """Re-insert the ``\\ No newline`` markers after the last old/new line of the final hunk."""
    if h is not fp.hunks[-1] or not (fp.no_newline_old or fp.no_newline_new):
        return
    body = list(h.lines)
    start = len(out) - len(body)
    last_old = max((k for k, (t, _) in enumerate(body) if t != "+"), default=None)
    last_new = max((k for k, (t, _) in enumerate(body) if t != "-"), default=None)
    marks = set()
    if fp.no_newline_old and last_old is not None:
        marks.add(last_old)
    if fp.no_newline_new and last_new is not None:
        marks.add(last_new)
    for k in sorted(marks, reverse=True):
        out.insert(start + k + 1, _NO_NEWLINE)


@dataclass(frozen=True)
class Edit:
    """One run of changed lines with the context around it, as it was in the patch set."""

    before: tuple[str, ...]
    """Context lines above the change, nearest last."""
    removed: tuple[str, ...]
    added: tuple[str, ...]
    after: tuple[str, ...]
    """Context lines below the change, nearest first."""
    hunk: int
    """Index of the hunk in its file (for reports)."""
    function: str | None
    """Enclosing function in the old file, when the diff says (``@@ ... @@ section``) or context shows it."""
    tail: bool = False
    """The change ends its function (the next context line is the function's closing ``}``)."""
    next_function: str | None = None
    """For a tail change: the function defined right after, when the context shows its header."""
    head_of: str | None = None
    """The change opens this function's body (the context above is its header)."""
    file_scope: bool = False
    """The change sits between functions (a column-0 ``}`` above, or a definition/namespace end below)."""
    closes_function: bool = False
    """The replaced lines end their function (``... {}`` or a column-0 ``}``) and a definition follows."""
