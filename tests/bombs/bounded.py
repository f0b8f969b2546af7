"""Run a quicsm command as a user would, under a memory limit and a time limit, and measure it.

The memory limit is a cgroup v1 memory controller (``/sys/fs/cgroup/memory``, limits on memory and on
memory+swap, so swapping is no way out): past it the kernel's OOM killer ends the process, which the
tests see as SIGKILL. Needs root (CI runs as root; elsewhere the tests skip, saying so). Peak memory is
the largest resident set of quicsm's processes (``ru_maxrss``), not the cgroup's charge, which counts
page cache.

Not a conftest.py: tests elsewhere import the root conftest by name, and a second one would shadow it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CGROUP = Path("/sys/fs/cgroup/memory")

needs_cgroup = pytest.mark.skipif(
    os.geteuid() != 0 or not (CGROUP / "memory.limit_in_bytes").exists(),
    reason="needs root and the cgroup v1 memory controller (/sys/fs/cgroup/memory) to bound memory",
)


_PEAK = "\nbounded: peak KiB "
_MEASURED = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.call([sys.executable, '-m', 'quicsm', *sys.argv[1:]])\n"
    f"sys.stderr.write({_PEAK!r} + str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(rc if rc >= 0 else 128 - rc)\n"
)
"""``python -m quicsm ARGS`` in a child whose peak resident set (``ru_maxrss``, its largest process) is
reported on the last line of stderr; the wrapper itself stays small and in the same cgroup."""


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float
    """Largest resident set of the command (and any child it waited for), MiB."""

    @property
    def killed(self) -> bool:
        """Ended by SIGKILL: the memory limit's OOM killer (or the time limit)."""
        return self.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL)


def run_bounded(
    args: list[str], *, memory_mb: int, seconds: float, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Outcome:
    """``python -m quicsm ARGS`` (this tree's) under ``memory_mb`` MiB and ``seconds`` of wall time;
    a run past the time limit is killed and fails the test."""
    group = CGROUP / f"quicsm-hardening-bomb-{os.getpid()}-{time.monotonic_ns()}"
    group.mkdir()
    try:
        limit = str(memory_mb << 20)
        (group / "memory.limit_in_bytes").write_text(limit)
        if (group / "memory.memsw.limit_in_bytes").exists():
            (group / "memory.memsw.limit_in_bytes").write_text(limit)
        procs = str(group / "cgroup.procs")

        def enter() -> None:  # in the child, before exec: it and all it starts are bounded
            with open(procs, "w") as fh:
                fh.write(str(os.getpid()))

        full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", _MEASURED, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=full_env,
            preexec_fn=enter,
        )
        try:
            out, err = proc.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"quicsm {' '.join(args)[:200]} still running after {seconds:g} s")
        elapsed = time.monotonic() - started
        text = err.decode(errors="replace")
        head, _, peak_kib = text.rpartition(_PEAK)
        peak = int(peak_kib) / 1024 if peak_kib.strip().isdigit() else float("nan")
        text = head if peak_kib.strip().isdigit() else text
        print(f"bomb: quicsm {' '.join(args)[:120]}: exit {proc.returncode}, {elapsed:.1f} s, peak {peak:.0f} MiB")
        return Outcome(proc.returncode, out.decode(errors="replace"), text, elapsed, peak)
    finally:
        for _ in range(50):  # the group can be removed once its last process is gone
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def one_line_error(o: Outcome) -> str:
    """The run failed as bad input should: exit 1 or 2, one ``Error:`` line, no traceback."""
    assert not o.killed, f"killed (memory limit?) after {o.seconds:.1f} s: {o.stderr[-500:]}"
    assert o.returncode in (1, 2), (o.returncode, o.stderr[-2000:])
    assert "Traceback" not in o.stderr, o.stderr[-2000:]
    errors = [line for line in o.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, o.stderr[-2000:]
    return errors[0]
