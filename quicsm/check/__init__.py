"""``quicsm check``: a congestion-control regression gate for CI when a QUIC stack is bumped.

``make_baseline``/``save_baseline`` keep a small bundle of a known-good version's connections;
``check(load_baseline(path), new_rows, load_config(toml))`` decides whether new runs behave the
same (see docs/check.md); :mod:`quicsm.check.report` writes the verdict for people and CI.
"""

from quicsm.check.bundle import Baseline, BaselineSet, load_baseline, make_baseline, read_baseline, save_baseline
from quicsm.check.config import CheckConfig, Tolerance, load_config, parse_config
from quicsm.check.gate import CheckResult, Finding, Witness, check

__all__ = [
    "Baseline",
    "BaselineSet",
    "CheckConfig",
    "CheckResult",
    "Finding",
    "Tolerance",
    "Witness",
    "check",
    "load_baseline",
    "load_config",
    "make_baseline",
    "parse_config",
    "read_baseline",
    "save_baseline",
]
