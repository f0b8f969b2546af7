"""State-machine inference from state sequences: engines behind one :func:`infer_sequences` entry point
(and :data:`ENGINES`, their specs and option rules)."""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from quicsm.errors import InferenceError, OptionError
from quicsm.inference.model import INITIAL, TERMINAL, Edge, InferenceResult, Model, Node

__all__ = [
    "ENGINES",
    "ENGINE_SPECS",
    "INITIAL",
    "TERMINAL",
    "Edge",
    "EngineSpec",
    "InferenceResult",
    "Model",
    "Node",
    "infer_sequences",
]


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """An engine: where its function lives (imported on first use), the options it takes and their rules.

    Every caller (the CLI, a Python program) gets the same checks: :meth:`check` refuses an option the
    engine does not take, a value of the wrong type and options that exclude each other;
    :meth:`prepare` also checks what the engine needs outside Python (the jar, Java) before any input
    is read.
    """

    name: str
    target: str
    """``module:function`` called as ``function(sequences, **options)``."""
    options: dict[str, type] = field(default_factory=dict)
    """Option name -> type; anything else is refused with :class:`~quicsm.errors.OptionError`."""
    summary: str = ""
    excludes: tuple[tuple[str, str, str], ...] = ()
    """``(a, b, why)``: options ``a`` and ``b`` cannot be given together; ``why`` may name ``{b}``."""
    ready: str | None = None
    """``module:function`` taking some of the options, raising when the engine cannot run here."""

    def check(self, opts: dict[str, Any], spell: Callable[[str], str] = str) -> dict[str, Any]:
        """The options converted to their types, or :class:`OptionError`. ``spell`` shows an option
        (and ``engine``) as the caller wrote it: the CLI gives its flags."""
        unknown = sorted(set(opts) - set(self.options))
        if unknown:
            others = [e.name for e in ENGINE_SPECS if unknown[0] in e.options]
            if others:
                raise OptionError(f"{spell(unknown[0])} applies to {spell('engine')} {' and '.join(others)} only")
            takes = ", ".join(map(spell, sorted(self.options))) or "no options"
            shown = ", ".join(map(spell, unknown))
            raise OptionError(f"engine {self.name!r} does not take option(s) {shown} (it takes: {takes})")
        for a, b, why in self.excludes:
            if a in opts and b in opts:
                raise OptionError(f"{spell(a)} {why.format(b=spell(b))}")
        out: dict[str, Any] = {}
        for key, value in opts.items():
            want = self.options[key]
            if not _is(value, want):
                raise OptionError(f"engine {self.name!r}: option {key} must be {_KIND_NAMES[want]}, got {value!r}")
            out[key] = os.fspath(value) if want is str else want(value)
        return out

    def prepare(self, opts: dict[str, Any], spell: Callable[[str], str] = str) -> dict[str, Any]:
        """:meth:`check`, then the engine's own readiness (``ready``): call it before reading inputs."""
        checked = self.check(opts, spell)
        if self.ready:
            fn = _target(self.ready)
            takes = inspect.signature(fn).parameters
            fn(**{k: v for k, v in checked.items() if k in takes})
        return checked

    def __call__(self, sequences: Sequence[Sequence[str]], **opts: Any) -> InferenceResult:
        checked = self.check(opts)
        fn: Callable[..., InferenceResult] = _target(self.target)
        return fn(sequences, **checked)


def _target(spec: str) -> Callable[..., Any]:
    module, _, attr = spec.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), attr)
    return fn


_KIND_NAMES = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string or path",
    list: "a list of strings",
}


def _is(value: Any, want: type) -> bool:
    if want is bool or isinstance(value, bool):
        return want is bool and isinstance(value, bool)
    if want is float:
        return isinstance(value, (int, float))
    if want is str:
        return isinstance(value, (str, os.PathLike))
    if want is list:
        return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    return isinstance(value, want)


ENGINE_SPECS: tuple[EngineSpec, ...] = (
    EngineSpec(
        "synoptic",
        "quicsm.inference.synoptic:infer_synoptic",
        {"k": int, "coarsen": bool, "refine": str, "seed": int},
        "Synoptic (FSE'11): invariant-guided refinement, then k-Tails coarsening (k=1)",
        excludes=(("seed", "refine", "replays Synoptic's own refinement: leave out {b}"),),
    ),
    EngineSpec(
        "ktails",
        "quicsm.inference.ktails:infer_ktails",
        {"k": int},
        "k-Tails over the prefix tree (Synoptic's k, default 2)",
    ),
    EngineSpec("dfg", "quicsm.inference.dfg:infer_dfg", {}, "directly-follows graph: one node per state"),
    EngineSpec(
        "synoptic-jar",
        "quicsm.inference.synoptic_jar:infer_synoptic_jar",
        {
            "synoptic_jar": str,
            "java": str,
            "java_options": list,
            "timeout": float,
            "coarsen": bool,
            "workdir": str,
            "seed": int,
        },
        "the original Synoptic jar, run through java",
        ready="quicsm.inference.synoptic_jar:check_runtime",
    ),
)

ENGINES: dict[str, EngineSpec] = {spec.name: spec for spec in ENGINE_SPECS}
"""Engine name -> its spec, called as ``spec(sequences, **options)`` (imports the engine's module on first use)."""


def infer_sequences(sequences: Sequence[Sequence[str]], engine: str = "synoptic", **opts: Any) -> InferenceResult:
    try:
        fn = ENGINES[engine]
    except KeyError:
        raise OptionError(f"unknown engine {engine!r}; choose one of {', '.join(sorted(ENGINES))}") from None
    if not any(sequences):
        raise InferenceError("no state sequences to learn from")
    return fn(sequences, **opts)
