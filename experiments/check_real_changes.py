"""quicsm check on real changes (and on no change): one row per case, as `quicsm check` decides it.

Each case saves its baseline runs as a bundle (quicsm.check.bundle) and checks the new runs against
it with the default config, and again with ``controller = "warn"`` (what the behaviour alone says
when the congestion controller's name differs). The traces are bundled in traces/fig10 and
traces/check (see traces/README.md).

    python experiments/check_real_changes.py [--out experiments/check_real_changes.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from quicsm.check import CheckConfig, check, load_baseline, save_baseline
from quicsm.check.gate import witness_text
from quicsm.check.inputs import baseline_from_inputs, read_rows

ROOT = Path(__file__).resolve().parents[1]

CASES: list[tuple[str, str, str, str]] = [
    # (case, baseline runs, new runs, what is expected)
    (
        "Fig. 10: quic-go v0.52.0 -> v0.65.0, +-10 ms jitter",
        "traces/fig10/v0.52.0/jitter",
        "traces/fig10/v0.65.0/jitter",
        "fail, naming Recovery",
    ),
    (
        "quic-go v0.52.0 -> v0.65.0, no jitter",
        "traces/fig10/v0.52.0/nojitter",
        "traces/fig10/v0.65.0/nojitter",
        "whatever the data say",
    ),
    (
        "quic-go v0.33.0 -> v0.52.0, +-10 ms jitter (both fixed threshold)",
        "traces/fig10/v0.33.0/jitter",
        "traces/fig10/v0.52.0/jitter",
        "whatever the data say",
    ),
    ("quic-go v0.65.0 reno -> cubic (batch a)", "traces/check/reno-a", "traces/check/cubic-a", "fail"),
    ("quic-go v0.65.0 reno -> cubic (batch b)", "traces/check/reno-b", "traces/check/cubic-b", "fail"),
    ("quic-go v0.65.0 reno -> cubic, 1 % loss", "traces/check/reno-loss", "traces/check/cubic-loss", "fail"),
    (
        "quiche cubic 0.24.0 -> 0.30.0",
        "traces/check/quiche-cubic-0.24.0",
        "traces/check/quiche-cubic-0.30.0",
        "whatever the data say",
    ),
    ("injected extra Recovery entry (vs batch a)", "traces/check/reno-a", "traces/check/inject-a", "fail"),
    ("injected extra Recovery entry (vs batch b)", "traces/check/reno-b", "traces/check/inject-a", "fail"),
    ("no change: reno batch a -> batch b", "traces/check/reno-a", "traces/check/reno-b", "pass"),
    ("no change: cubic batch a -> batch b", "traces/check/cubic-a", "traces/check/cubic-b", "pass"),
]


BY_SCENARIO = {"traces/check/quiche-cubic-0.24.0"}
"""Baselines of several scenarios, saved with --by scenario (each scenario checked against its own)."""


def run_case(base_dir: str, new_dir: str, tmp: Path) -> dict:
    bundle = tmp / "base.qsb"
    by = "scenario" if base_dir in BY_SCENARIO else None
    b, _ = baseline_from_inputs([str(ROOT / base_dir)], name=Path(base_dir).name, by=by)
    size = save_baseline(b, str(bundle))
    base = load_baseline(str(bundle))
    rows, _ = read_rows([str(ROOT / new_dir)], base.view)
    out = {"bundle_bytes": size, "n": [base.connections, len(rows)]}
    for label, cfg in (("default", CheckConfig()), ("behaviour", CheckConfig(controller="warn"))):
        res = check(base, rows, cfg, models=False)
        fails = sorted(res.failures, key=lambda f: (f.p_corrected is None, f.p_corrected or 0.0))
        out[label] = {
            "exit": res.exit_code,
            "failed": [
                (f"[{f.scenario}] " if len(base.sets) > 1 else "") + f"{f.kind} {f.item} ({f.check})" for f in fails
            ],
            "reasons": [
                f"{f.kind} {f.item}: {f.reason()}" + (f" [witness {witness_text(f.witness)}]" if f.witness else "")
                for f in fails
            ],
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as d:
        for case, base_dir, new_dir, expected in CASES:
            if not (ROOT / base_dir).is_dir() or not (ROOT / new_dir).is_dir():
                print(f"{case}: traces missing ({base_dir} or {new_dir}), skipped", file=sys.stderr)
                continue
            r = {
                "case": case,
                "baseline": base_dir,
                "new": new_dir,
                "expected": expected,
                **run_case(base_dir, new_dir, Path(d)),
            }
            results.append(r)
            print(
                f"{case}: exit {r['default']['exit']} (behaviour only: exit {r['behaviour']['exit']}); "
                f"{'; '.join(r['default']['failed'][:6]) or 'nothing failed'}",
                flush=True,
            )
    print()
    print(
        "| case | runs (baseline/new) | expected | exit | exit, controller name only warns | failed checks (strongest first) |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        failed = r["default"]["failed"]
        shown = ", ".join(failed[:5]) + (f", ... ({len(failed)} in all)" if len(failed) > 5 else "")
        print(
            f"| {r['case']} | {r['n'][0]}/{r['n'][1]} | {r['expected']} | {r['default']['exit']} | {r['behaviour']['exit']} | {shown or '-'} |"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
