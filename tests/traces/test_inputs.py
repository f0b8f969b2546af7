"""Inputs: trace-id scopes are linear in the number of files, small in memory, and equal the pairwise
rule they replace."""

from __future__ import annotations

import os
import random
import time
import tracemalloc

from quicsm.traces.inputs import trace_scopes


def pairwise_scopes(paths: list[str]) -> dict[str, str]:
    """The rule as first written (quadratic): a path's shortest suffix no other path shares."""
    names = {}
    for p in paths:
        parts = os.path.normpath(p).split(os.sep)
        depth = 1
        while (
            depth < len(parts)
            and sum(1 for q in paths if os.path.normpath(q).split(os.sep)[-depth:] == parts[-depth:]) > 1
        ):
            depth += 1
        names[p] = "/".join(parts[-depth:])
    return names


def test_scopes_equal_the_pairwise_rule_on_colliding_paths() -> None:
    rng = random.Random(3)
    for _ in range(200):
        paths = [
            "/".join(rng.choice(["a", "b", "runs", "..", "."]) for _ in range(rng.randint(0, 3)))
            + "/"
            + rng.choice(["server.log", "x.log", "q.sqlog"])
            for _ in range(rng.randint(1, 12))
        ]
        paths += rng.sample(paths, min(len(paths), rng.randint(0, 2)))  # a path given twice
        assert trace_scopes(paths) == pairwise_scopes(paths), paths


def test_scopes_of_many_files_take_linear_time() -> None:
    paths = [f"in/host{i % 50:02d}/run{i % 7}/server.log" for i in range(350)]
    paths += [f"in/host{i % 50:02d}/conn-{i}.sqlog" for i in range(20_000)]
    started = time.process_time()  # CPU, not wall: other work on a shared machine does not count
    scopes = trace_scopes(paths)
    assert time.process_time() - started < 5  # linear: well under 1 s; the pairwise rule: 4 x 10^8 comparisons
    assert scopes["in/host07/conn-7.sqlog"] == "conn-7.sqlog"
    assert scopes["in/host07/run0/server.log"] == "host07/run0/server.log"
    assert len(set(scopes.values())) == len(scopes)


def test_scopes_of_many_files_take_little_memory_a_path() -> None:
    # issue 18: 10^6 files under 500 MB; the scopes once took 737 bytes a path at their peak (split
    # lists, suffix tuples, joined strings) and kept 106; now about 170 while counting names, and kept
    # only for paths whose names collide
    paths = [f"/data/fleet/day01/host{i % 50:02d}/server-{i:07d}.log" for i in range(100_000)]
    paths += [f"/data/fleet/runs/r{i}/server.log" for i in range(1_000)]  # names that collide: longer scopes
    tracemalloc.start()
    try:
        scopes = trace_scopes(paths)
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / len(paths) < 300, f"{peak / len(paths):.0f} bytes a path while counting"
    assert kept / len(paths) < 20, f"{kept / len(paths):.0f} bytes a path kept"  # only the colliding ones'
    assert scopes[paths[7]] == "server-0000007.log"
    assert scopes[paths[-1]] == "r999/server.log"
    assert len(set(scopes.values())) == len(scopes)
