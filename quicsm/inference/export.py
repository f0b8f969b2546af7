"""State sequences as input for the original Synoptic, and the command line that reads them.

The log holds one event per line, ``<trace> <state>``; Synoptic's ``-r`` regular expression takes the
trace number into a ``trace`` field and the state into ``TYPE``, and ``-m '\\k<trace>'`` maps each line
to its trace (Synoptic's partition mapping), so traces need not be contiguous or separated. Lines are
in time order within a trace (Synoptic's implicit LOGTIME ordering). Option names follow Synoptic's
``SynopticOptions``: ``-r`` (regExps), ``-m`` (partitionRegExp), ``-o`` (outputPathPrefix; the final
model is written to ``<prefix>.dot``), ``--randomSeed`` (always given: Synoptic shuffles counterexamples
and candidate splits, so without a seed two runs may draw different models), ``-j`` (outputJSON: the
model with every event's partition, ``<prefix>.json``), ``--noModelOutput``, ``--noCoarsening``,
``-q`` (logLvlQuiet).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

from quicsm.errors import InferenceError
from quicsm.inference.model import INITIAL, TERMINAL

__all__ = [
    "EVENT_REGEX",
    "EXPORT_FORMATS",
    "PARTITION_MAPPING",
    "dump_synoptic_log",
    "model_prefix",
    "synoptic_arguments",
    "synoptic_command_line",
]

EVENT_REGEX = r"^(?<trace>\d+) (?<TYPE>.+)$"
PARTITION_MAPPING = r"\k<trace>"
EXPORT_FORMATS: tuple[str, ...] = ("synoptic",)
DEFAULT_SEED = 1
"""Synoptic's ``--randomSeed`` when none is asked for: runs repeat exactly."""


def synoptic_arguments(
    log_path: str,
    output_prefix: str,
    *,
    coarsen: bool = True,
    quiet: bool = True,
    seed: int = DEFAULT_SEED,
    json_only: bool = False,
) -> list[str]:
    """Synoptic's own arguments (after ``java -jar synoptic.jar``) to learn a model from our log.

    ``json_only`` asks for the JSON model alone (what the ``synoptic-jar`` engine reads) instead of DOT.
    """
    args = ["-r", EVENT_REGEX, "-m", PARTITION_MAPPING, "-o", output_prefix, f"--randomSeed={seed}"]
    if json_only:
        args += ["-j", "--noModelOutput"]
    if not coarsen:
        args.append("--noCoarsening")
    if quiet:
        args.append("-q")
    return [*args, log_path]


def synoptic_command_line(log_path: str, output_prefix: str) -> list[str]:
    return ["java", "-jar", "synoptic.jar", *synoptic_arguments(log_path, output_prefix, quiet=False)]


def dump_synoptic_log(sequences: Sequence[Sequence[str]], fh: IO[str]) -> int:
    """Write the sequences in the form :data:`EVENT_REGEX` reads; returns the number of lines."""
    lines = 0
    for t, seq in enumerate(sequences):
        for state in seq:
            if not state or "\n" in state or state in (INITIAL, TERMINAL):
                raise InferenceError(
                    f"trace {t}: state {state!r} cannot be written for Synoptic "
                    "(empty, multi-line, or a name Synoptic reserves)"
                )
            fh.write(f"{t} {state}\n")
        lines += len(seq)
    return lines


def model_prefix(log_path: str) -> str:
    """Where Synoptic should write the model for a log: ``cubic.log`` -> ``cubic`` (model ``cubic.dot``)."""
    return log_path[: -len(".log")] if log_path.endswith(".log") else log_path + ".model"
