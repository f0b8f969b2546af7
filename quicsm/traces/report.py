"""What a parse saw: counts, and the problems it skipped with file, line and reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from quicsm.errors import ParseError
from quicsm.textsafe import terminal

__all__ = ["Issue", "ParseReport"]


@dataclass(frozen=True, slots=True)
class Issue:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return terminal(f"{self.path}:{self.line}: {self.reason}")


@dataclass(slots=True)
class ParseReport:
    """Totals always; the first ``keep`` issues in full. ``strict`` turns the first issue into an error."""

    strict: bool = False
    keep: int = 10
    files: int = 0
    bytes: int = 0
    lines: int = 0
    records: int = 0
    traces: int = 0
    issues: list[Issue] = field(default_factory=list)
    issue_counts: Counter[str] = field(default_factory=Counter)
    skipped_files: list[str] = field(default_factory=list)
    """Inputs that gave nothing (not a format quicsm reads, or unreadable): a problem, not a silence (said
    once, among the problems: ``PATH:1: file skipped: why``)."""
    unknown_states: Counter[str] = field(default_factory=Counter)
    """State names no map knows, kept verbatim in the traces."""

    def problem(self, path: str, line: int, reason: str, kind: str | None = None) -> None:
        """Record a skipped record; ``kind`` groups totals (defaults to the reason's first words)."""
        if self.strict:
            raise ParseError(path, line, reason)
        self.issue_counts[kind or reason.split(" (")[0]] += 1
        if len(self.issues) < self.keep:
            self.issues.append(Issue(path, line, reason))

    def skipped_file(self, path: str, reason: str) -> None:
        """An input that yielded nothing; counted, and an error under ``strict``."""
        self.skipped_files.append(path)
        self.problem(path, 1, f"file skipped: {reason}", "skipped file")

    def unknown_state(self, name: str) -> None:
        self.unknown_states[name[:100]] += 1

    @property
    def total_issues(self) -> int:
        return sum(self.issue_counts.values())

    def summary(self) -> str:
        """For people, on stderr: file and state names from the inputs are shown escaped (:mod:`quicsm.textsafe`)."""
        mb = self.bytes / 1e6
        lines = [
            f"read {self.files} file(s), {mb:.1f} MB, {self.lines} lines: "
            f"{self.records} records in {self.traces} connection trace(s)"
        ]
        if self.unknown_states:
            names = ", ".join(f"{terminal(n)} ({c})" for n, c in self.unknown_states.most_common(self.keep))
            lines.append(f"unknown state names kept as written: {names}")
        if self.total_issues:
            lines.append(f"skipped {self.total_issues} problem record(s):")
            lines.extend(f"  {n:>8}  {kind}" for kind, n in self.issue_counts.most_common())
            lines.append(f"first {len(self.issues)}:")
            lines.extend(f"  {i}" for i in self.issues)
        return "\n".join(lines)

    def merge(self, other: ParseReport) -> None:
        """Add ``other``'s totals and first issues (a later input's) to this report."""
        self.files += other.files
        self.bytes += other.bytes
        self.lines += other.lines
        self.records += other.records
        self.traces += other.traces
        self.issue_counts.update(other.issue_counts)
        self.skipped_files.extend(other.skipped_files)
        self.unknown_states.update(other.unknown_states)
        room = self.keep - len(self.issues)
        if room > 0:
            self.issues.extend(other.issues[:room])

    def to_json(self) -> dict[str, object]:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "lines": self.lines,
            "records": self.records,
            "traces": self.traces,
            "issues_total": self.total_issues,
            "issue_counts": dict(self.issue_counts),
            "skipped_files": list(self.skipped_files),
            "unknown_states": dict(self.unknown_states),
            "issues": [{"path": i.path, "line": i.line, "reason": i.reason} for i in self.issues],
        }
