"""The C extensions' tests once more, built with AddressSanitizer and UndefinedBehaviorSanitizer (tests/sanitize.py).

About 4-6 minutes on one core with CI's 40 s fuzz budget (1,344 tests: 5 min 40 s at load 3-4, 4 min 7 s at load 1-2): slow, so the fast lane
leaves it out; CI runs it. It never skips: a compiler without the sanitizer runtime fails it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_c_extensions_tests_pass_under_address_and_undefined_behaviour_sanitizers(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tests.sanitize", "--keep", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    tail = (run.stdout[-3000:] + "\n" + run.stderr[-6000:]).strip()
    assert run.returncode == 0, f"exit {run.returncode} (a negative one: the sanitizer stopped the run)\n{tail}"
    assert re.search(r"\d+ passed", run.stdout[-300:]), tail  # pytest ran tests and said so
