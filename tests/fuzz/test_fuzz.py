"""The fuzzer in the tests: a fixed time budget over every reader (40 s in CI, 10 s elsewhere); the long run is `python3 -m tests.fuzz.run`.

Readers owned elsewhere that still crash are listed in :data:`OPEN`, with the issue they belong to, so
this test fails on any new crash kind while the known ones are fixed in their own module.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fuzz.run import fuzz
from tests.fuzz.targets import HAVE_C, TARGETS

FOUND = Path(__file__).parent / "found"
"""Inputs the fuzzer found (``found/<target>/<what went wrong>.bin``: not named like a real input, which other tests glob), run again on every test run."""

BUDGET_S = float(os.environ.get("QUICSM_FUZZ_SECONDS", "40" if os.environ.get("CI") == "true" else "10"))
"""40 s in CI; 10 s in the fast lane a developer runs (which must stay under 3 minutes in all)."""

OPEN: dict[str, str] = {}
"""Targets whose crashes are reported but do not fail this test (fixed by the qlog reader's owner)."""


def test_fuzz_every_reader_for_a_fixed_budget() -> None:
    results = fuzz(seconds=BUDGET_S, seed=int(os.environ.get("QUICSM_FUZZ_SEED", "7")))
    print(results.summary())
    assert results.total > 300, "the harness ran too few inputs to mean anything"
    assert set(results.tried) == {t.name for t in TARGETS}, "every target ran"
    assert not results.disagreements, results.summary()
    new = {k: n for k, n in results.crashes.items() if k.split(":")[0] not in OPEN}
    assert not new, results.summary()


def test_agreement_compares_c_with_python() -> None:
    """Without the C scanner the agreement target would compare Python with itself: fail in CI, skip elsewhere."""
    if not HAVE_C:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but the C scanner quicsm.traces._scan is not built")
        pytest.skip("the C scanner is not built (python3 setup.py build_ext --inplace)")
    from tests.fuzz.targets import scan

    line = "QUICSM v=1 conn=a t_us=5 cc=cubic to=SlowStart\u00a0cwnd=5 trigger=-\n".encode()
    c, py = scan(line, use_c=True, chunk=8), scan(line, use_c=False, chunk=1 << 22)
    assert c == py
    (rec,) = [r for _, r in c[0]]  # type: ignore[index]
    assert rec.event.state == "SlowStart\u00a0cwnd=5" and rec.event.trigger is None


@pytest.mark.parametrize("path", sorted(FOUND.glob("*/*")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_inputs_the_fuzzer_found_stay_fixed(path: Path, tmp_path: Path) -> None:
    """qlog-metrics/unknown-state-no-trace: a mutated state name in a file whose metrics gave no trace under
    states=metrics was listed by the oracle and the Python scanner but not by the C scanner's path (its
    per-name counts were read only when a batch held a trace)."""
    (target,) = [t for t in TARGETS if t.name == path.parent.name]
    assert target.run(path.read_bytes(), tmp_path) is None
