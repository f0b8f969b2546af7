"""quicsm: instrument QUIC congestion controllers, infer their state machines, explain performance.

The data flows through one chain of types, each stage a function and a CLI verb:
log lines -> :class:`~quicsm.traces.events.TraceEvent` -> :class:`~quicsm.traces.events.Trace`
-> :class:`~quicsm.inference.model.Model` -> annotated model -> rendered diagram / comparison report.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
