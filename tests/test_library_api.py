"""The library API: what ``quicsm`` exports, and the examples in its docstrings, run as doctests."""

from __future__ import annotations

import doctest
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import quicsm

ROOT = Path(__file__).resolve().parents[1]
DOCTESTED = (
    "quicsm",
    "quicsm.traces.parse",
    "quicsm.traces.summary",
    "quicsm.pipeline",
    "quicsm.compare.sets",
    "quicsm.compare.comparison",
)


@pytest.mark.parametrize("module", DOCTESTED)
def test_docstring_examples_run(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the examples read the bundled traces
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS, raise_on_error=False)
    assert result.failed == 0
    assert result.attempted > 0, f"{module} has no example"


def test_every_export_resolves_and_import_stays_light() -> None:
    for name in quicsm.__all__:
        assert getattr(quicsm, name) is not None
    probe = "import sys, quicsm; print(sorted(m for m in ('numpy', 'pyarrow', 'scipy') if m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


def test_package_is_typed() -> None:
    assert (ROOT / "quicsm" / "py.typed").exists()


def test_all_names_every_export() -> None:
    assert set(quicsm.__all__) == {"__version__", *quicsm._EXPORTS}
