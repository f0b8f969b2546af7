"""Privilege and tool checks, and running system commands with errors that say what failed."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

from quicsm.errors import TestbedError

__all__ = ["require_root", "require_tool", "sh", "sh_ok"]


def require_root(what: str = "the testbed") -> None:
    """Namespaces, tc and cgroups need root; say so plainly instead of failing halfway."""
    if os.geteuid() != 0:
        raise TestbedError(f"{what} needs root (network namespaces, tc qdiscs, cgroups): run it with sudo")


def require_tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise TestbedError(f"{name!r} not found: install the Debian package {package!r}")
    return path


def sh(argv: Sequence[str], *, timeout: float = 30.0) -> str:
    """Run a command, return stdout; TestbedError with the command and its stderr on failure."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise TestbedError(f"{argv[0]}: not found ({exc})") from None
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{' '.join(argv)}: timed out after {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise TestbedError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def sh_ok(argv: Sequence[str], *, timeout: float = 30.0) -> bool:
    """Run a cleanup command whose failure is fine (already gone); True if it succeeded."""
    try:
        return subprocess.run(list(argv), capture_output=True, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
