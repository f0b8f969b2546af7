"""Where a patch-set change goes in a file it was not made for: anchors, weights, structure.

A change (a run of added/removed lines inside a hunk) is placed by its *anchors*, the context lines
around it, weighted so that body lines that survive upstream churn (``mode_ = DRAIN;``,
``ExitSlowstart();``) count most and function signatures, comments and lone braces count little
(reference §4.1). Lines are compared whitespace-normalised with a difflib ratio; a few unrelated lines
between anchors cost a little; one new line anchors changes of one old hunk only; the function
structure of the new file (ends and starts of bodies, file scope) fixes places whose nearby lines
changed; the enclosing function breaks ties.
"""

from __future__ import annotations

import difflib
import re

from quicsm.instrumentation.detection import normalize_line
from quicsm.instrumentation.diff import Edit, Hunk
from quicsm.instrumentation.targets import Target

__all__ = [
    "CONTEXT",
    "MAX_GAP",
    "MIN_LINE_SIM",
    "MIN_SCORE",
    "STRUCTURAL_BASE",
    "place_edits",
    "split_edits",
    "weight",
]

MIN_SCORE = 0.55
"""Lowest anchor score accepted for a placement (1.0 = every anchor line found unchanged, in place)."""
MIN_LINE_SIM = 0.6
MAX_GAP = 4
"""Unrelated non-blank lines that may sit between two anchor lines."""
CONTEXT = 3

_TRIVIAL = frozenset({"", "{", "}", "};", "} else {", "else {", "break;", "return;", "default:", ")", ");", "});"})
_SIGNATURE = re.compile(r"^[\w:<>,*&~ ]*\b\w+::~?\w+\s*\(|^func\s")
_STRONG = re.compile(r"^[\w.>\-\[\]]+\s*=\s*[\w:]+;$|^\w+\([^()]*\);$|^(?:[\w.>\-]+(?:->|\.))?\w+\([^()]*\);$|^case\s")


def weight(norm: str) -> float:
    """How much an anchor line says about a place (see the module docstring)."""
    if norm in _TRIVIAL or len(norm) <= 2:
        return 0.1
    if norm.startswith(("//", "/*", "*")):
        return 0.3
    if _SIGNATURE.match(norm):
        return 0.4
    if _STRONG.match(norm):
        return 2.0
    return 1.0


_FUNC_IN_SECTION = re.compile(r"(~?\w+)\s*\(")


def _section_function(section: str) -> str | None:
    m = _FUNC_IN_SECTION.search(section)
    return m.group(1) if m else None


def split_edits(hunks: tuple[Hunk, ...], target: Target) -> list[Edit]:
    """Cut hunks into independent changes, each with the context lines that surround it."""
    edits: list[Edit] = []
    for k, h in enumerate(hunks):
        lines = list(h.lines)
        i = 0
        runs: list[tuple[int, int]] = []
        while i < len(lines):
            if lines[i][0] == " ":
                i += 1
                continue
            j = i
            while j < len(lines) and lines[j][0] != " ":
                j += 1
            runs.append((i, j))
            i = j
        old_side = [t for tag, t in lines if tag != "+"]
        func = _section_function(h.section) if h.section else None
        for r, (a, b) in enumerate(runs):
            lo = runs[r - 1][1] if r else 0
            hi = runs[r + 1][0] if r + 1 < len(runs) else len(lines)
            before = tuple(t for _, t in lines[lo:a])[-CONTEXT:]
            after = tuple(t for _, t in lines[b:hi])[:CONTEXT]
            removed = tuple(t for tag, t in lines[a:b] if tag == "-")
            added = tuple(t for tag, t in lines[a:b] if tag == "+")
            # a function header inside the hunk above the change is better evidence than the section
            n_old_before = sum(1 for tag, _ in lines[:a] if tag != "+")
            f_here = target.function_at(old_side, n_old_before - 1) if n_old_before else None
            tail, next_fn = _tail(after, target)
            closes = bool(removed) and (removed[-1].rstrip().endswith("{}") or removed[-1].rstrip() == "}")
            if closes and next_fn is None:
                below = [x for x in after if x.strip()]
                next_fn = target.header_name(below[0]) if below else None
            edits.append(
                Edit(
                    before,
                    removed,
                    added,
                    after,
                    k,
                    f_here or func,
                    tail,
                    next_fn,
                    _head(before, target),
                    not removed and _file_scope(before, after, target),
                    closes and next_fn is not None,
                )
            )
    return edits


