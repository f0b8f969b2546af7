"""Scenario files: a TOML list of runs sharing defaults, read with the standard library's tomllib.

::

    out = "runs/fig13"            # optional; the CLI's --out wins
    [defaults]
    rate = 50                     # Mbit/s (or "50mbit")
    rtt = 36                      # ms, added round trip
    queue = "1bdp"
    size = "10MB"
    runs = 10
    quic_go_version = "v0.65.0"   # any version the Go module proxy serves
    # set = "my-sets/quic-go-v0.64.1-reno-port"   # a patch set of your own (name or directory);
    #                             # `testbed matrix --set` gives one to every scenario that names none

    [[scenario]]
    name = "desktop"

    [[scenario]]
    name = "mobile"
    cpu_quota = "10%"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from quicsm.errors import TestbedError
from quicsm.testbed import netns
from quicsm.testbed.runner import RunConfig, parse_duration, parse_late_limit, parse_loss, parse_quota, parse_size

__all__ = ["Scenario", "Matrix", "load_matrix", "config_from_mapping", "with_set", "KEY_ALIASES"]

KEY_ALIASES = {
    "rate": "rate_mbps",
    "rtt": "rtt_ms",
    "delay": "rtt_ms",
    "jitter": "jitter_ms",
    "version": "quic_go_version",
    "quiche": "quiche_version",
    "timeout": "timeout_s",
    "duration": "duration_s",
    "set": "patch_set",
    "late_limit": "late_limit_ms",
}
_FIELDS = {f.name for f in fields(RunConfig)}


@dataclass(frozen=True, slots=True)
class Scenario:
    config: RunConfig
    runs: int


@dataclass(frozen=True, slots=True)
class Matrix:
    path: Path
    scenarios: tuple[Scenario, ...]
    out: Path | None


def config_from_mapping(d: dict[str, Any], *, where: str) -> tuple[RunConfig, int]:
    """Turn one scenario's keys (with aliases and unit strings) into a RunConfig and a run count; errors start
    with ``where`` (a scenario of a file; none for ``testbed run``'s options)."""
    where = f"{where}: " if where else ""
    kw: dict[str, Any] = {}
    runs = 1
    for key, val in d.items():
        name = KEY_ALIASES.get(key, key)
        try:
            if name == "runs":
                runs = int(val)
                if runs < 1:
                    raise ValueError("must be at least 1")
                continue
            if name not in _FIELDS:
                raise ValueError(
                    f"unknown key {key!r} (known: {', '.join(sorted(_FIELDS | set(KEY_ALIASES) | {'runs'}))})"
                )
            if name == "rate_mbps":
                val = netns.parse_rate(val) / 1e6
            elif name == "size":
                val = parse_size(val)
            elif name == "loss":
                val = parse_loss(val if isinstance(val, str) else float(val))
            elif name == "cpu_quota":
                val = parse_quota(val if isinstance(val, str) else float(val))
            elif name == "labels":
                if not isinstance(val, dict):
                    raise ValueError("labels must be a table of strings")
                val = tuple((str(k), str(v)) for k, v in val.items())
            elif name == "duration_s":
                val = parse_duration(val)
            elif name == "late_limit_ms":
                val = parse_late_limit(val)
            elif name in ("rtt_ms", "jitter_ms", "timeout_s"):
                val = float(val)
            elif name in ("objects", "seed", "packet_threshold"):
                val = int(val)
            elif name == "qlog":
                if not isinstance(val, bool):
                    raise ValueError("must be true or false")
            kw[name] = val
        except (TypeError, ValueError, TestbedError) as exc:
            raise TestbedError(f"{where}{key}: {exc}") from None
    try:
        return RunConfig(**kw), runs
    except TestbedError as exc:
        raise TestbedError(f"{where}{exc}") from None


def load_matrix(path: Path) -> Matrix:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TestbedError(f"{path}: no such scenario file") from None
    except tomllib.TOMLDecodeError as exc:
        raise TestbedError(f"{path}: not valid TOML: {exc}") from None
    unknown = set(data) - {"defaults", "scenario", "out"}
    if unknown:
        raise TestbedError(f"{path}: unknown top-level keys {sorted(unknown)} (expected out, [defaults], [[scenario]])")
    defaults = data.get("defaults", {})
    items = data.get("scenario", [])
    if not isinstance(defaults, dict) or not isinstance(items, list) or not items:
        raise TestbedError(f"{path}: needs at least one [[scenario]] table")
    scenarios = []
    names: set[str] = set()
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict) or "name" not in item:
            raise TestbedError(f"{path}: scenario {i} has no name")
        if item["name"] in names:
            raise TestbedError(f"{path}: scenario {i}: duplicate name {item['name']!r}")
        names.add(item["name"])
        cfg, runs = config_from_mapping({**defaults, **item}, where=f"{path}: scenario {i} ({item['name']})")
        scenarios.append(Scenario(cfg, runs))
    out = data.get("out")
    return Matrix(Path(path), tuple(scenarios), Path(out) if out else None)


def with_set(m: Matrix, spec: str | None) -> Matrix:
    """``m`` with ``--set spec`` given to every scenario, each scenario's set checked against its stack and
    controller before anything runs. A scenario whose file names another set is refused, not overridden:
    a set is what the runs measure, and a file naming two sets (say, stock and tuned) must not quietly
    become one."""
    from quicsm.errors import PatchError
    from quicsm.instrumentation.patchset import PatchSet, find_patch_set
    from quicsm.testbed.sets import given_set

    def identity(name: str, where: str) -> tuple[str, ...]:
        try:
            ps: PatchSet = find_patch_set(name)
        except PatchError as exc:
            raise TestbedError(f"{where}: {exc}") from None
        return (ps.target, ps.algorithm, ps.name, ps.diff_text)

    if spec is not None:
        cli = identity(spec, f"--set {spec}")
        clash = [
            f"scenario {i} ({sc.config.name}) has set = {sc.config.patch_set!r}"
            for i, sc in enumerate(m.scenarios, 1)
            if sc.config.patch_set not in (None, spec)
            and identity(sc.config.patch_set, f"{m.path}: scenario {i} ({sc.config.name}): set") != cli
        ]
        if clash:
            raise TestbedError(
                f"{m.path}: {'; '.join(clash)}, and --set gives {spec!r}: a set the file names is not replaced; "
                "drop --set, or remove `set` from the file"
            )
        m = replace(m, scenarios=tuple(replace(sc, config=replace(sc.config, patch_set=spec)) for sc in m.scenarios))
    for i, sc in enumerate(m.scenarios, 1):
        c = sc.config
        if c.patch_set is not None:
            try:
                given_set(c.server_stack, c.cc, c.patch_set)
            except TestbedError as exc:
                raise TestbedError(f"{m.path}: scenario {i} ({c.name}): {exc}") from None
    return m
