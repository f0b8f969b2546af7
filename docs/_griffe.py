"""A griffe extension for the API reference: quicsm's docstrings are reST-flavoured (``code``, Sphinx roles,
``::`` literal blocks, ``>>>`` examples); this turns them into the Markdown mkdocstrings renders, so a
doctest's output is not read as a Markdown link and a role shows as the code it names."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc|obj|const|ref|py:\w+):`~?!?([^`]+)`")
_DOUBLE = re.compile(r"``(.+?)``")


def markdown_of(text: str) -> str:
    """reST-ish docstring text -> Markdown."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            block = []
            while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
                block.append(lines[i][len(indent) :])
                i += 1
            out += [indent + "```pycon", *(indent + b for b in block), indent + "```"]
            continue
        if line.rstrip().endswith("::") and not line.strip().startswith(".."):
            head = line.rstrip()[:-2].rstrip()
            out.append(_inline(head + (":" if head and not head.endswith(":") else "")))
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            base = len(line) - len(line.lstrip())
            block = []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > base):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            strip = min((len(b) - len(b.lstrip()) for b in block if b.strip()), default=0)
            pad = " " * base
            out += ["", pad + "```text", *(pad + b[strip:] for b in block), pad + "```", ""]
            continue
        out.append(_inline(line))
        i += 1
    return "\n".join(out)


def _inline(line: str) -> str:
    line = _ROLE.sub(lambda m: "`" + m.group(1) + "`", line)
    return _DOUBLE.sub(lambda m: "`" + m.group(1) + "`", line)


class ReSTToMarkdown(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_of(obj.docstring.value)