def _tail(after: tuple[str, ...], target: Target) -> tuple[bool, str | None]:
    """Is the change at the end of its function, and which function follows (from the context below)?"""
    idx = next((i for i, x in enumerate(after) if x.strip()), None)
    if idx is None or after[idx].rstrip() != "}":
        return False, None
    for x in after[idx + 1 :]:
        name = target.header_name(x)
        if name:
            return True, name
    return True, None


def _file_scope(before: tuple[str, ...], after: tuple[str, ...], target: Target) -> bool:
    above = [x for x in before if x.strip()]
    below = [x for x in after if x.strip()]
    if above and above[-1].rstrip() in ("}", "};"):
        return True
    return bool(below) and (below[0].startswith("}  //") or target.header_name(below[0]) is not None)


def _head(before: tuple[str, ...], target: Target) -> str | None:
    """The function whose body the change opens, when its header is in the context above."""
    lines = [x for x in before if x.strip()]
    if not lines or not lines[-1].rstrip().endswith("{"):
        return None
    for k in range(len(lines) - 1, -1, -1):
        name = target.header_name(lines[k])
        if name:
            return name
        if k < len(lines) - 1 and lines[k].rstrip().endswith((";", "}", "{")):
            return None
    return None


STRUCTURAL_BASE = {"function": 0.6, "next_function": 0.55}
"""Score floor of a place found by structure (end or start of the same function, or the end of the
function before the one that follows): the body lines there may have changed without moving the spot."""


def _enclosing(spans: list[tuple[str, int, int, int]], i: int) -> str | None:
    """The function whose body holds line ``i`` (None at file scope)."""
    for name, head, _, close in spans:
        if head <= i < close:
            return name
    return None


def _structural(e: Edit, spans: list[tuple[str, int, int, int]]) -> dict[int, float]:
    """Places fixed by the function structure of the new file, with their score floor."""

    def unique(name: str | None) -> tuple[str, int, int, int] | None:
        hits = [sp for sp in spans if sp[0] == name] if name else []
        return hits[0] if len(hits) == 1 else None

    out: dict[int, float] = {}
    if e.removed:
        nxt = unique(e.next_function) if e.closes_function else None
        prev = [sp for sp in spans if nxt and sp[3] < nxt[1]]
        if prev:  # the replaced lines are the last ones of the function before the next definition
            out[max(prev, key=lambda sp: sp[3])[3] - (len(e.removed) - 1)] = STRUCTURAL_BASE["next_function"]
        return out
    if e.tail:
        own = unique(e.function)
        nxt = unique(e.next_function)
        if own:
            out[own[3]] = STRUCTURAL_BASE["function"]
        elif nxt:
            prev = [sp for sp in spans if sp[3] < nxt[1]]
            if prev:
                out[max(prev, key=lambda sp: sp[3])[3]] = STRUCTURAL_BASE["next_function"]
    if e.head_of:
        own = unique(e.head_of)
        if own:
            out[own[2]] = STRUCTURAL_BASE["function"]
    return out


