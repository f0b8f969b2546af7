"""The shell blocks of the documentation: found, checked against the CLI, run, and their outputs parsed.

Used by the site build (docs/_hooks.py runs a tutorial's blocks and shows the pictures they write) and
by the tests (tests/docs/). A fenced ``bash``/``sh``/``console`` block is a runnable block; the HTML comment
on the line before it says how it runs::

    <!-- run -->                  run it (the default for README.md and docs/tutorials/)
    <!-- run: root -->            needs root and the emulator: runs in the slow lane only
    <!-- run: exit=1 -->          the last command's expected exit status (quicsm check: 1 = changed)
    <!-- run: needs=s3 -->        a local S3 endpoint (moto) and its credentials in the environment
    <!-- run: root bundled=traces/X:runs/Y -->   where the build cannot run it, the runs it makes are
                                  the ones bundled in traces/X, linked at runs/Y for the blocks after it
    <!-- run: no (why) -->        never run (e.g. the CI test command itself); still checked against the CLI

Every ``quicsm`` command in every block of every page, run or not, is parsed by the real click commands
(:func:`check_cli`): an option that no longer exists, a bad choice or a missing verb fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""Flags headless Chromium needs here as root on a closed network (the screenshot test, docs/_pictures.py)."""
SHELLS = {"bash", "sh", "shell", "console"}
"""Fence languages of runnable blocks."""
CHECKED = {"", "text", "yaml", "yml"}
"""Other fences whose ``quicsm`` lines are still checked against the CLI (plain fences, CI workflows)."""
_FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)[^\n]*$")
_MARK = re.compile(r"^\s*<!--\s*run(?::\s*(?P<opts>.*?))?\s*-->\s*$")


@dataclass
class Block:
    """One fenced shell block of a page."""

    page: Path
    line: int
    """1-based line of the opening fence."""
    text: str
    lang: str = "bash"
    marked: bool = False
    """An explicit ``<!-- run ... -->`` comment precedes it."""
    root: bool = False
    run: bool = True
    why_not: str = ""
    exit: int = 0
    needs: set[str] = field(default_factory=set)
    bundled: tuple[str, str] | None = None
    """A root block's stand-in: (SRC, DEST) where SRC holds runs it made (bundled in the checkout) and DEST
    is where it writes them; without root, SRC is linked at DEST so the blocks after it read the same."""

    @property
    def where(self) -> str:
        try:
            rel = self.page.relative_to(ROOT)
        except ValueError:
            rel = self.page
        return f"{rel}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The shell blocks of a Markdown page, with their run markers."""
    return blocks_of_text(page.read_text(encoding="utf-8"), page)


def blocks_of_text(text: str, page: Path = Path("-")) -> list[Block]:
    lines = text.splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m["fence"], m["lang"].lower(), i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(m["indent"]) :] if lines[i].startswith(m["indent"]) else lines[i])
            i += 1
        i += 1
        if lang not in SHELLS and lang not in CHECKED:
            continue
        b = Block(page, start + 1, "\n".join(body), lang)
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mark = _MARK.match(lines[j]) if j >= 0 else None
        if mark:
            b.marked = True
            _options(b, mark["opts"] or "")
        out.append(b)
    return out


def _options(b: Block, opts: str) -> None:
    if opts.startswith("no"):
        b.run, b.why_not = False, opts[2:].strip(" ()") or "not run"
        return
    for word in opts.split():
        if word == "root":
            b.root = True
        elif word.startswith("exit="):
            b.exit = int(word[5:])
        elif word.startswith("bundled="):
            src, _, dest = word[8:].partition(":")
            b.bundled = (src, dest)
        elif word.startswith("needs="):
            b.needs.update(word[6:].split(","))
        else:
            raise ValueError(
                f"{b.where}: unknown run option {word!r} (root, exit=N, needs=s3, bundled=SRC:DEST, no (why))"
            )


# ---- commands and the CLI ------------------------------------------------------------------------------


