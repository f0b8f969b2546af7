"""The CI skip guard in conftest.py: under CI=true a skip fails unless its reason is allowlisted."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text(encoding="utf-8")

SKIPPING = """
import pytest

def test_needs_root():
    pytest.skip("needs root for namespaces")

@pytest.mark.skipif(True, reason="needs Go")
def test_needs_go():
    pass

def test_allowed():
    pytest.skip("needs java and $QUICSM_SYNOPTIC_JAR")

def test_runs():
    assert True
"""


@pytest.mark.parametrize("ci", ["true", ""])
def test_skips_fail_only_in_ci(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_skipping=SKIPPING)
    result = pytester.runpytest("-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    if ci:
        assert outcomes.get("passed") == 1 and outcomes.get("skipped") == 1
        assert outcomes.get("failed", 0) + outcomes.get("errors", 0) == 2
        result.stdout.fnmatch_lines(["*skipped under CI=true: needs root for namespaces*"])
    else:
        assert outcomes.get("passed") == 1 and outcomes.get("skipped") == 3
