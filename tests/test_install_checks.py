"""scripts/checks.sh, which the install scripts use to decide what to install, held against look-alikes:
a tool of the right name that is too old, a different implementation, or a stub that only prints advice."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CHECKS = Path(__file__).resolve().parents[1] / "scripts" / "checks.sh"

LOOK_ALIKES = {
    "go": {
        "debian-12-golang-go": 'echo "go version go1.19.8 linux/amd64"',
        "gccgo": 'echo "go version go1.18 gccgo (Debian 12.2.0-14) 12.2.0 linux/amd64"',
        "broken": 'echo "go: cannot find GOROOT directory: /usr/lib/go" >&2; exit 2',
    },
    "cmake": {
        "too-old": 'echo "cmake version 3.5.1"',
        "pip-shim": 'echo "ModuleNotFoundError: No module named cmake" >&2; exit 1',
    },
    "chromium": {
        "snap-stub": "echo \"Command '/usr/bin/chromium' requires the chromium snap to be installed.\"; exit 1",
        "other-browser": 'echo "Google Chrome 131.0.6778.85"',
        "too-old": 'echo "Chromium 90.0.4430.212 built on Debian 11"',
    },
}
MINIMUM = {"go": "1.26", "cmake": "3.12", "chromium": "120"}


def check(tool: str, bindir: Path | None) -> int:
    """Exit status of ``<tool>_ok MIN`` with ``bindir`` ahead of the system's PATH."""
    path = f"{bindir}:/usr/local/go/bin:/usr/bin:/bin" if bindir else "/usr/local/go/bin:/usr/bin:/bin"
    script = f'source "{CHECKS}"; {tool}_ok {MINIMUM[tool]}'
    return subprocess.run(["bash", "-c", script], env={"PATH": path}, check=False, timeout=120).returncode


@pytest.mark.parametrize(
    ("tool", "kind"), [(tool, kind) for tool, kinds in LOOK_ALIKES.items() for kind in kinds], ids=lambda v: v
)
def test_a_look_alike_is_not_taken_for_the_tool(tmp_path: Path, tool: str, kind: str) -> None:
    fake = tmp_path / tool
    fake.write_text(f"#!/bin/sh\n{LOOK_ALIKES[tool][kind]}\n")
    fake.chmod(0o755)
    assert check(tool, tmp_path) == 1


@pytest.mark.parametrize("tool", sorted(MINIMUM))
def test_the_real_tool_is_taken(tool: str) -> None:
    if shutil.which(tool, path="/usr/local/go/bin:/usr/bin:/bin") is None:
        pytest.skip(f"{tool} is not installed (scripts/install.sh installs it)")
    assert check(tool, None) == 0


def test_versions_compare_part_by_part() -> None:
    pairs = {("1.26.8", "1.26"): 0, ("1.9", "1.26"): 1, ("3.25.1", "3.12"): 0, ("", "1"): 1, ("156.0.1", "120"): 0}
    for (have, want), status in pairs.items():
        script = f'source "{CHECKS}"; version_at_least "{have}" "{want}"'
        assert subprocess.run(["bash", "-c", script], check=False).returncode == status, (have, want)