def commands(text: str, shell: bool = True) -> Iterator[list[str]]:
    """Every ``quicsm`` invocation in a block, as argv without the program (continuations joined,
    ``&&``/``;``/``|`` split, a leading ``sudo`` or ``python3 -m`` dropped, comments removed, optional
    ``[...]`` parts of a synopsis left out). Outside shell blocks only lines that start with the command
    count (a diagram or a program's output may name a verb)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        line = re.sub(r"^(-\s*)?(run:\s*\|?)?\s*(\$\s)?", "", line.strip())
        if not shell and not re.match(r"(sudo\s+)?(python3? -m )?quicsm\s+[a-z-]+(\s|$)", line):
            continue
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
        except ValueError:
            continue
        tokens = _drop_optional(tokens)
        part: list[str] = []
        for tok in [*tokens, ";"]:
            if tok and set(tok) <= set(";&|()"):
                argv = _quicsm_argv(part)
                if argv is not None:
                    yield argv
                part = []
            else:
                part.append(tok)


def _drop_optional(tokens: list[str]) -> list[str]:
    out: list[str] = []
    depth = 0
    for tok in tokens:
        if tok.startswith("[") and not tok.startswith("[["):
            depth += 1
        if depth == 0:
            out.append(tok)
        if depth and tok.endswith("]"):
            depth -= tok.count("]") if tok.count("]") <= depth else depth
    return out


def _quicsm_argv(words: list[str]) -> list[str] | None:
    while words and (re.fullmatch(r"\w+=.*", words[0]) or words[0] in {"sudo", "time", "nice", "exec", "env"}):
        words = words[1:]
    if words[:1] == ["quicsm"]:
        return words[1:]
    if words[:3] in (["python3", "-m", "quicsm"], ["python", "-m", "quicsm"]):
        return words[3:]
    return None


def check_cli(argv: list[str]) -> str | None:
    """Parse ``quicsm ARGV`` with the real click commands, running nothing: None if the CLI accepts
    it, else why not. Paths that do not exist here (placeholders such as ``runs/new``) are accepted."""
    import click

    from quicsm.cli.main import cli

    cmd: click.Command = cli
    args = list(argv)
    parent: click.Context | None = None
    name = "quicsm"
    try:
        while True:
            ctx = cmd.make_context(name, args, parent=parent)
            if not isinstance(cmd, click.Group):
                return None
            rest = [*ctx._protected_args, *ctx.args]
            if not rest:
                return None
            name, sub, args = cmd.resolve_command(ctx, rest)
            if sub is None or name is None:
                return f"no command {rest[0]!r}"
            cmd, parent = sub, ctx
    except click.exceptions.Exit:
        return None  # --help, --version
    except click.BadParameter as exc:
        if isinstance(getattr(exc.param, "type", None), click.Path) and "does not exist" in exc.format_message():
            return None
        return exc.format_message()
    except click.ClickException as exc:
        return exc.format_message()


# ---- running -------------------------------------------------------------------------------------------

_SKIP_TOP = {"out", "site", "build", "dist", ".git", "work-tmp"}


def workdir(base: Path) -> Path:
    """A scratch copy of the checkout's layout: every top-level entry linked, ``out/`` fresh, and a
    ``quicsm`` on PATH that runs this checkout's code."""
    base.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name not in _SKIP_TOP and not (base / entry.name).exists():
            (base / entry.name).symlink_to(entry)
    tools = base / ".bin"
    tools.mkdir(exist_ok=True)
    shim = tools / "quicsm"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m quicsm "$@"\n')
    shim.chmod(0o755)
    return base


@contextlib.contextmanager
def services(needs: set[str]) -> Iterator[dict[str, str]]:
    """What blocks with ``needs=`` run against, as environment variables: ``s3``, a local S3 server
    (moto, from the test extras) on 127.0.0.1 with test credentials, stopped at the end."""
    unknown = needs - {"s3"}
    if unknown:
        raise ValueError(f"unknown needs: {sorted(unknown)} (known: s3)")
    if "s3" not in needs:
        yield {}
        return
    import logging
    import socket

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # not a line per request on the build's stderr

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        yield {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": url,
            "FSSPEC_S3_ENDPOINT_URL": url,
        }
    finally:
        server.stop()


def stand_in(b: Block, work: Path) -> None:
    """Link a root block's bundled runs where it would have written them (see :attr:`Block.bundled`)."""
    if b.bundled is None:
        return
    src, dest = ROOT / b.bundled[0], work / b.bundled[1]
    if not src.is_dir():
        raise FileNotFoundError(f"{b.where}: bundled={b.bundled[0]} is not a directory of the checkout")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists():
        dest.symlink_to(src)


TOOLCHAINS = ("/usr/local/go/bin", str(Path.home() / "go" / "bin"), str(Path.home() / ".cargo" / "bin"))
"""Where scripts/install.sh puts Go and cargo (as .ci/run's PATH has them)."""


