"""The verdict of a check for people and CI: text, JSON, JUnit XML, Markdown (HTML in :mod:`.html`).

The JSON form is declared once below (msgspec structs, ``format`` ``quicsm-check``); the other
writers read the same records, so every output says the same thing.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from itertools import groupby
from typing import Literal

import msgspec

from quicsm.check.config import CheckConfig
from quicsm.check.gate import CheckResult, Finding, ScenarioResult, fmt_value, witness_text
from quicsm.compare.report import json_number, json_p
from quicsm.textsafe import md_code, md_name, md_text, terminal, xml
from quicsm.version import __version__

__all__ = [
    "CHECK_FORMAT",
    "CHECK_FORMAT_VERSION",
    "WRITERS",
    "CheckReport",
    "FindingRecord",
    "ScenarioRecord",
    "WitnessRecord",
    "fmt_value",
    "record",
    "witness_text",
    "to_json",
    "to_junit",
    "to_markdown",
    "to_text",
]

CHECK_FORMAT = "quicsm-check"
CHECK_FORMAT_VERSION = 1
SHOWN = 8
"""Lines of passed new/gone items the text output lists."""


class WitnessRecord(msgspec.Struct):
    connection: str
    path: list[str]
    """States from ``start`` on, ending at the new/gone state (or edge destination)."""
    start: int
    length: int


class FindingRecord(msgspec.Struct):
    """One test of one state, edge or the controller name, in one scenario."""

    scenario: str
    kind: Literal["state", "edge", "path", "controller"]
    item: str
    check: Literal["new", "gone", "share", "occupancy", "visits", "probability", "controller"]
    failed: bool
    ignored: bool
    reason: str
    baseline: float | None
    """Mean time share (occupancy), mean entries per connection (visits), probability, or share of
    connections showing it (new/gone)."""
    new: float | None
    difference: float | None
    p_value: float | None
    p_corrected: float | None
    alpha: float | None
    effect_size: float | None
    effect_measure: str
    min_effect: float | None
    min_support: int | None
    support: list[int]
    """Connections showing the state/edge: [baseline, new]."""
    witness: WitnessRecord | None
    note: str | None


class ScenarioRecord(msgspec.Struct):
    name: str
    baseline_connections: int
    new_connections: int
    baseline_origin: str
    new_origin: str
    baseline_controllers: list[str]
    new_controllers: list[str]
    baseline_versions: list[str]
    new_versions: list[str]


class CheckReport(msgspec.Struct):
    format: str
    format_version: int
    tool: str
    verdict: Literal["same", "changed"]
    exit_code: int
    baseline: str
    baseline_tool: str
    config: CheckConfig
    scenarios: list[ScenarioRecord]
    failed: int
    tested: int
    findings: list[FindingRecord]
    warnings: list[str]


def _finding(f: Finding) -> FindingRecord:
    w = f.witness
    return FindingRecord(
        f.scenario,
        f.kind,  # type: ignore[arg-type]
        f.item,
        f.check,  # type: ignore[arg-type]
        f.failed,
        f.ignored,
        f.reason(),
        json_number(f.baseline),
        json_number(f.new),
        json_number(f.difference),
        json_p(f.p_value),
        json_p(f.p_corrected),
        f.alpha,
        json_number(f.effect_size, 4),
        f.effect_measure,
        f.min_effect,
        f.min_support,
        list(f.support),
        WitnessRecord(w.connection, list(w.path), w.start, w.length) if w else None,
        f.note or None,
    )


def _distinct(sr: ScenarioResult, side: str, attr: str) -> list[str]:
    rows = sr.baseline.rows if side == "baseline" else sr.new.rows
    return sorted({str(getattr(r.trace, attr)) for r in rows if getattr(r.trace, attr)})


def record(r: CheckResult) -> CheckReport:
    """The result as its declared record (what ``--format json`` writes)."""
    findings = [_finding(f) for f in r.findings]
    return CheckReport(
        CHECK_FORMAT,
        CHECK_FORMAT_VERSION,
        f"quicsm {__version__}",
        "changed" if r.changed else "same",
        r.exit_code,
        r.baseline.source,
        r.baseline.tool,
        r.config,
        [
            ScenarioRecord(
                s.name,
                len(s.baseline.rows),
                len(s.new.rows),
                s.baseline.origin,
                s.new.origin,
                _distinct(s, "baseline", "cc"),
                _distinct(s, "new", "cc"),
                _distinct(s, "baseline", "version"),
                _distinct(s, "new", "version"),
            )
            for s in r.scenarios
        ],
        sum(f.failed for f in findings),
        sum(f.p_corrected is not None for f in findings),
        findings,
        list(r.warnings),
    )


def to_json(r: CheckResult) -> str:
    return msgspec.json.format(msgspec.json.encode(record(r)), indent=2).decode() + "\n"


def _side(s: ScenarioRecord, side: str, safe: Callable[[str], str]) -> str:
    n = s.baseline_connections if side == "baseline" else s.new_connections
    cc = s.baseline_controllers if side == "baseline" else s.new_controllers
    v = s.baseline_versions if side == "baseline" else s.new_versions
    return f"{n} connection(s) ({safe(' '.join(v)) or 'version ?'}, {safe(', '.join(cc)) or 'cc ?'})"


def _head(rep: CheckReport) -> str:
    word = "CHANGED" if rep.verdict == "changed" else "same"
    return (
        f"quicsm check: {word}: {rep.failed} of {len(rep.findings)} checks failed ({rep.tested} tests in one "
        f"family, {rep.config.correction}, alpha {rep.config.alpha:g}); baseline {terminal(rep.baseline)}"
    )


def to_text(r: CheckResult) -> str:
    """The report for a terminal or a CI log; every name from the inputs is one escaped line, so no
    state name can forge a line of it (:func:`quicsm.textsafe.terminal`)."""
    rep = record(r)
    t = terminal
    out = [_head(rep)]
    for s in rep.scenarios:
        out.append(f"scenario {t(s.name)}: baseline {_side(s, 'baseline', t)}, new {_side(s, 'new', t)}")
    fails = sorted((f for f in rep.findings if f.failed), key=_strength)
    if fails:
        out += ["", "failed:"]
        for f in fails:
            where = f"[{t(f.scenario)}] " if len(rep.scenarios) > 1 else ""
            out.append(f"  {where}{f.kind} {t(f.item)}: {t(f.reason)}")
            if f.witness:
                out.append(f"      witness {t(witness_text(f.witness))}")
    near = [f for f in rep.findings if not f.failed and f.note and "significant but" in f.note]
    if near:
        out += ["", "significant, below the minimum effect (not failed):"]
        out += [f"  {f.kind} {t(f.item)}: {t(f.reason)}" for f in near]
    small = [f for f in rep.findings if f.check in ("new", "gone") and not f.failed]
    if small:
        out += ["", "new/gone but not significant (not failed):"]
        out += [
            f"  {f.kind} {t(f.item)}: {f.check} ({f.support[0]} baseline vs {f.support[1]} new connection(s))"
            for f in small[:SHOWN]
        ]
        if len(small) > SHOWN:
            out.append(f"  ... and {len(small) - SHOWN} more (all in --format json)")
    ignored = sorted({f"{f.kind} {t(f.item)}" for f in rep.findings if f.ignored})
    if ignored:
        out += ["", f"ignored by the config: {', '.join(ignored)}"]
    out += [f"warning: {t(w)}" for w in rep.warnings]
    return "\n".join(out) + "\n"


def _strength(f: FindingRecord) -> tuple[bool, float]:
    """Failed checks, strongest first (smallest corrected p; the controller name and untested last)."""
    return f.p_corrected is None, f.p_corrected or 0.0


def to_markdown(r: CheckResult) -> str:
    """A summary to paste into a pull request: verdict, failed checks with witnesses, the rest folded.
    Names from the inputs are code spans and sentences are escaped (:mod:`quicsm.textsafe`): no HTML,
    link or mention from a log reaches the comment."""
    rep = record(r)

    def code(s: str) -> str:
        return md_name(s, in_table=True)

    mark = ":x:" if rep.verdict == "changed" else ":white_check_mark:"
    out = [f"### {mark} quicsm check: {'controller behaviour changed' if rep.failed else 'same behaviour'}", ""]
    out.append(
        f"{rep.failed} of {len(rep.findings)} checks failed; {rep.tested} tests corrected together "
        f"({rep.config.correction}, alpha {rep.config.alpha:g}). Baseline {md_code(rep.baseline)} "
        f"({md_text(rep.baseline_tool)})."
    )
    out += ["", "| scenario | baseline | new |", "|---|---|---|"]
    out += [f"| {code(s.name)} | {_side(s, 'baseline', md_text)} | {_side(s, 'new', md_text)} |" for s in rep.scenarios]

    def table(rows: list[FindingRecord]) -> list[str]:
        t = [
            "| scenario | state / edge | check | baseline | new | p adj | effect | witness |",
            "|---|---|---|---:|---:|---:|---:|---|",
        ]
        for f in rows:
            eff = "" if f.effect_size is None else f"{f.effect_size:+.2f} {f.effect_measure}"
            p = "" if f.p_corrected is None else f"{f.p_corrected:.2g}"
            wit = md_code(witness_text(f.witness), in_table=True) if f.witness else ""
            if f.check == "controller":
                t.append(f"| {code(f.scenario)} | cc | controller | | | | | {md_text(f.reason)} |")
                continue
            t.append(
                f"| {code(f.scenario)} | {code(f.item)} | {f.check} | {fmt_value(f, f.baseline)} | "
                f"{fmt_value(f, f.new)} | {p} | {eff} | {wit} |"
            )
        return t

    fails = sorted((f for f in rep.findings if f.failed), key=_strength)
    if fails:
        out += ["", "**Failed**", ""] + table(fails)
    rest = [f for f in rep.findings if not f.failed and f.check != "controller"]
    out += ["", f"<details><summary>all {len(rest)} other checks</summary>", ""] + table(rest) + ["", "</details>"]
    if rep.warnings:
        out += [""] + [f"- warning: {md_text(w)}" for w in rep.warnings]
    return "\n".join(out) + "\n"


def _case_name(f: Finding) -> str:
    return f.item if f.kind != "controller" else "congestion controller"


def _counts(el: ET.Element, tests: int, failures: int, skipped: int) -> None:
    for k, v in (("tests", tests), ("failures", failures), ("errors", 0), ("skipped", skipped)):
        el.set(k, str(v))


def to_junit(r: CheckResult) -> str:
    """JUnit XML: a test suite per scenario and kind, one test case per state and per edge (and one for
    the controller name); a case fails when any of its checks failed, and is skipped when ignored."""
    root = ET.Element("testsuites", name="quicsm check")
    total = failures = skipped = 0
    for sr in r.scenarios:
        for kind, group in groupby(sorted(sr.findings, key=lambda f: (f.kind, f.item)), key=lambda f: f.kind):
            items = list(group)
            suite = ET.SubElement(root, "testsuite", name=f"{sr.name}.{kind}s")
            n = nf = ns = 0
            for _item, checks_iter in groupby(items, key=lambda f: f.item):
                checks = list(checks_iter)
                n += 1
                case = ET.SubElement(
                    suite, "testcase", classname=f"quicsm.check.{sr.name}.{kind}", name=_case_name(checks[0])
                )
                failed = [f for f in checks if f.failed]
                if failed:
                    nf += 1
                    fail = ET.SubElement(case, "failure", message=failed[0].reason(), type=failed[0].check)
                    lines = [
                        f"{f.check}: {f.reason()}" + (f"\nwitness {witness_text(f.witness)}" if f.witness else "")
                        for f in failed
                    ]
                    fail.text = "\n".join(lines)
                elif all(f.ignored for f in checks):
                    ns += 1
                    ET.SubElement(case, "skipped", message="ignored by the config")
                out = "\n".join(
                    f"{f.check}: {f.reason()}" + (f" [{f.note}]" if f.note and f.note != f.reason() else "")
                    for f in checks
                )
                ET.SubElement(case, "system-out").text = out
            _counts(suite, n, nf, ns)
            total, failures, skipped = total + n, failures + nf, skipped + ns
    _counts(root, total, failures, skipped)
    ET.indent(root)
    # ElementTree writes ESC, BEL, NUL as they are: not XML 1.0, so no CI could read the report
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + xml(ET.tostring(root, encoding="unicode")) + "\n"


WRITERS: dict[str, Callable[[CheckResult], str]] = {
    "text": to_text,
    "json": to_json,
    "junit": to_junit,
    "markdown": to_markdown,
}
"""``--format`` name -> writer (HTML, which needs Graphviz for its diagram, is :mod:`quicsm.check.html`)."""
