"""What Rust targets share: function boundaries of rustfmt-formatted code and the crate's version.

Not a target itself (the leading underscore keeps the registry from importing it as one).
"""

from __future__ import annotations

import re

from quicsm.instrumentation.targets import Located, Target

__all__ = ["RustFunctions", "cargo_crate_version"]

_VERSION = re.compile(r'^version\s*=\s*"([^"]+)"', re.MULTILINE)
_RUST_FN = re.compile(r"^(\s*)(?:pub(?:\([\w:]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)\s*[<(]")


def cargo_crate_version(located: Located, crate: str) -> str | None:
    """The ``version`` of ``Cargo.toml`` in the located root, when that manifest is the crate ``crate``."""
    try:
        text = (located.root / "Cargo.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    m = _VERSION.search(text)
    named = re.search(rf'^name\s*=\s*"{re.escape(crate)}"\s*$', text, re.MULTILINE)
    return m.group(1) if m and named else None


class RustFunctions(Target):
    """Function boundaries in Rust: ``fn`` items at any indentation (methods sit inside ``impl`` blocks),
    closed by the first ``}`` at the item's own indentation (rustfmt layout)."""

    def header_name(self, line: str) -> str | None:
        m = _RUST_FN.match(line)
        return m.group(2) if m and not line.rstrip().endswith(";") else None

    def function_at(self, lines: list[str], index: int) -> str | None:
        """The innermost ``fn`` whose header .. closing brace holds ``lines[index]``."""
        inside = [s for s in self._spans(lines) if s[0] <= index <= s[2]]
        return min(inside, key=lambda s: s[2] - s[0])[3] if inside else None

    def functions(self, lines: list[str]) -> list[tuple[str, int, int, int]]:
        return [(name, start, body, end) for start, body, end, name in self._spans(lines)]

    def _spans(self, lines: list[str]) -> list[tuple[int, int, int, str]]:
        """(header line, first body line, closing line, name) in file order; one-line bodies included."""
        spans: list[tuple[int, int, int, str]] = []
        n = len(lines)
        for i, line in enumerate(lines):
            m = _RUST_FN.match(line)
            if not m or line.rstrip().endswith(";"):
                continue
            indent = m.group(1)
            j = i
            while j < n and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
                j += 1
            if j >= n or "{" not in lines[j]:
                continue
            if lines[j].rstrip().endswith("}") and lines[j].count("{") == lines[j].count("}"):
                spans.append((i, j, j, m.group(2)))
                continue
            close = indent + "}"
            k = j + 1
            while k < n and lines[k].rstrip() != close:
                k += 1
            if k < n:
                spans.append((i, j + 1, k, m.group(2)))
        return spans
