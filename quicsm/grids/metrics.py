"""What a grid compares per run, read from the run's ``meta.json``: page-load time (the IMC'17 heatmaps),
goodput and channel utilization, the bottleneck's loss ratio (Carlucci et al.'s S1), time to the HTML."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from quicsm.traces.runmeta import RunMeta

__all__ = ["METRICS", "Metric", "metric"]


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    label: str
    unit: str
    higher_is_better: bool
    value: Callable[[RunMeta], float | None]
    """The run's value from its meta.json (None when the run does not tell)."""

    def fmt(self, x: float | None) -> str:
        if x is None:
            return "n/a"
        if self.unit == "%":
            return f"{100 * x:.1f} %"
        return f"{x:.3g} {self.unit}" if abs(x) < 100 else f"{x:.0f} {self.unit}"


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _client(meta: RunMeta) -> Mapping[str, Any]:
    return meta.result.client if meta.result else {}


def _plt(meta: RunMeta) -> float | None:
    return _num(meta.result.plt_ms) if meta.result else None


def _goodput(meta: RunMeta) -> float | None:
    """Mbit/s: the long flow's goodput, else the page's bytes over its load time."""
    c = _client(meta)
    if _num(c.get("goodput_mbps")) is not None:
        return _num(c.get("goodput_mbps"))
    nbytes, plt = _num(c.get("bytes")), _plt(meta)
    return nbytes * 8 / plt / 1000 if nbytes and plt else None


def _utilization(meta: RunMeta) -> float | None:
    g = _goodput(meta)
    rate = _num(meta.params.get("rate_mbps"))
    return g / rate if g is not None and rate else None


def _loss_ratio(meta: RunMeta) -> float | None:
    """Share of the server's packets toward the client lost on the path: dropped by the bottleneck's full
    queue or by the random loss after it (Carlucci et al.'s l, measured where their NetShaper measured)."""
    emu = meta.emulator
    tbf = (emu.tbf or {}).get("down") if emu else None
    relay = (emu.relay or {}).get("down") if emu else None
    if not isinstance(tbf, Mapping):
        return None
    sent, queue_drops = _num(tbf.get("packets")), _num(tbf.get("drops"))
    random_drops = _num(relay.get("dropped")) if isinstance(relay, Mapping) else 0.0
    if sent is None or queue_drops is None or sent + queue_drops <= 0:
        return None
    return (queue_drops + (random_drops or 0.0)) / (sent + queue_drops)


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("plt", "page-load time", "ms", False, _plt),
        Metric("html_ms", "time to the HTML", "ms", False, lambda meta: _num(_client(meta).get("page_ms"))),
        Metric("goodput", "goodput", "Mbit/s", True, _goodput),
        Metric("utilization", "channel utilization", "%", True, _utilization),
        Metric("loss_ratio", "loss ratio", "%", False, _loss_ratio),
    )
}


def metric(name: str) -> Metric:
    from quicsm.errors import InputError

    try:
        return METRICS[name]
    except KeyError:
        raise InputError(f"metric {name!r}: choose one of {', '.join(METRICS)}") from None