class _Matcher:
    """Cached fuzzy line similarity against one new file."""

    def __init__(self, new_lines: list[str]) -> None:
        self.raw = new_lines
        self.norm = [normalize_line(x) for x in new_lines]
        self.index: dict[str, list[int]] = {}
        for i, n in enumerate(self.norm):
            self.index.setdefault(n, []).append(i)
        self._cache: dict[tuple[str, int], float] = {}
        self._matchers: dict[str, difflib.SequenceMatcher[str]] = {}
        self._hits: dict[str, list[int]] = {}

    def sim(self, anchor: str, i: int, floor: float = MIN_LINE_SIM) -> float:
        """difflib ratio of two normalised lines, 0.0 when it is surely below ``floor``."""
        other = self.norm[i]
        if anchor == other:
            return 1.0
        la, lo = len(anchor), len(other)
        if not la or not lo or 2 * min(la, lo) / (la + lo) < floor:
            return 0.0
        key = (anchor, i)
        got = self._cache.get(key)
        if got is None:
            sm = self._matchers.get(anchor)
            if sm is None:  # the anchor is seq2: difflib indexes seq2 once and reuses it
                sm = self._matchers[anchor] = difflib.SequenceMatcher(None, "", anchor, autojunk=False)
            sm.set_seq1(other)
            got = sm.ratio() if sm.quick_ratio() >= MIN_LINE_SIM else 0.0
            self._cache[key] = got
        return got

    def hits(self, anchor: str) -> list[int]:
        """Lines similar enough to ``anchor`` (exact ones via the index, others by ratio)."""
        got = self._hits.get(anchor)
        if got is None:
            exact = self.index.get(anchor, [])
            fuzzy = [i for i, n in enumerate(self.norm) if n != anchor and n and self.sim(anchor, i, 0.75) >= 0.75]
            got = self._hits[anchor] = exact + fuzzy
        return got

    def side(
        self, anchors: list[str], start: int, step: int, blocked: set[int]
    ) -> tuple[list[tuple[str, float, float]], int, list[int]]:
        """Match ``anchors`` (nearest first) walking from ``start`` by ``step``, skipping a few foreign lines.

        Lines in ``blocked`` (anchors of other hunks' changes) are foreign: one old line maps to one new
        line. Returns per anchor (anchor, weight, credit), the gap before the nearest anchor, and the
        lines matched.
        """
        n = len(self.norm)
        j = start
        out: list[tuple[str, float, float]] = []
        used: list[int] = []
        first_gap = MAX_GAP + 1
        for d, a in enumerate(anchors):
            if not a:
                continue
            w = weight(a) / (1 + 0.35 * d)
            best, best_k, skipped, k, gap_at_best = 0.0, -1, 0, j, 0
            while 0 <= k < n and skipped <= MAX_GAP:
                if not self.norm[k]:
                    k += step
                    continue
                s = self.sim(a, k) if k not in blocked else 0.0
                if s > best:
                    best, best_k, gap_at_best = s, k, skipped
                    if s == 1.0:
                        break
                k += step
                skipped += 1
            credit = 0.0
            if best >= MIN_LINE_SIM:
                credit = best * (0.96**gap_at_best)
                if d == 0:
                    first_gap = gap_at_best
                j = best_k + step
                used.append(best_k)
            out.append((a, w, credit))
        return out, first_gap, used


