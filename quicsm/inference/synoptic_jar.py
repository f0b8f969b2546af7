"""Engine ``synoptic-jar``: run the original Synoptic (Java) and read its model back.

For users who have Synoptic's jar (built from the ModelInference/synoptic repository): pass
``synoptic_jar=PATH`` (CLI ``--synoptic-jar``) or set ``QUICSM_SYNOPTIC_JAR``. The traces are written
as a Synoptic log (:mod:`quicsm.inference.export`) and Synoptic is run with a fixed ``--randomSeed``
(``seed``, default 1, recorded in the model's parameters) and ``-j``, so it writes its final model as
JSON: every partition with the events it holds. :func:`read_synoptic_json` turns that into node ids
per event, so paths, counts, probabilities and time shares come from Synoptic's own assignment of
events to partitions, never from a guess of ours.

Java: Synoptic's HEAD fails on Java 17 and 25 (measured; ``NamedMatcher.toMatchResult`` casts the
``MatchResult`` of ``Matcher.toMatchResult()`` to ``Matcher``, which newer JDKs no longer return).
Run it with an older JDK (``java=PATH``) or a jar built with that method fixed; the failure is
recognised and said in one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence

import msgspec
import numpy as np

from quicsm.errors import InferenceError, reading
from quicsm.formats import checked
from quicsm.inference.export import DEFAULT_SEED, dump_synoptic_log, synoptic_arguments
from quicsm.inference.model import INITIAL, TERMINAL, InferenceResult
from quicsm.inference.packed import encode_sequences, result_from_nodes

__all__ = [
    "DEFAULT_TIMEOUT",
    "ENV_JAR",
    "JAVA17_FAILURE",
    "SynopticJson",
    "check_runtime",
    "find_jar",
    "infer_synoptic_jar",
    "read_synoptic_json",
]

ENV_JAR = "QUICSM_SYNOPTIC_JAR"
DEFAULT_TIMEOUT = 3600.0
"""Seconds Synoptic may run (``timeout=``, CLI ``--timeout``): 10^3 events take it 15-30 s of CPU, 10^4
events 3,416 s here (1 h 30 min of wall time): give those a longer one."""
MAIN_CLASS = "synoptic/main/SynopticMain.class"
JAVA17_FAILURE = "ImmutableMatchResult cannot be cast"
"""What the JVM prints when Synoptic's NamedMatcher meets a Java 17+ ``Matcher.toMatchResult``."""


class SynopticJson:
    """Synoptic's JSON model: node labels and, per log line, the node holding that event.

    Nodes are numbered INITIAL = 0, Synoptic's partitions 1..P in the order it lists them, TERMINAL = P + 1.
    """

    def __init__(self, labels: list[str], node_of_line: dict[int, int]) -> None:
        self.labels = labels
        self.node_of_line = node_of_line

    @property
    def initial(self) -> int:
        return 0

    @property
    def terminal(self) -> int:
        return len(self.labels) - 1


class _LogEvent(msgspec.Struct, rename="camel"):
    event_index: int
    log_line: int


class _LogTrace(msgspec.Struct):
    trace_id: int = msgspec.field(name="traceID")
    events: list[_LogEvent]


class _PartEvent(msgspec.Struct, rename="camel"):
    trace_id: int = msgspec.field(name="traceID")
    event_index: int


class _Partition(msgspec.Struct, rename="camel"):
    event_type: str
    events: list[_PartEvent]


class _SynopticModel(msgspec.Struct):
    """What quicsm reads of Synoptic's ``-j`` JSON (its other keys are left alone)."""

    log: list[_LogTrace]
    partitions: list[_Partition]


def read_synoptic_json(path: str) -> SynopticJson:
    """Read the ``-j`` output: ``log`` (traces of events with their ``logLine``) and ``partitions``; a
    file that does not hold them is one line in :func:`quicsm.formats.checked`'s words."""
    with reading(path), open(path, "rb") as fh:
        data = checked(fh.read(), _SynopticModel, f"{path}: Synoptic's model", error=InferenceError)
    line_of = {(t.trace_id, e.event_index): e.log_line for t in data.log for e in t.events}
    labels = [INITIAL]
    node_of_line: dict[int, int] = {}
    for p, part in enumerate(data.partitions):
        labels.append(part.event_type)
        for e, event in enumerate(part.events):
            line = line_of.get((event.trace_id, event.event_index))
            if line is None:
                raise InferenceError(
                    f"{path}: Synoptic's model: partitions[{p}].events[{e}] names an event the log does not hold"
                )
            node_of_line[line] = len(labels) - 1
    labels.append(TERMINAL)
    return SynopticJson(labels, node_of_line)


