"""The testbed's ``meta.json``, declared once: what a run directory says about itself.

:mod:`quicsm.testbed.runner` writes a :class:`RunMeta` per run (and per flow of a multi-flow run),
:mod:`quicsm.testbed.flows` a :class:`FlowsRunMeta` per multi-flow run (``"kind": "flows"``). The
readers decode through these declarations: the sidecar of every input (:mod:`quicsm.traces.inputs`:
implementation, version, cc, labels), the report's rate-schedule timelines and the fairness view
(:mod:`quicsm.compare`). A user may write a sidecar by hand with only the first four fields; the other
blocks are free-form where stacks add their own keys (``versions``, ``build``, a client's output).
Schemas: ``quicsm/schemas/run-meta.schema.json`` and ``flows-meta.schema.json``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

from quicsm.errors import InputError, reading
from quicsm.formats import checked

__all__ = [
    "EmulatorMeta",
    "FlowEntry",
    "FlowSeries",
    "FlowsRunMeta",
    "ResultMeta",
    "RunMeta",
    "SIDECAR_MAX",
    "Sidecar",
    "dump_meta",
    "read_meta",
]

SIDECAR_MAX = 1 << 20
"""Bytes of a ``meta.json`` read at most (testbed runs write a few kB)."""

Label = str | int | float | bool


class ResultMeta(msgspec.Struct, kw_only=True):
    """How the run went: the client's page load, or why it failed."""

    ok: bool | None = None
    error: str | None = None
    plt_ms: float | None = None
    """Page-load time the client measured (ms)."""
    client: dict[str, Any] = {}
    """The client's own JSON (bytes, handshake, protocol, ...; per client)."""
    client_cpu_s: float | None = None
    """CPU the client used when its CPU was limited."""


class EmulatorMeta(msgspec.Struct, kw_only=True):
    """The emulated path: whether the relay kept its schedule, and its counters."""

    ok: bool | None = None
    """False: the relay was late beyond the limit (the run is redone); None: not recorded."""
    late_p99_us: int | None = None
    late_limit_us: int | None = None
    mode: str | None | msgspec.UnsetType = msgspec.UNSET
    """The relay's mode (multi-flow runs: ``ip``); page-load runs leave it out."""
    namespaces: list[str] = []
    relay: dict[str, Any] | None = None
    tbf: dict[str, Any] | None = None
    rate_log: list[tuple[float, float]] = []
    """The bottleneck rate schedule followed: ``[seconds since the client started, bit/s]`` steps."""


class Sidecar(msgspec.Struct, kw_only=True):
    """What every trace of the files beside a ``meta.json`` gets (any other key is not read): the
    part of :class:`RunMeta` a hand-written sidecar holds."""

    implementation: str | None = None
    version: str | None = None
    cc: str | None = None
    labels: dict[str, Label] = {}
    """Scenario parameters and the run's name: the traces' labels (``--where``, ``--by``)."""


class RunMeta(Sidecar, kw_only=True, omit_defaults=True):
    """One testbed run directory's ``meta.json`` (a page load, or one flow of a multi-flow run); a block
    the run has not (``grid``, ``flow``, ...) is left out of the file, not written as null."""

    params: dict[str, Any] = {}
    """Every run parameter (:class:`quicsm.testbed.config.RunParams`) with derived values."""
    result: ResultMeta | None = None
    emulator: EmulatorMeta | None = None
    timestamps: dict[str, Any] = {}
    versions: dict[str, Any] = {}
    """Tool, binary and stack versions (each stack adds its own keys)."""
    build: dict[str, Any] | None = None
    """How the server was built (each stack's own record)."""
    run_index: int | None = None
    grid: dict[str, Any] | None = None
    """A grid run's cell, arm, round and fingerprint (:mod:`quicsm.grids`)."""
    flow: dict[str, Any] | None = None
    """In a flow's directory of a multi-flow run: that flow (as :class:`FlowEntry`)."""


class FlowEntry(msgspec.Struct, kw_only=True):
    """One flow of a multi-flow run: what it was and where its bytes went."""

    name: str
    stack: str
    cc: str
    start_s: float
    throughput_mbps: float
    """Mean rate at the bottleneck over the run's measurement window."""
    start_unix_ns: int
    t_us_to_unix_us: int | None = None
    """Add to the flow's log ``t_us`` to get Unix microseconds (None: its clock is unknown)."""
    index: int | None = None
    port: int | None = None
    bytes: int | None = None
    client: dict[str, Any] | None = None
    server: dict[str, Any] | None = None


class FlowSeries(msgspec.Struct):
    """Bytes each flow delivered at the bottleneck, per bin of ``bin_s`` from ``t0_unix_ns``."""

    bin_s: float
    t0_unix_ns: int
    bytes: dict[str, list[int]]


class FlowsRunMeta(msgspec.Struct, kw_only=True):
    """A multi-flow run's ``meta.json`` (:mod:`quicsm.testbed.flows`; IMC'17 Table 4, Fig. 5)."""

    kind: Literal["flows"]
    scenario: dict[str, Any]
    """The scenario as run (``name``, ``rate_mbps``, the flows, ...)."""
    flows: list[FlowEntry]
    series: FlowSeries
    window_s: tuple[float, float]
    """Measurement window, seconds on the relay's clock."""
    clients_start_s: float | None = None
    """When the first client started on that clock (older runs: None, the window then counts from it)."""
    throughput_mbps: dict[str, float] = {}
    result: dict[str, Any] = {}
    emulator: EmulatorMeta | None = None
    tracer: dict[str, Any] | None = None
    timestamps: dict[str, Any] = {}


def dump_meta(meta: msgspec.Struct) -> str:
    """``meta`` as the testbed writes ``meta.json``: sorted keys, two-space indent; a value JSON has no
    type for (a path) as its string."""
    return json.dumps(msgspec.to_builtins(meta, enc_hook=str), indent=2, sort_keys=True)


def read_meta(path: str, kind: type[Any] = RunMeta) -> Any:
    """The ``meta.json`` at ``path`` as ``kind`` (at most :data:`SIDECAR_MAX` bytes read); InputError
    (one line, in :func:`quicsm.errors.reading`'s and :func:`quicsm.formats.checked`'s words) when it
    cannot be read or does not hold the declared shape."""
    with reading(path), open(path, "rb") as fh:
        raw = fh.read(SIDECAR_MAX + 1)
    if len(raw) > SIDECAR_MAX:
        raise InputError(f"{path}: run metadata: larger than {SIDECAR_MAX} bytes")
    return checked(raw, kind, f"{path}: run metadata")
