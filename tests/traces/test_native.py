"""The C extensions' ABI check (quicsm/traces/native.py): a stale build is set aside with one warning."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from quicsm.inference import checker
from quicsm.traces import native

ROOT = Path(__file__).resolve().parents[2]
INPUTS = [ROOT / "tests/data/quic-go-v0.65/server.sqlog.gz", ROOT / "tests/data/quic-go-v0.65/server.log.gz"]


def test_the_built_extensions_carry_the_numbers_the_python_side_needs() -> None:
    """A C change that bumps one side only fails here, not at a user's import."""
    from quicsm.inference import fastcheck
    from quicsm.traces import _scan

    assert (_scan.ABI, fastcheck.ABI) == (native.SCAN_ABI, checker.FASTCHECK_ABI)
    assert native.load("quicsm.traces._scan", native.SCAN_ABI) is _scan


@pytest.mark.parametrize("stale", [native.SCAN_ABI + 1, None])
def test_a_stale_build_is_set_aside_with_one_warning_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch, stale: int | None
) -> None:
    from quicsm.traces import _scan

    monkeypatch.setattr(native, "_warned", set())
    if stale is None:  # a build from before the ABI numbers
        monkeypatch.delattr(_scan, "ABI")
    else:
        monkeypatch.setattr(_scan, "ABI", stale)
    with pytest.warns(native.StaleExtensionWarning) as got:
        assert native.load("quicsm.traces._scan", native.SCAN_ABI) is None
    (message,) = [str(w.message) for w in got]
    assert "quicsm.traces._scan" in message and "pip install -e ." in message
    assert "python3 setup.py build_ext --inplace" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second importer of the same extension is not warned again
        assert native.load("quicsm.traces._scan", native.SCAN_ABI) is None


def test_an_extension_that_is_not_built_is_silently_absent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native.load("quicsm.traces._no_such_extension", 1) is None


def _infer(tmp: Path, stale: bool) -> tuple[dict[str, Any], str]:
    """``quicsm infer`` of a bundled qlog and log in a fresh process, its _scan and fastcheck made stale or not."""
    out = tmp / f"stale-{stale}.json"
    stub = "import quicsm.traces._scan as s, quicsm.inference.fastcheck as f; s.ABI = f.ABI = -1; " if stale else ""
    code = f"{stub}from quicsm.cli.main import main; main()"
    run = subprocess.run(
        [sys.executable, "-c", code, "infer", *map(str, INPUTS), "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    model = json.loads(out.read_text())
    del model["meta"]["inference_seconds"]  # timing aside
    return model, run.stderr


def test_a_stale_build_reads_and_infers_through_the_twins_with_the_same_model(tmp_path: Path) -> None:
    """The failure this guards: every read raised "not enough values to unpack" from the old .so's tuples."""
    fresh, quiet = _infer(tmp_path, stale=False)
    stale, warned = _infer(tmp_path, stale=True)
    assert fresh["nodes"] and fresh["traces"] == 2 and stale == fresh
    assert "StaleExtensionWarning" not in quiet
    assert warned.count("quicsm.traces._scan has ABI -1") == 1
    assert warned.count("quicsm.inference.fastcheck has ABI -1") == 1