def place_edits(
    edits: list[Edit], new_lines: list[str], target: Target
) -> tuple[list[tuple[Edit, int, float, str | None]], list[tuple[int, str]]]:
    """Find where each edit goes in ``new_lines`` (in order). Returns placements and (hunk, reason) failures."""
    m = _Matcher(new_lines)
    seen: dict[str, int] = {}
    for e in edits:
        for a in {normalize_line(x) for x in (*e.before, *e.removed, *e.after)}:
            seen[a] = seen.get(a, 0) + 1
    generic = {a for a, k in seen.items() if k > 1}
    used_by_hunk: dict[int, list[int]] = {}
    spans = target.functions(new_lines)
    placed: list[tuple[Edit, int, float, str | None]] = []
    failures: list[tuple[int, str]] = []
    floor = 0
    for e in edits:
        before = [normalize_line(x) for x in reversed(e.before)]
        removed = [normalize_line(x) for x in e.removed]
        after = [normalize_line(x) for x in e.after]
        if not any(before) and not any(removed) and not any(after):
            failures.append((e.hunk, "change has no context lines to anchor it"))
            continue
        cands: set[int] = set()
        seeds = [(a, d + 1, "b") for d, a in enumerate(before) if weight(a) >= 1.0][:3]
        seeds += [(a, -d, "r") for d, a in enumerate(removed) if a]
        seeds += [(a, -(len(removed) + d), "a") for d, a in enumerate(after) if weight(a) >= 1.0][:3]
        if not seeds:  # only weak anchors: use them all
            seeds = [(a, d + 1, "b") for d, a in enumerate(before) if a]
            seeds += [(a, -(len(removed) + d), "a") for d, a in enumerate(after) if a]
        for a, off, _ in seeds:
            for i in m.hits(a):
                for delta in range(-MAX_GAP - 1, MAX_GAP + 2):
                    p = i + off + delta
                    if floor <= p <= len(new_lines) - len(removed):
                        cands.add(p)
        struct = {p: b for p, b in _structural(e, spans).items() if p >= floor}
        cands.update(struct)
        scored: list[tuple[float, int, str | None, list[int]]] = []
        lookalikes: list[int] = []
        blocked = {i for h, idx in used_by_hunk.items() if h != e.hunk for i in idx}
        for p in sorted(cands):
            parts: list[tuple[str, float, float]] = []
            ok = True
            for r, a in enumerate(removed):
                s = m.sim(a, p + r) if a else (1.0 if not m.norm[p + r] else 0.0)
                if s < 0.7 and p not in struct:
                    ok = False
                    break
                parts.append((a, 3.0 * max(weight(a), 1.0), s))
            if not ok:
                continue
            if any(p + r in blocked for r in range(len(removed))):
                continue
            pb, gap_b, ub = m.side(before, p - 1, -1, blocked)
            pa, gap_a, ua = m.side(after, p + len(removed), +1, blocked)
            parts += pb + pa
            total = sum(w for _, w, _ in parts)
            if total <= 0:
                continue
            score = sum(w * c for _, w, c in parts) / total
            # anchors shared with other changes of this file (or repeated in it) cannot tell places apart:
            # what is left must match too, or a change whose home is gone lands beside a look-alike
            own = [
                (w, c) for a, w, c in parts if a not in generic and len(m.index.get(a, ())) <= 1 and weight(a) >= 1.0
            ]
            if e.tail:
                # the change ended a function: the place must be just above a column-0 ``}``
                k = p + len(removed)
                while k < len(new_lines) and not new_lines[k].strip():
                    k += 1
                if k >= len(new_lines) or new_lines[k].rstrip() != "}":
                    score -= 0.15
            if e.file_scope and any(head < p <= close for _, head, _, close in spans):
                score -= 0.2  # a definition between functions must not land inside one
            if p in struct:
                score = max(score, struct[p] + (1 - struct[p]) * score)
            elif own and sum(w * c for w, c in own) / sum(w for w, _ in own) < 0.5 and not removed:
                if score >= MIN_SCORE:
                    lookalikes.append(p)
                continue
            # attach to the side that is adjacent (prefer the line above: logs follow the state change)
            score += 1e-3 * (gap_b == 0) + 0.5e-3 * (gap_a == 0)
            func = _enclosing(spans, p - 1)
            if e.function:
                score += 0.03 if func == e.function else -0.1
            scored.append((score, p, func, ub + ua + list(range(p, p + len(removed)))))
        if not scored:
            what = max((*e.removed, *e.before, *e.after, ""), key=lambda x: weight(normalize_line(x))).strip()
            if lookalikes:
                failures.append(
                    (
                        e.hunk,
                        (
                            f"only anchors shared with other changes match (near line "
                            f"{lookalikes[0] + 1}); the lines that set this change apart are gone"
                        ),
                    )
                )
            elif any(i in blocked for a, _, _ in seeds for i in m.hits(a)):
                failures.append(
                    (
                        e.hunk,
                        (
                            f"`{what}` is found only where another change is anchored; the code "
                            f"this change was in seems gone"
                        ),
                    )
                )
            else:
                failures.append((e.hunk, f"no line like `{what}` found after line {floor}"))
            continue
        scored.sort(key=lambda x: (-x[0], x[1]))
        best, p, func, anchored = scored[0]
        if best < MIN_SCORE:
            anchor = (e.removed or e.before[-1:] or e.after[:1])[0].strip()
            failures.append(
                (
                    e.hunk,
                    (
                        f"anchors not found: best place is line {p + 1}"
                        f"{f' in {func}' if func else ''} with score {best:.2f} < {MIN_SCORE} "
                        f"(nearest anchor `{anchor}`)"
                    ),
                )
            )
            continue
        rivals = [s for s in scored[1:] if abs(s[1] - p) > MAX_GAP + len(removed) + 1 and s[0] >= best - 0.005]
        if rivals:
            failures.append(
                (
                    e.hunk,
                    (
                        f"ambiguous: lines {p + 1} and {rivals[0][1] + 1} fit equally well "
                        f"(score {best:.2f}); add context to the patch set"
                    ),
                )
            )
            continue
        placed.append((e, p, min(best, 1.0), func))
        used_by_hunk.setdefault(e.hunk, []).extend(anchored)
        floor = p + len(removed)
    return placed, failures