def event_nodes(model: SynopticJson, sequences: Sequence[Sequence[str]], source: str) -> np.ndarray:
    """Node of every framed event (INITIAL, the states, TERMINAL of each trace), from Synoptic's map."""
    out: list[int] = []
    line = 0
    for t, seq in enumerate(sequences):
        out.append(model.initial)
        for i, state in enumerate(seq):
            line += 1
            node = model.node_of_line.get(line)
            if node is None or model.labels[node] != state:
                raise InferenceError(
                    f"{source}: Synoptic's model does not place trace {t} event {i} ({state}, log line {line})"
                )
            out.append(node)
        out.append(model.terminal)
    return np.asarray(out, dtype=np.int64)


def find_jar(synoptic_jar: str | None) -> str:
    """The jar to run: ``synoptic_jar`` or ``$QUICSM_SYNOPTIC_JAR``, a zip holding Synoptic's main class."""
    jar = synoptic_jar or os.environ.get(ENV_JAR)
    if not jar:
        raise InferenceError(
            "engine synoptic-jar needs the original Synoptic jar: pass --synoptic-jar PATH (Python: "
            f"synoptic_jar=PATH) or set {ENV_JAR}; build it from the ModelInference/synoptic sources "
            "(see docs/inference.md), or use --engine synoptic (our implementation), or 'quicsm export --to synoptic'"
        )
    if not os.path.isfile(jar):
        raise InferenceError(f"{jar}: Synoptic jar not found")
    try:
        with zipfile.ZipFile(jar) as zf:
            names = set(zf.namelist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise InferenceError(f"{jar}: not a jar ({exc})") from None
    if MAIN_CLASS not in names:
        raise InferenceError(f"{jar}: not Synoptic's jar (no {MAIN_CLASS})")
    return jar


def find_java(java: str) -> str:
    java_path = shutil.which(java)
    if java_path is None:
        raise InferenceError(
            f"engine synoptic-jar needs a Java runtime: {java!r} is not on PATH "
            "(Debian: apt-get install default-jre-headless)"
        )
    return java_path


def check_runtime(synoptic_jar: str | None = None, java: str = "java") -> tuple[str, str]:
    """The jar and the Java runtime the engine would run, or the error it would raise: callers check
    this before reading input, so a missing jar is said at once rather than after a long parse."""
    return find_jar(synoptic_jar), find_java(java)


def infer_synoptic_jar(
    sequences: Sequence[Sequence[str]],
    synoptic_jar: str | None = None,
    java: str = "java",
    timeout: float = DEFAULT_TIMEOUT,
    coarsen: bool = True,
    workdir: str | None = None,
    seed: int = DEFAULT_SEED,
    java_options: Sequence[str] = (),
) -> InferenceResult:
    """Run Synoptic on ``sequences``; ``java_options`` go to the JVM before ``-jar`` (e.g. ``-Xmx8g``)."""
    jar, java_path = check_runtime(synoptic_jar, java)
    with tempfile.TemporaryDirectory(prefix="quicsm-synoptic-", dir=workdir) as tmp:
        log_path = os.path.join(tmp, "traces.log")
        prefix = os.path.join(tmp, "model")
        with open(log_path, "w", encoding="utf-8") as fh:
            dump_synoptic_log(sequences, fh)
        args = synoptic_arguments(log_path, prefix, coarsen=coarsen, seed=seed, json_only=True)
        cmd = [java_path, *java_options, "-jar", jar, *args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp, check=False)
        except subprocess.TimeoutExpired:
            raise InferenceError(
                f"Synoptic did not finish within {timeout:g} s (stopped; give it longer with --timeout SECONDS)"
            ) from None
        output = f"{proc.stdout}\n{proc.stderr}"
        if JAVA17_FAILURE in output:
            raise InferenceError(
                f"{jar}: this Synoptic fails on the Java at {java_path} (Java 17 and newer break its "
                "NamedMatcher.toMatchResult); run it with an older JDK (--java PATH) or rebuild it with that "
                "method returning the matcher itself (docs/inference.md)"
            )
        model_json = prefix + ".json"
        if proc.returncode != 0 or not os.path.exists(model_json):
            tail = output.strip().splitlines()[-5:]
            raise InferenceError(
                f"Synoptic failed (exit {proc.returncode}, no {os.path.basename(model_json)}): " + " | ".join(tail)
            )
        model = read_synoptic_json(model_json)
    nodes = event_nodes(model, sequences, jar)
    _, offsets = encode_sequences(sequences).framed()
    details = {
        "command": cmd[1:],
        "synoptic_nodes": len(model.labels),
        "seed": seed,
        "java_options": list(java_options),
    }
    return result_from_nodes("synoptic-jar", model.labels, nodes, offsets, details, coarsen=coarsen, seed=seed)
