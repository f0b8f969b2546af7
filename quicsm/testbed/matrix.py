"""Scenario files: a TOML list of runs sharing defaults, declared as msgspec Structs (:class:`MatrixFile`,
whose JSON Schema ships as ``quicsm/schemas/scenario.schema.json``) and read with the standard library's
tomllib.

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

The keys of a scenario (:class:`ScenarioKeys`) are also what a grid file (:mod:`quicsm.grids.spec`) takes
for its base, its axes and its arms.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from quicsm.errors import TestbedError, reading
from quicsm.formats import checked, toml_line
from quicsm.formats import described as _d
from quicsm.testbed import netns
from quicsm.testbed.config import (
    parse_delay,
    parse_duration,
    parse_late_limit,
    parse_loss,
    parse_quota,
    parse_size,
)
from quicsm.testbed.runner import RunConfig

__all__ = [
    "KEY_ALIASES",
    "Matrix",
    "MatrixDefaults",
    "MatrixFile",
    "MatrixScenario",
    "Scenario",
    "ScenarioKeys",
    "config_from_mapping",
    "load_matrix",
    "parse_value",
    "scenario_keys",
    "with_set",
]

KEY_ALIASES = {
    "rate": "rate_mbps",
    "rtt": "rtt_ms",
    "delay": "rtt_ms",
    "jitter": "jitter_ms",
    "buffer": "queue",
    "version": "quic_go_version",
    "quiche": "quiche_version",
    "timeout": "timeout_s",
    "duration": "duration_s",
    "set": "patch_set",
    "late_limit": "late_limit_ms",
}
_FIELDS = {f.name for f in fields(RunConfig)}


class ScenarioKeys(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The keys of one scenario (every one optional; what is left out takes the testbed's default). Units
    may be written out (``"50mbit"``, ``"10MB"``, ``"1%"``, ``"36ms"``); a bare number is in the unit the
    description names. Aliases (``rate`` for ``rate_mbps``, ...) are the same key: give one of them."""

    rate: Annotated[float | str | UnsetType, _d("Bottleneck rate: Mbit/s, or e.g. 500kbit, 50mbit.")] = UNSET
    rate_mbps: Annotated[float | str | UnsetType, _d("Alias of rate.")] = UNSET
    rtt: Annotated[float | str | UnsetType, _d("Added round-trip delay in ms (half each way), or e.g. 36ms.")] = UNSET
    delay: Annotated[float | str | UnsetType, _d("Alias of rtt.")] = UNSET
    rtt_ms: Annotated[float | str | UnsetType, _d("Alias of rtt.")] = UNSET
    jitter: Annotated[float | str | UnsetType, _d("Uniform +- jitter per packet and direction in ms (reorders).")] = (
        UNSET
    )
    jitter_ms: Annotated[float | str | UnsetType, _d("Alias of jitter.")] = UNSET
    loss: Annotated[float | str | UnsetType, _d("Random loss per packet and direction: 0.01 or 1%.")] = UNSET
    queue: Annotated[
        int | str | UnsetType, _d("Bottleneck drop-tail queue: bytes (150kb, 30000) or BDP multiple (1bdp).")
    ] = UNSET
    buffer: Annotated[int | str | UnsetType, _d("Alias of queue.")] = UNSET
    client: Annotated[str | UnsetType, _d("go (the stack's Go client) or chromium (headless Debian chromium).")] = UNSET
    cpu_quota: Annotated[
        float | str | UnsetType, _d("Client CPU quota, a share of a core (0.1 or 10%): a throttled client; none.")
    ] = UNSET
    objects: Annotated[int | UnsetType, _d("Objects on the page.")] = UNSET
    size: Annotated[int | str | UnsetType, _d("Bytes per object (5KB, 10MB, 5000).")] = UNSET
    page: Annotated[
        str | UnsetType, _d("A page of mixed object sizes, 18x2.6KB+3x86.5KB, instead of objects x size.")
    ] = UNSET
    quic_go_version: Annotated[str | UnsetType, _d("quic-go of the server and of the Go client.")] = UNSET
    version: Annotated[str | UnsetType, _d("Alias of quic_go_version.")] = UNSET
    stack: Annotated[str | UnsetType, _d("Server stack: quic-go, quiche, quinn, tcp, ... (testbed stacks).")] = UNSET
    quiche_version: Annotated[str | UnsetType, _d("Crate version of quiche (stack quiche).")] = UNSET
    quiche: Annotated[str | UnsetType, _d("Alias of quiche_version.")] = UNSET
    stack_version: Annotated[str | UnsetType, _d("Version of the stack, for any stack.")] = UNSET
    cc: Annotated[str | UnsetType, _d("Congestion controller (the stack's: reno, cubic, bbr, bbr2, ...).")] = UNSET
    packet_threshold: Annotated[
        int | UnsetType, _d("Rebuild the quic-go server with this fixed packet-reordering threshold.")
    ] = UNSET
    max_cwnd: Annotated[
        int | UnsetType, _d("Rebuild the quic-go server with this maximum congestion window (packets).")
    ] = UNSET
    zero_rtt: Annotated[
        bool | UnsetType,
        _d("Resume with 0-RTT: the client first makes a connection for a session ticket, then loads the page."),
    ] = UNSET
    http: Annotated[str | UnsetType, _d("HTTP version: h3 (QUIC stacks), h2 or h1 (HTTP/1.1 over TLS; stack tcp).")] = (
        UNSET
    )
    qlog: Annotated[bool | UnsetType, _d("The server also writes qlog into <run>/qlog (quic-go).")] = UNSET
    schedule: Annotated[str | UnsetType, _d("Bandwidth schedule random:MIN:MAX[:PERIOD_S] in Mbit/s.")] = UNSET
    rtt_step: Annotated[str | UnsetType, _d("RTT step within the run, AFTER:RTT (20s:80ms).")] = UNSET
    outage: Annotated[
        str | UnsetType, _d("Link blackouts, AT:FOR[,AT:FOR...] past the first packet (1s:1500ms): nothing crosses.")
    ] = UNSET
    duration: Annotated[
        float | str | UnsetType, _d("Long flow: fetch back to back for this long (60s, 2m) instead of one page load.")
    ] = UNSET
    duration_s: Annotated[float | str | UnsetType, _d("Alias of duration.")] = UNSET
    seed: Annotated[int | UnsetType, _d("Seed of the relay's loss and jitter draws.")] = UNSET
    timeout: Annotated[float | UnsetType, _d("Seconds a page load may take.")] = UNSET
    timeout_s: Annotated[float | UnsetType, _d("Alias of timeout.")] = UNSET
    set: Annotated[str | UnsetType, _d("Patch set for the server (a shipped name or a directory).")] = UNSET
    patch_set: Annotated[str | UnsetType, _d("Alias of set.")] = UNSET
    late_limit: Annotated[
        float | str | UnsetType, _d("A run is emulator-late when 1 % of packets leave the relay later than this (ms).")
    ] = UNSET
    late_limit_ms: Annotated[float | str | UnsetType, _d("Alias of late_limit.")] = UNSET
    labels: Annotated[dict[str, str] | UnsetType, _d("Extra labels the run's traces carry.")] = UNSET


