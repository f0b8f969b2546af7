"""quic-go: the Go module ``github.com/quic-go/quic-go`` (a copy of its module root).

Its ``internal/congestion/cubic_sender.go`` is a port of Chromium's TcpCubicSenderBytes (slow start,
hybrid slow start, recovery, max window, cwnd-limited check, RTO); every released version constructs it
with Reno in ``internal/ackhandler/sent_packet_handler.go``. Eras follow the sender's API:

* ``go-a``: ``OnPacketLost`` and an interface ``logging.ConnectionTracer`` (up to v0.38, 2023-09);
* ``go-b``: ``OnCongestionEvent``, ``*logging.ConnectionTracer`` struct (v0.39 .. v0.5x, to 2025-10);
* ``go-c``: qlog events through ``qlogwriter`` and ``monotime``; later versions add ``OnSpuriousLoss``
  (Reno undo after a spurious loss).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicsm.instrumentation.targets import Identity, Located, Release, Target, read_source_file, register

if TYPE_CHECKING:
    from quicsm.instrumentation.diff import Edit

__all__ = ["ERA_DATES", "MODULE", "QuicGoTarget", "add_imports", "build_requirements", "go_imports", "module_version"]

MODULE = "github.com/quic-go/quic-go"

ERA_DATES: dict[str, tuple[str, str]] = {
    "go-a": ("2020-01-01", "2023-09-10"),
    "go-b": ("2023-09-11", "2025-10-07"),
    "go-c": ("2025-10-08", "9999-12-31"),
}
"""Era -> the dates it can cover (from the quic-go history: the rename to OnCongestionEvent on
2023-09-11, the qlogwriter rewrite on 2025-10-08)."""

# (feature, file, regex): evidence looked for in the sender files.
_FEATURES: tuple[tuple[str, str, str], ...] = (
    ("on_packet_lost", "cubic_sender.go", r"\bfunc \(c \*cubicSender\) OnPacketLost\("),
    ("on_congestion_event", "cubic_sender.go", r"\bfunc \(c \*cubicSender\) OnCongestionEvent\("),
    ("on_spurious_loss", "cubic_sender.go", r"\bfunc \(c \*cubicSender\) OnSpuriousLoss\("),
    ("qlogwriter", "cubic_sender.go", r'"github\.com/quic-go/quic-go/qlogwriter"'),
    ("tracer_interface", "cubic_sender.go", r"\btracer\s+logging\.ConnectionTracer\b"),
    ("tracer_struct", "cubic_sender.go", r"\btracer\s+\*logging\.ConnectionTracer\b"),
    ("reno_default", "sent_packet_handler.go", r"\btrue, // use Reno\b"),
    ("pto", "sent_packet_handler.go", r"\bh\.ptoCount\+\+"),
    ("quicsm_instrumented", "cubic_sender.go", r"\bquicsmTransition\b"),
)
_MODULE = re.compile(r"^module\s+github\.com/quic-go/quic-go\s*$", re.MULTILINE)
_MODULE_PATH = "github.com/quic-go/quic-go/"
_SPEC = re.compile(r'^\s*(?:([A-Za-z_]\w*|\.|_)\s+)?"([^"\s]+)"\s*(?://.*)?$')
_SINGLE = re.compile(r'^import\s+(?:([A-Za-z_]\w*|\.|_)\s+)?"([^"\s]+)"')
_STD_FALLBACK = ("errors", "fmt", "log", "math", "os", "strconv", "strings", "sync", "time")
"""Standard packages added lines may use without the set showing their import (it was already there)."""
_VERSION_DIR = re.compile(r"quic-go@(v\d+\.\d+\.\d+[\w.+-]*)")


def _spec(line: str) -> tuple[str, str] | None:
    """(name the file uses, import path) of an import spec line such as ``\tlog "example.com/x/log"``."""
    m = _SPEC.match(line)
    if not m:
        return None
    return (m.group(1) or m.group(2).rsplit("/", 1)[-1]), m.group(2)


def _is_std(path: str) -> bool:
    return "." not in path.split("/", 1)[0]


def go_imports(lines: list[str]) -> tuple[dict[str, str], tuple[int, int] | None]:
    """Imported name -> path, and the ``import (`` .. ``)`` line span of the first import block."""
    names: dict[str, str] = {}
    block: tuple[int, int] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("func "):
            break
        if line.startswith("import ("):
            j = i + 1
            while j < len(lines) and lines[j].strip() != ")":
                spec = _spec(lines[j])
                if spec:
                    names[spec[0]] = spec[1]
                j += 1
            block = block or (i, j)
            i = j
        else:
            m = _SINGLE.match(line)
            if m:
                names[m.group(1) or m.group(2).rsplit("/", 1)[-1]] = m.group(2)
        i += 1
    return names, block


def _insert_sorted(group: list[str], spec: str) -> None:
    key = spec.strip()
    k = 0
    while k < len(group) and group[k].strip() < key:
        k += 1
    group.insert(k, spec)


def add_imports(text: str, paths: list[str]) -> str:
    """``text`` with the import paths added gofmt-style: standard packages in the first group (a new one
    above the others if the first is not standard), the rest in the last group; a block is made if none."""
    eol = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines()
    _, block = go_imports(lines)
    specs = [f'\t"{p}"' for p in paths]
    if block is None:
        k = next((n + 1 for n, line in enumerate(lines) if line.startswith("package ")), 0)
        while k < len(lines) and _SINGLE.match(lines[k]):
            k += 1
        lines[k:k] = ["", "import (", *sorted(specs), ")"]
    else:
        start, end = block
        groups: list[list[str]] = [[]]
        for line in lines[start + 1 : end]:
            if line.strip():
                groups[-1].append(line)
            elif groups[-1]:
                groups.append([])
        groups = [g for g in groups if g]
        std_first = bool(groups) and all(_is_std(s[1]) for s in map(_spec, groups[0]) if s)
        for p, spec in zip(paths, specs, strict=True):
            if _is_std(p):
                if not std_first:
                    groups.insert(0, [])
                    std_first = True
                _insert_sorted(groups[0], spec)
            else:
                if not groups or (len(groups) == 1 and std_first):
                    groups.append([])
                _insert_sorted(groups[-1], spec)
        body: list[str] = []
        for g in groups:
            body += ([""] if body else []) + g
        lines[start + 1 : end] = body
    out = eol.join(lines)
    return out + eol if text.endswith(("\n", "\r\n")) else out


def module_version(located: Located) -> str | None:
    """The module version: from the tree's :data:`SOURCE_FILE`, or from a module-cache directory name
    ``quic-go@vX`` (a copy named like one counts too)."""
    rel = _release(located.root)
    return rel.version if rel else None


def _release(root: Path) -> Release | None:
    data = read_source_file(root)
    mod = data.get("module") if data else None
    if isinstance(mod, dict) and mod.get("path") == MODULE and isinstance(mod.get("version"), str):
        return Release(str(mod["version"]), {"module": dict(mod)}, None, _str(data, "date"), "quicsm patch fetch")
    m = _VERSION_DIR.search(root.name)
    if not m:
        return None
    version = m.group(1)
    module: dict[str, object] = {"path": MODULE, "version": version}
    date = None
    # a directory of the Go module cache: its download cache beside it has the zip hash and release time
    dl = root.parent.parent.parent / "cache" / "download" / MODULE / "@v"
    try:
        module["sum"] = (dl / f"{version}.ziphash").read_text(encoding="utf-8").strip()
        info = json.loads((dl / f"{version}.info").read_text(encoding="utf-8"))
        date = str(info.get("Time", ""))[:10] or None
    except (OSError, ValueError):
        pass
    return Release(version, {"module": module}, None, date, "go module cache" if "sum" in module else "directory name")


def _str(data: Mapping[str, object] | None, key: str) -> str | None:
    val = data.get(key) if data else None
    return str(val) if isinstance(val, str) and val else None


def _grep(root: Path, pattern: str, *globs: str) -> bool:
    rx = re.compile(pattern, re.MULTILINE)
    for g in globs:
        for p in sorted(root.glob(g)):
            try:
                if rx.search(p.read_text(encoding="utf-8", errors="replace")):
                    return True
            except OSError:
                continue
    return False


QTLS_TOOLCHAINS = {"qtls-go1-20": "go1.20.14", "qtls-go1-19": "go1.19.13"}
"""quic-go up to v0.40 carries its TLS in qtls-go1-NN, which builds only with that Go release."""


def build_requirements(root: Path) -> dict[str, Any]:
    """What building the testbed's Go server and client against this quic-go source needs, read from the
    source itself: ``build_tags`` picking the API shims of ``testbed/server`` and ``testbed/client``, and
    the ``toolchain`` for versions that build only with an old Go.

    * http3: ``quicgo_a`` while ``http3.Server`` has ``QuicConfig`` (to v0.42), ``quicgo_b`` while the
      client is ``http3.RoundTripper`` with ``QUICConfig`` (v0.43-v0.46), none once ``http3.Transport`` exists;
    * qlog: none with ``qlog.DefaultConnectionTracer`` (v0.46+), ``qlog_newtracer`` while
      ``quic.Config.Tracer`` is a ``logging.Tracer`` (to v0.34), ``qlog_conntracer`` in between.
    """
    tags: list[str] = []
    if _grep(root, r"^\s*QuicConfig\s+\*quic\.Config", "http3/server.go"):
        tags.append("quicgo_a")
    elif not _grep(root, r"^type Transport struct", "http3/*.go"):
        tags.append("quicgo_b")
    if not _grep(root, r"^func DefaultConnectionTracer\(", "qlog/*.go"):
        newtracer = _grep(root, r"^\s*Tracer\s+logging\.Tracer\b", "interface.go", "config.go")
        tags.append("qlog_newtracer" if newtracer else "qlog_conntracer")
    toolchain = None
    try:
        go_mod = (root / "go.mod").read_text(encoding="utf-8")
    except OSError:
        go_mod = ""
    for qtls, release in QTLS_TOOLCHAINS.items():
        if f"github.com/quic-go/{qtls} " in go_mod:
            toolchain = release
            break
    return {"build_tags": tags, "toolchain": toolchain}


class QuicGoTarget(Target):
    name: ClassVar[str] = "quic-go"
    description: ClassVar[str] = "github.com/quic-go/quic-go module root (internal/congestion, internal/ackhandler)"
    eras: ClassVar[tuple[str, ...]] = ("go-a", "go-b", "go-c")
    algorithm_files: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "reno": ("cubic_sender.go", "sent_packet_handler.go"),
        "cubic": ("cubic_sender.go", "sent_packet_handler.go"),
    }
    classes: ClassVar[Mapping[str, str]] = {
        "cubic_sender.go": "cubicSender",
        "cubic.go": "Cubic",
        "hybrid_slow_start.go": "HybridSlowStart",
        "sent_packet_handler.go": "sentPacketHandler",
    }
    roots: ClassVar[tuple[str, ...]] = ("",)
    dirs: ClassVar[tuple[str, ...]] = ("internal/congestion", "internal/ackhandler")
    extensions: ClassVar[tuple[str, ...]] = (".go",)
    exclusive_note: ClassVar[str] = (
        "quic-go runs one congestion sender: the reno set keeps Reno, as quic-go ships, the cubic set switches "
        "the sender to Cubic"
    )

    def identify(self, located: Located) -> Identity:
        """Era from the sender's API (see the module docstring), plus the features found as evidence."""
        texts = {name: located.read(name) or "" for name in ("cubic_sender.go", "sent_packet_handler.go")}
        features: dict[str, str] = {}
        for feat, fname, rx in _FEATURES:
            m = re.search(rx, texts.get(fname, ""))
            if m:
                features[feat] = f"{fname}: {m.group(0)}"
        notes: list[str] = []
        if "qlogwriter" in features or "on_spurious_loss" in features:
            era = "go-c"
        elif "on_congestion_event" in features:
            era = "go-b"
        elif "on_packet_lost" in features:
            era = "go-a"
        else:
            era = self.eras[-1]
            notes.append("no known cubicSender loss callback found; era guessed as the newest")
        go_mod = located.root / "go.mod"
        try:
            if _MODULE.search(go_mod.read_text(encoding="utf-8")):
                features["module"] = "go.mod: module github.com/quic-go/quic-go"
        except OSError:
            notes.append("no go.mod at the source root (not a module copy)")
        version = module_version(located)
        if version:
            features["version"] = version
        lo, hi = ERA_DATES[era]
        return Identity(era, self.algorithms(located), features, lo, hi, tuple(notes))

    def release(self, located: Located) -> Release | None:
        """The quic-go release of the tree, with the module block a set made for it carries: path,
        version, go.sum hash and what the testbed build needs (:func:`build_requirements`)."""
        rel = _release(located.root)
        if rel is None:
            return None
        module = dict(rel.manifest["module"])  # type: ignore[call-overload]
        req = build_requirements(located.root)
        module["build_tags"] = req["build_tags"]
        if req["toolchain"]:
            module["toolchain"] = req["toolchain"]
        return Release(rel.version, {"module": module}, rel.commit, rel.date, rel.source)

    # ---- porter hooks ---------------------------------------------------------------------------
    def port_edits(self, edits: list[Edit]) -> list[Edit]:
        """Changes that only add import specs are kept back: :meth:`finish_ported` rebuilds the imports
        for the new file, whose import block may look nothing like the old one."""
        return [
            e
            for e in edits
            if e.removed or not any(_spec(x) for x in e.added) or not all(_spec(x) or not x.strip() for x in e.added)
        ]

    def finish_ported(
        self, located: Located, path: str, text: str, added: list[str], set_lines: list[str]
    ) -> tuple[str, list[str]]:
        """Import every package the added lines use that the new file lacks (each era of quic-go imports
        other packages: v0.56+ no longer imports ``time`` in ``cubic_sender.go``); refuse a package of
        the module that this version no longer has."""
        if not path.endswith(".go"):
            return text, []
        known = dict(spec for spec in map(_spec, set_lines) if spec)
        have, _ = go_imports(text.splitlines())
        code = "\n".join(x for x in added if not _spec(x))
        wanted: dict[str, str] = {}
        for name in sorted({*known, *_STD_FALLBACK}):
            if name in have or not re.search(rf"(?<![\w.]){re.escape(name)}\.[A-Za-z_]", code):
                continue
            if name not in known and re.search(rf"\b{name}\s*(?::=|=[^=])|\bvar\s+{name}\b", text):
                continue  # a variable of that name, not the package
            wanted[name] = known.get(name, name)
        problems = [
            f"the added lines use package {name} ({p}), which this version of quic-go does not have"
            for name, p in wanted.items()
            if p.startswith(_MODULE_PATH) and not (located.root / p[len(_MODULE_PATH) :]).is_dir()
        ]
        if problems or not wanted:
            return text, problems
        return add_imports(text, sorted(wanted.values())), []

    def check_ported(self, path: str, text: str, added: list[str]) -> list[str]:
        """A package the added lines use that the ported file still does not import fails the port."""
        if not path.endswith(".go"):
            return []
        have, _ = go_imports(text.splitlines())
        code = "\n".join(x for x in added if not _spec(x))
        return [
            f"the added lines use package {name}, which {path} does not import"
            for name in _STD_FALLBACK
            if name not in have
            and re.search(rf"(?<![\w.]){name}\.[A-Za-z_]", code)
            and not re.search(rf"\b{name}\s*(?::=|=[^=])|\bvar\s+{name}\b", text)
        ]


register(QuicGoTarget())