def environment(work: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    path = [str(work / ".bin"), *env.get("PATH", "").split(os.pathsep)]
    path += [t for t in TOOLCHAINS if t not in path and Path(t).is_dir()]
    env["PATH"] = os.pathsep.join(path)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("CI", None)  # a tutorial's own commands do not see the test suite's CI switches
    env.update(extra or {})
    return env


@dataclass
class Ran:
    block: Block
    returncode: int
    output: str
    written: list[Path]


_PRELUDE = """set -eo pipefail
sudo() { "$@"; }
"""


def run(b: Block, work: Path, env: dict[str, str], *, timeout: float = 600) -> Ran:
    """Run one block in ``work`` (a :func:`workdir`) with bash; the files it wrote, newest state."""
    before = _snapshot(work)
    script = _PRELUDE + b.text.replace("bash scripts/install.sh", "true")  # installed already
    if b.exit:
        script = _PRELUDE + "set +e\n" + b.text + "\nstatus=$?\n[ $status = " + str(b.exit) + " ] || exit 99"
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    after = _snapshot(work)
    written = sorted(p for p, m in after.items() if before.get(p) != m)
    return Ran(b, proc.returncode, proc.stdout, written)


def _snapshot(work: Path) -> dict[Path, tuple[int, int]]:
    seen: dict[Path, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(work):
        d = Path(dirpath)
        dirnames[:] = [n for n in dirnames if not (d / n).is_symlink() and n != ".bin"]
        for n in filenames:
            p = d / n
            if p.is_symlink():
                continue
            st = p.stat()
            seen[p] = (st.st_mtime_ns, st.st_size)
    return seen


TEXT = {".txt", ".log", ".stderr", ".stdout", ""}
"""Outputs that may be empty (a quiet program's stderr)."""


def check_output(path: Path) -> str | None:
    """None if ``path`` is a non-empty file that parses as what its name says, else why not."""
    if not path.is_file():
        return f"{path.name}: missing"
    suffixes = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    if path.stat().st_size == 0:  # a program's empty stderr is fine; an empty picture or report is not
        return None if suffixes in TEXT else f"{path.name}: empty"
    try:
        data = path.read_bytes()
        if suffixes.endswith(".gz"):
            import gzip

            data = gzip.decompress(data)
            suffixes = suffixes[: -len(".gz")]
        if suffixes in (".svg", ".xml"):
            root = ET.fromstring(data)
            if suffixes == ".svg" and not root.tag.endswith("svg"):
                return f"{path.name}: root element {root.tag}, not svg"
        elif suffixes == ".json":
            json.loads(data)
        elif suffixes in (".jsonl", ".ndjson"):
            for n, line in enumerate(data.splitlines(), 1):
                if line.strip():
                    try:
                        json.loads(line)
                    except ValueError as exc:
                        return f"{path.name}:{n}: {exc}"
        elif suffixes == ".html":
            from html.parser import HTMLParser

            text = data.decode()
            HTMLParser().feed(text)
            if "<html" not in text.lower():
                return f"{path.name}: no <html> element"
        elif suffixes == ".png":
            if not data.startswith(b"\x89PNG\r\n\x1a\n"):
                return f"{path.name}: not a PNG"
        elif suffixes == ".pdf":
            if not data.startswith(b"%PDF"):
                return f"{path.name}: not a PDF"
        elif suffixes == ".parquet":
            import pyarrow.parquet as pq

            pq.read_table(path)
        elif suffixes == ".toml":
            import tomllib

            tomllib.loads(data.decode())
        elif suffixes in TEXT or suffixes in (".qsb", ".diff", ".csv", ".dot", ".md"):
            pass  # text, or a format with its own reader, checked by the commands that read it
    except Exception as exc:  # any parser's complaint is the answer
        return f"{path.name}: does not parse as {suffixes or 'a file'} ({type(exc).__name__}: {exc})"
    return None


def pages() -> list[Path]:
    """Every Markdown page whose commands the docs promise: the README, docs/ (all), traces/README.md."""
    found = [ROOT / "README.md", ROOT / "traces" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def runnable_pages() -> list[Path]:
    """Pages whose blocks all run by default (an unmarked block runs)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs" / "tutorials").glob("*.md"))]


def scratch(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def clean(work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
