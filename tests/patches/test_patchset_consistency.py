"""Every log statement a shipped patch set adds must print a line the contract parser reads back.

No upstream code is needed: the statements are taken from each set's ``changes.diff`` (C++ ``<<`` chains,
Go ``Printf`` format strings, Rust ``eprintln!``-style ``{}`` format strings), their expressions replaced by plausible values (numbers for the metric
fields; for state-like fields every string the expression can take, found by following local
definitions, assignments, parameters and call sites in the code the patch adds). Each rendered line
goes through :func:`quicsm.traces.contract.parse_line`; the states it names must be canonical for the
set's algorithm and, together, cover the manifest's ``states``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import quicsm
from quicsm.traces.contract import ContractError, parse_line
from quicsm.traces.states import BBR2_PHASES, BBR_RECOVERY, BBR_STATES, CUBIC_STATES, canonical_state

PATCHES = Path(quicsm.__file__).parent / "patches"
SET_DIRS = sorted(p.parent for p in PATCHES.glob("*/*/manifest.json"))

ALLOWED_STATES: dict[str, set[str]] = {
    "cubic": set(CUBIC_STATES),
    "reno": set(CUBIC_STATES),
    # ApplicationLimited: quinn's BBR (v1) sets print it while the ack event is app-limited
    "bbr": set(BBR_STATES) | {"ProbeBw.Up", "ProbeBw.Down", "ProbeBw.Cruise", "ApplicationLimited"},
    # ApplicationLimited: Cloudflare quiche's gcongestion BBR2 prints it while its bandwidth sample is app-limited
    "bbr2": {"Init", "Startup", "Drain", "ProbeBw", "ProbeRtt", "ApplicationLimited"}
    | {f"ProbeBw.{p}" for p in BBR2_PHASES},
    "bbr3": {"Init", "Startup", "Drain", "ProbeBw", "ProbeRtt"} | {f"ProbeBw.{p}" for p in BBR2_PHASES},
}
ALLOWED_CC = {"cubic": {"cubic", "reno"}, "reno": {"cubic", "reno"}, "bbr": {"bbr"}, "bbr2": {"bbr2"}, "bbr3": {"bbr3"}}
NUMBERS = {
    "conn": "0x55d0c81e2a40",
    "t_us": "1843392",
    "cwnd": "43800",
    "inflight": "41610",
    "ssthresh": "43800",
    "pacing_bps": "12000000",
    "bw_bps": "10000000",
    "min_rtt_us": "20000",
    "srtt_us": "25000",
    "cycle": "3",
    "v": "1",
}
ENUMERATED = {"from", "to", "cc", "ev", "trigger", "recovery", None}
_FIELD = re.compile(r"^[a-z][a-z0-9_]*=\S+$")
_STR = r'"(?:[^"\\\n]|\\.)*"'
_STR_RX = re.compile(_STR)
_GO_VERB = re.compile(r"%(?:%|[-+# 0]*\d*(?:\.\d+)?[vTtbcdoOqxXUeEfFgGsp])")
_RUST_ARG = re.compile(r"\{\{|\}\}|\{[\w:#?.]*\}")


# ---------------------------------------------------------------- reading the diff
@dataclass(frozen=True)
class Added:
    """The lines one set adds to one file, joined (with the diff line number of each line)."""

    path: str
    text: str
    line_of: tuple[int, ...]  # text offset of each added line's start -> diff line number
    starts: tuple[int, ...]

    def diff_line(self, pos: int) -> int:
        k = 0
        for i, s in enumerate(self.starts):
            if s <= pos:
                k = i
        return self.line_of[k] if self.line_of else 0


def added_code(diff_text: str) -> list[Added]:
    out: list[Added] = []
    path, buf, nums, starts, pos = None, [], [], [], 0

    def flush() -> None:
        if path is not None:
            out.append(Added(path, "".join(buf), tuple(nums), tuple(starts)))

    for n, line in enumerate(diff_text.splitlines(keepends=True), 1):
        if line.startswith("+++ "):
            flush()
            path = re.sub(r"^b/", "", line[4:].strip().split("\t")[0])
            buf, nums, starts, pos = [], [], [], 0
        elif line.startswith("+") and path is not None:
            buf.append(line[1:])
            nums.append(n)
            starts.append(pos)
            pos += len(line) - 1
        elif line.startswith("@@") and path is not None:
            buf.append("\n")  # hunks are not contiguous code
            pos += 1
            nums.append(n)
            starts.append(pos - 1)
    flush()
    return out


def _skip_string(text: str, i: int) -> int:
    q = text[i]
    i += 1
    while i < len(text) and text[i] != q:
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _matching(text: str, i: int) -> int:
    """Index just after the bracket closing the one at ``text[i]``."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[text[i]]]
    i += 1
    while i < len(text) and stack:
        c = text[i]
        if c in "\"'`":
            i = _skip_string(text, i)
            continue
        if c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
        i += 1
    return i