class MatrixDefaults(ScenarioKeys, kw_only=True):
    """``[defaults]``: keys every scenario takes unless it gives its own."""

    runs: Annotated[Annotated[int, msgspec.Meta(ge=1)] | UnsetType, _d("Runs of each scenario.")] = UNSET


class MatrixScenario(MatrixDefaults, kw_only=True):
    """One ``[[scenario]]``: its name (run directories are NAME-NN) and its keys."""

    name: Annotated[str, _d("Scenario name: run directories are NAME-NN.")]


class MatrixFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A scenario file (``quicsm testbed matrix FILE``)."""

    out: Annotated[str | UnsetType, _d("Output directory (the CLI's --out wins).")] = UNSET
    defaults: MatrixDefaults | UnsetType = UNSET
    scenario: Annotated[list[MatrixScenario], _d("The scenarios, at least one.")] = msgspec.field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Scenario:
    config: RunConfig
    runs: int


@dataclass(frozen=True, slots=True)
class Matrix:
    path: Path
    scenarios: tuple[Scenario, ...]
    out: Path | None


def _given(keys: msgspec.Struct | dict[str, Any], where: str) -> dict[str, tuple[str, Any]]:
    """The keys a table gives (a decoded Struct's set fields, or a checked table's items in its order),
    each alias as its key -> (the key as spelled, its value)."""
    pre = f"{where}: " if where else ""
    items = keys.items() if isinstance(keys, dict) else ((k, getattr(keys, k)) for k in keys.__struct_fields__)
    out: dict[str, tuple[str, Any]] = {}
    for k, v in items:
        if v is UNSET:
            continue
        name = KEY_ALIASES.get(k, k)
        if name in out:
            raise TestbedError(f"{pre}{out[name][0]} and {k} are the same key: give one")
        out[name] = (k, v)
    return out


def scenario_keys(d: Any, *, where: str, kind: type[msgspec.Struct] = ScenarioKeys) -> dict[str, Any]:
    """The keys of one table checked against ``kind`` (:class:`ScenarioKeys` or a Struct built on it), as
    a mapping of the keys given, each alias replaced by its key. Errors read ``WHERE: KEY: why``."""
    pre = f"{where}: " if where else ""
    if not isinstance(d, dict):
        raise TestbedError(f"{pre}expected a table of keys, got {type(d).__name__}")
    checked(d, kind, where, error=TestbedError)
    return {name: v for name, (_, v) in _given({str(k): v for k, v in d.items()}, where).items()}


def config_from_mapping(
    d: dict[str, Any], *, where: str, key_at: Callable[[str], str] | None = None
) -> tuple[RunConfig, int]:
    """Turn one scenario's keys (with aliases and unit strings) into a RunConfig and a run count; errors start
    with ``key_at(key)`` when given (the file and line that gave the key; ``key_at("")``: the scenario's),
    then ``where`` (a scenario of a file; none for ``testbed run``'s options)."""
    pre = f"{where}: " if where else ""
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
            kw[name] = parse_value(name, val)
        except (TypeError, ValueError, TestbedError) as exc:
            raise TestbedError(f"{key_at(key) + ': ' if key_at else ''}{pre}{key}: {exc}") from None
    try:
        return RunConfig(**kw), runs
    except TestbedError as exc:
        key = str(exc).split(" ", 1)[0]  # "client 'lynx': ...": the line of that key
        raise TestbedError(f"{key_at(key if key in d else '') + ': ' if key_at else ''}{pre}{exc}") from None


def parse_value(name: str, val: Any) -> Any:
    """One key's value (``name`` as RunConfig calls it) in RunConfig's unit and type."""
    if name == "rate_mbps":
        return netns.parse_rate(val) / 1e6
    if name == "size":
        return parse_size(val)
    if name == "loss":
        return parse_loss(val if isinstance(val, str) else float(val))
    if name == "cpu_quota":
        return parse_quota(val if isinstance(val, str) else float(val))
    if name == "labels":
        if not isinstance(val, dict):
            raise ValueError("labels must be a table of strings")
        return tuple((str(k), str(v)) for k, v in val.items())
    if name == "duration_s":
        return parse_duration(val)
    if name == "late_limit_ms":
        return parse_late_limit(val)
    if name in ("rtt_ms", "jitter_ms"):
        return parse_delay(val)
    if name == "timeout_s":
        return float(val)
    if name in ("objects", "seed", "packet_threshold", "max_cwnd"):
        if isinstance(val, bool):
            raise ValueError("expected a whole number")
        return int(val)
    if name in ("zero_rtt", "qlog"):
        if not isinstance(val, bool):
            raise ValueError("expected true or false")
        return val
    return val


def _at(path: Path, text: str, place: str) -> str:
    """``FILE:LINE`` of ``place`` (``scenario[1].name``, or of its table), or ``FILE``."""
    line = toml_line(text, place) or toml_line(text, place.rpartition(".")[0])
    return f"{path}:{line}" if line else f"{path}"


def _decode(path: Path) -> tuple[str, MatrixFile]:
    """The file's text and the file as :class:`MatrixFile` (decoded once); errors read
    ``FILE:LINE: scenario 2 (b): KEY: why``."""
    with reading(str(path)):
        text = Path(path).read_bytes()

    def name(where: str) -> str:
        table, _, key = where.partition(".")
        head, _, index = table.partition("[")
        if head == "scenario" and index:
            i = int(index.rstrip("]"))
            sc = tomllib.loads(text.decode())["scenario"][i]  # it parsed: only its shape is wrong
            table = f"scenario {i + 1}" + (f" ({sc['name']})" if isinstance(sc.get("name"), str) else "")
        elif head == "defaults":
            table = "[defaults]"
        return f"{table}: {key}" if key else table

    spec = checked(text, MatrixFile, str(path), what="TOML", error=TestbedError, name=name)
    return text.decode(), spec


def load_matrix(path: Path) -> Matrix:
    """A scenario file: decoded once into :class:`MatrixFile`, each scenario's keys (over the defaults)
    made a :class:`RunConfig`. Errors name the file, the line and the reason."""
    text, spec = _decode(path)
    if not spec.scenario:
        raise TestbedError(f"{path}: needs at least one [[scenario]] table")

    def at(table: str, key: str) -> str:
        return _at(path, text, f"{table}.{key}" if key else table)

    defaults = _given(spec.defaults, f"{at('defaults', '')}: [defaults]") if spec.defaults else {}
    scenarios = []
    names: set[str] = set()
    for i, sc in enumerate(spec.scenario):
        where = f"scenario {i + 1} ({sc.name})"
        if sc.name in names:
            raise TestbedError(f"{at(f'scenario[{i}]', 'name')}: {where}: duplicate name {sc.name!r}")
        names.add(sc.name)
        own = _given(sc, f"{at(f'scenario[{i}]', '')}: {where}")

        def key_at(key: str, i: int = i, own: dict[str, tuple[str, Any]] = own) -> str:
            """Where the file gives ``key`` to scenario ``i`` (its own table, else [defaults])."""
            if key in own or key not in defaults:
                return at(f"scenario[{i}]", own[key][0] if key in own else "")
            return at("defaults", defaults[key][0])

        cfg, runs = config_from_mapping({k: v for k, (_, v) in {**defaults, **own}.items()}, where=where, key_at=key_at)
        scenarios.append(Scenario(cfg, runs))
    return Matrix(Path(path), tuple(scenarios), Path(spec.out) if spec.out else None)


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
