"""meta.json written through its declaration: what the testbed's runner writes (sorted keys, two-space
indent) is what :func:`quicsm.traces.runmeta.dump_meta` gives for the decoded :class:`RunMeta`, byte for
byte (but an integral float's spelling) on every bundled page-load run of the current runner's layout;
blocks a run has not stay out."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from quicsm.traces.runmeta import EmulatorMeta, ResultMeta, RunMeta, dump_meta, read_meta

ROOT = Path(__file__).resolve().parents[2]
EMULATOR = {"ok", "late_p99_us", "late_limit_us", "namespaces", "relay", "tbf", "rate_log"}


def _current_runs() -> list[Path]:
    out = []
    for m in sorted((ROOT / "traces").rglob("meta.json")):
        d = json.loads(m.read_bytes())
        if set(d.get("emulator") or ()) == EMULATOR and "run_index" in d:
            out.append(m)
    return out


def test_bundled_runs_round_trip_byte_for_byte() -> None:
    runs = _current_runs()
    assert len(runs) >= 50, len(runs)
    exact = 0
    for m in runs:
        text, raw = dump_meta(read_meta(str(m), RunMeta)), m.read_text()
        assert json.loads(text) == json.loads(raw), m  # every field kept, none added (a decoded 1950 is 1950.0)
        exact += text == raw
    assert exact >= len(runs) * 0.9, (exact, len(runs))


def test_blocks_a_run_has_not_are_left_out_not_null() -> None:
    meta = RunMeta(
        implementation="quic-go",
        version="v0.65.0",
        cc="reno",
        labels={"run": "a-00"},
        params={"out": Path("/x"), "labels": (("k", "v"),)},
        result=ResultMeta(ok=True, plt_ms=12.5, client={"ok": True}),
        emulator=EmulatorMeta(ok=True, late_p99_us=3, late_limit_us=2000, rate_log=[(0.0, 1e6)]),
        run_index=0,
    )
    d = json.loads(dump_meta(meta))
    assert "grid" not in d and "flow" not in d and "build" not in d and "mode" not in d["emulator"]
    assert d["params"] == {"out": "/x", "labels": [["k", "v"]]} and d["result"]["error"] is None
    assert d["emulator"]["rate_log"] == [[0.0, 1e6]] and d["run_index"] == 0
    assert msgspec.json.decode(dump_meta(meta), type=RunMeta).result == meta.result