def split_top(text: str, sep: str) -> list[str]:
    """Split at ``sep`` outside brackets and string literals."""
    parts, depth, i, start = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c in "\"'`":
            i = _skip_string(text, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def unquote(lit: str) -> str:
    body = lit[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def is_literal(expr: str) -> bool:
    """One or more adjacent string literals and nothing else."""
    return bool(expr) and re.fullmatch(rf"(?:\s*{_STR}\s*)+", expr) is not None


# ---------------------------------------------------------------- resolving expressions
_FUNC_HEADS = (
    re.compile(r"^func\s+(?:\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)[^{\n]*\{", re.M),
    re.compile(r"^(?!\s)(?:[\w:<>,*&]+\s+)*[*&]?(?:\w+::)*(\w+)\s*\(([^)]*)\)\s*(?:const\s*)?\{", re.M),
)


@dataclass(frozen=True)
class Func:
    name: str
    params: tuple[str, ...]
    start: int
    end: int


def functions(code: str) -> list[Func]:
    out = []
    for rx in _FUNC_HEADS:
        for m in rx.finditer(code):
            brace = code.index("{", m.end() - 1)
            end = _matching(code, brace)
            names = []
            for item in split_top(m.group(2), ","):
                item = re.sub(r"=.*$", "", item).strip()
                if not item:
                    continue
                words = re.findall(r"\w+", item)
                go = rx is _FUNC_HEADS[0]
                names.append(words[0] if go else words[-1])
            out.append(Func(m.group(1), tuple(names), m.start(), end))
    return out


class Resolver:
    """Strings an expression can take, from the code a patch set adds (all its files)."""

    def __init__(self, files: list[Added]) -> None:
        self.code = "\n".join(f.text for f in files)
        self.masked = _STR_RX.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', self.code)
        self.funcs = functions(self.code)
        self.offset: dict[str, int] = {}
        at = 0
        for f in files:
            self.offset[f.path] = at
            at += len(f.text) + 1

    def func_at(self, pos: int) -> Func | None:
        best = None
        for f in self.funcs:
            if f.start <= pos < f.end and (best is None or f.start > best.start):
                best = f
        return best

    def values(self, expr: str, pos: int, depth: int = 0, seen: frozenset = frozenset()) -> set[str]:
        expr = expr.strip()
        if depth > 8 or not expr:
            return set()
        if is_literal(expr):
            return {"".join(unquote(x) for x in _STR_RX.findall(expr))}
        if re.fullmatch(r"-?\d+", expr):
            return {expr}
        parts = split_top(expr, "+")
        if len(parts) > 1 and any(is_literal(p) for p in parts):  # "a" + f(x): concatenation
            return {"".join(unquote(p[0:]) if is_literal(p) else "7" for p in parts)}
        lits = {unquote(x) for x in _STR_RX.findall(expr)}
        if lits:  # a conditional between literals, a call wrapping one, ...
            return lits
        m = re.fullmatch(r"(?:[\w.]+(?:->|\.))?(\w+)\s*\[.*\]", expr, re.S)  # TABLE[index]
        idents = [m.group(1)] if m else re.findall(r"(?:\b\w+(?:->|\.))?\b([A-Za-z_]\w*)\b(\s*\()?", expr)
        out: set[str] = set()
        f = self.func_at(pos)
        for ident in idents:
            name, call = (ident, False) if isinstance(ident, str) else (ident[0], bool(ident[1]))
            key = (name, f.start if f else -1)
            if key in seen or name in ("std", "string", "this", "c", "s", "static_cast", "const", "char"):
                continue
            out |= self._ident(name, call, pos, depth + 1, seen | {key})
        return out

    def _ident(self, name: str, call: bool, pos: int, depth: int, seen: frozenset) -> set[str]:
        out: set[str] = set()
        code = self.code
        if call:  # a helper the patch adds: what it returns
            for f in self.funcs:
                if f.name == name:
                    for r in re.finditer(r"\breturn\s+([^;\n]+)", code[f.start : f.end]):
                        out |= self.values(r.group(1), f.start + r.start(), depth, seen)
            return out
        # definitions and assignments: X = ..., X := ..., X[] = {...}, Go struct field X: ...
        masked = self.masked
        for m in re.finditer(rf"(?<![\w.>])(?:\w+(?:->|\.))?{name}\s*(?:\[\s*\])?\s*(?::=|=(?!=))\s*", masked):
            out |= self.values(code[m.end() : _expr_end(masked, m.end())], m.start(), depth, seen)
        for m in re.finditer(rf"^\s*{name}:\s*([^,\n]+),", masked, re.M):  # (Rust struct literals too)
            out |= self.values(code[m.start(1) : m.end(1)], m.start(), depth, seen)
        # a parameter of the enclosing function: the arguments of its calls
        f = self.func_at(pos)
        if f is not None and name in f.params:
            k = f.params.index(name)
            for c in re.finditer(rf"\b{f.name}\(", masked):
                line_start = code.rfind("\n", 0, c.start()) + 1
                prefix = code[line_start : c.start()]
                if re.search(r"(::|\bfunc\b.*|\b(void|int|bool|auto|char)\s*\**)\s*$", prefix):
                    continue
                args = split_top(code[c.end() : _matching(code, c.end() - 1) - 1], ",")
                if k < len(args):
                    out |= self.values(args[k], c.start(), depth, seen)
        return out


def _expr_end(code: str, i: int) -> int:
    """End of the expression starting at ``i``: a ``;`` or ``,`` at depth 0, or the end of a line that
    does not continue it (Go has no ``;``)."""
    depth = 0
    while i < len(code):
        c = code[i]
        if c in "\"'`":
            i = _skip_string(code, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return i
            depth -= 1
        elif depth == 0 and c in ";,":
            return i
        elif depth == 0 and c == "\n":
            before = code[:i].rstrip()
            after = code[i:].lstrip()
            if not before.endswith(("?", ":", "(", ",", "+", "=", "&&", "||")) and not after.startswith(("?", ":")):
                return i
        i += 1
    return i


# ---------------------------------------------------------------- log statements
@dataclass(frozen=True)
class Statement:
    """One added log statement: literal text and expression slots, in order."""

    where: str
    pos: int
    pieces: tuple[tuple[bool, str], ...]  # (is_literal, text or expression)


def statements(f: Added, base: int = 0) -> list[Statement]:
    """The QUICSM statements in one file's added code; ``pos`` is ``base`` + the offset in that code."""
    out = []
    text = f.text
    for m in re.finditer(r'"QUICSM ', text):
        where = f"{f.path} (diff line {f.diff_line(m.start())})"
        call = _enclosing_printf(text, m.start())
        if call is not None:
            out.append(Statement(where, base + m.start(), _printf_pieces(*call)))
            continue
        start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
        end = m.start()
        while end < len(text) and text[end] != ";":
            end = (
                _skip_string(text, end)
                if text[end] in "\"'"
                else (_matching(text, end) if text[end] in "([{" else end + 1)
            )
        chain = split_top(text[start:end], "<<")
        k = next(i for i, p in enumerate(chain) if p.startswith('"QUICSM '))
        pieces = []
        for p in chain[k:]:
            if p in ("std::endl", "endl", '"\\n"', "'\\n'"):
                continue
            pieces.append((True, "".join(unquote(x) for x in _STR_RX.findall(p))) if is_literal(p) else (False, p))
        out.append(Statement(where, base + m.start(), tuple(pieces)))
    return out


def _enclosing_printf(text: str, lit_pos: int) -> tuple[str, bool] | None:
    """The argument list of ``...Printf(`` / ``...f(`` (or a Rust macro ``eprintln!(``) whose format argument
    starts at ``lit_pos``, and whether it is a Rust macro."""
    m = re.search(r"\b\w*(f|!)\(\s*(?:[\w.]+\s*,\s*)?$", text[:lit_pos])
    if m is None:
        return None
    open_ = text.index("(", m.start())
    return text[open_ + 1 : _matching(text, open_) - 1], m.group(1) == "!"


def _printf_pieces(args_text: str, rust: bool = False) -> tuple[tuple[bool, str], ...]:
    args = split_top(args_text, ",")
    k = next(i for i, a in enumerate(args) if a.startswith('"QUICSM '))
    fmt = "".join(unquote(x) for x in _STR_RX.findall(args[k]))
    rest = [a for a in args[k + 1 :] if a]
    pieces: list[tuple[bool, str]] = []
    last = 0
    for verb in (_RUST_ARG if rust else _GO_VERB).finditer(fmt):
        pieces.append((True, fmt[last : verb.start()]))
        if verb.group(0) in ("%%", "{{", "}}"):
            pieces.append((True, verb.group(0)[0]))
        else:
            if not rest:
                raise AssertionError(f"format {fmt!r} has more verbs than arguments")
            pieces.append((False, rest.pop(0)))
        last = verb.end()
    pieces.append((True, fmt[last:].rstrip("\n")))
    assert not rest, f"format {fmt!r} has fewer verbs than arguments ({rest})"
    return tuple(p for p in pieces if not (p[0] and p[1] == ""))


def render(st: Statement, resolver: Resolver) -> list[str]:
    """Lines the statement can print: a base line, then one variant per alternative of each state-like slot."""
    slots: list[list[str]] = []
    text_so_far = ""
    for is_lit, s in st.pieces:
        if is_lit:
            slots.append([s])
            text_so_far += s
            continue
        km = re.search(r"(?:^|\s)([a-z][a-z0-9_]*)=$", text_so_far)
        key = km.group(1) if km else None
        if key in ENUMERATED:
            vals = sorted(resolver.values(s, st.pos))
            if not vals:
                raise AssertionError(f"{st.where}: cannot tell what `{s}` prints (field {key or 'suffix'})")
        else:
            vals = [NUMBERS.get(key or "", "7")]
        slots.append(vals)
        text_so_far += vals[0]
    lines = {"".join(v[0] for v in slots)}
    for i, vals in enumerate(slots):
        for alt in vals[1:]:
            lines.add("".join(alt if j == i else v[0] for j, v in enumerate(slots)))
    return sorted(lines)


# ---------------------------------------------------------------- tests
def _load(setdir: Path) -> tuple[dict, str]:
    return json.loads((setdir / "manifest.json").read_text()), (setdir / "changes.diff").read_text()


def test_patch_sets_are_shipped() -> None:
    targets = {p.parent.name for p in SET_DIRS}
    assert {"chromium", "quiche"} <= targets
    assert len(SET_DIRS) >= 20


@pytest.mark.parametrize("setdir", SET_DIRS, ids=lambda p: p.name)
def test_manifest_sanity(setdir: Path) -> None:
    m, diff = _load(setdir)
    assert m["name"] == setdir.name and m["target"] == setdir.parent.name
    assert m["algorithm"] in ALLOWED_STATES
    assert m["states"] and all(isinstance(s, str) and s for s in m["states"])
    for f in m["files"]:
        assert re.fullmatch(r"[0-9a-f]{64}", f["sha256"]), f
        assert not f["path"].startswith("/") and ".." not in f["path"].split("/")
    commit = m["upstream"].get("commit")
    assert commit is None or re.fullmatch(r"[0-9a-f]{40}", commit)
    in_diff = [
        re.sub(r"^b/", "", line[4:].split("\t")[0].strip()) for line in diff.splitlines() if line.startswith("+++ ")
    ]
    assert sorted(in_diff) == sorted(f["path"] for f in m["files"])
    assert m["runtime"].strip() and m["validated"].get("how")


@pytest.mark.parametrize("setdir", SET_DIRS, ids=lambda p: p.name)
def test_log_statements_parse_to_canonical_states(setdir: Path) -> None:
    m, diff = _load(setdir)
    files = added_code(diff)
    resolver = Resolver(files)
    sts = [s for f in files for s in statements(f, resolver.offset[f.path])]
    assert sts, f"{setdir.name}: the diff adds no QUICSM log statement"
    algo = m["algorithm"]
    seen: set[str] = set()
    for st in sts:
        lines = render(st, resolver)
        for line in lines:
            try:
                rec = parse_line("[0822/143015.123456:VERBOSE1:x.cc(1)] " + line)
            except ContractError as exc:
                raise AssertionError(f"{st.where}: {line!r}: {exc}") from None
            assert rec is not None, f"{st.where}: {line!r} has no tag"
            payload = line[line.index("QUICSM ") + 7 :]
            tokens = payload.split(" ")
            bad = [t for t in tokens if not _FIELD.match(t)]
            assert not bad, f"{st.where}: {line!r}: malformed fields {bad}"
            keys = [t.split("=", 1)[0] for t in tokens]
            assert len(keys) == len(set(keys)), f"{st.where}: {line!r}: a key appears twice"
            assert rec.cc in ALLOWED_CC[algo], f"{st.where}: {line!r}: cc={rec.cc} in a {algo} set"
            ev = rec.event
            raw = dict(t.split("=", 1) for t in tokens)  # the parser canonicalises; check what is printed
            for name in (raw.get("to"), raw.get("from")):
                if name and name != "-":
                    assert canonical_state(name) == name, f"{st.where}: {line!r}: {name} is not canonical"
                    assert name in ALLOWED_STATES[algo], f"{st.where}: {line!r}: {name} is not a {algo} state"
                    seen.add(name)
            if ev.kind == "transition":
                assert ev.state, f"{st.where}: {line!r}: transition without to="
            if ev.recovery is not None:
                assert ev.recovery in BBR_RECOVERY, f"{st.where}: {line!r}: recovery={ev.recovery}"
    missing = set(m["states"]) - seen
    assert not missing, f"{setdir.name}: manifest states never printed: {sorted(missing)}"
    undeclared = seen - set(m["states"]) - {"ProbeBw"}
    assert not undeclared, f"{setdir.name}: printed but not in the manifest: {sorted(undeclared)}"


def test_the_check_catches_a_malformed_statement() -> None:
    """A space inside a value, or a missing ``key=``, must be caught (the test is not vacuous)."""
    bad_cpp = (
        "+++ b/x.cc\n@@ -1,1 +1,3 @@\n+void F::G(QuicTime now) {\n"
        '+  QUIC_VLOG(1) << "QUICSM v=1 conn=" << this << " t_us=" << 5 << " cc=cubic from=Slow Start"\n'
        '+               << " to=" << "Recovery";\n+}\n'
    )
    files = added_code(bad_cpp)
    (st,) = statements(files[0])
    lines = render(st, Resolver(files))
    assert any(not all(_FIELD.match(t) for t in ln[ln.index("QUICSM ") + 7 :].split(" ")) for ln in lines)
    bad_go = (
        "+++ b/x.go\n@@ -1,1 +1,3 @@\n+func (c *s) l(to string) {\n"
        '+\tlog.Printf("QUICSM v=1 conn=%p t_us=%d cc=cubic to=%s %d", c, 1, to, 2)\n+}\n'
        '+func (c *s) m() {\n+\tc.l("SlowStart")\n+}\n'
    )
    files = added_code(bad_go)
    (st,) = statements(files[0])
    (line,) = render(st, Resolver(files))
    assert "to=SlowStart" in line
    assert not all(_FIELD.match(t) for t in line[line.index("QUICSM ") + 7 :].split(" "))


def test_engine_loads_every_shipped_set() -> None:
    """The patch engine's own loader accepts every set (it validates manifests against the diffs)."""
    from quicsm.instrumentation.patchset import shipped_patch_sets

    names = {ps.name for ps in shipped_patch_sets()}
    assert names == {p.name for p in SET_DIRS}


@pytest.mark.parametrize("setdir", SET_DIRS, ids=lambda p: p.name)
def test_every_patched_file_carries_the_quicsm_mark(setdir: Path) -> None:
    """`quicsm patch status` tells an instrumented file from an upstream one it has no set for by this
    mark (quicsm.instrumentation.engine._MARK): every set must add it to every file it patches."""
    from quicsm.instrumentation.engine import _MARK
    from quicsm.instrumentation.patchset import load_patch_set

    ps = load_patch_set(setdir)
    for fp in ps.file_patches:
        added = "\n".join(line for h in fp.hunks for tag, line in h.lines if tag == "+")
        assert _MARK.search(added.encode()), f"{ps.name}: {fp.path} adds no QUICSM/Quicsm/quicsm_ line"
