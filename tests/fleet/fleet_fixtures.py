"""Fleet logs for the tests: many files of many short connections, so state sequences repeat.

Not a conftest.py: tests elsewhere import the root conftest by name, and a second one would shadow it.
"""

from __future__ import annotations

import ctypes
import gzip
import os
import random
from pathlib import Path

from quicsm.traces.contract import format_line

CUBIC_NEXT = {
    "Init": ["SlowStart"],
    "SlowStart": ["CongestionAvoidance", "Recovery"],
    "CongestionAvoidance": ["Recovery", "ApplicationLimited"],
    "ApplicationLimited": ["CongestionAvoidance"],
    "Recovery": ["CongestionAvoidance", "SlowStart"],
}
NOISE = "[1122/143015.123456:INFO:quic_dispatcher.cc(520)] Processing packet of length 1350"


def fleet_lines(conns: int, seed: int, max_steps: int = 4) -> list[str]:
    """Interleaved connections, each a short random Cubic walk (so many connections share a sequence)."""
    rng = random.Random(seed)
    plans = {}
    for c in range(conns):
        state, walk = "Init", []
        for _ in range(rng.randint(1, max_steps)):
            state = rng.choice(CUBIC_NEXT[state])
            walk.append(state)
        plans[c] = [walk, "Init", rng.randrange(10**6)]
    lines = []
    live = list(plans)
    while live:
        c = rng.choice(live)
        walk, frm, t = plans[c]
        t += rng.randrange(100, 50_000)
        if walk:
            to = walk.pop(0)
            lines.append(
                "prefix: "
                + format_line(conn=f"0x{c:x}", t_us=t, cc="cubic", frm=frm, to=to, cwnd=rng.randrange(14600, 500_000))
            )
            plans[c] = [walk, to, t]
        else:
            lines.append(format_line(conn=f"0x{c:x}", t_us=t, cc="cubic", ev="close"))
            live.remove(c)
        if rng.random() < 0.5:
            lines.append(NOISE)
    return lines


def make_fleet_dir(tmp_path: Path) -> Path:
    """Six logs (two gzipped) in one directory."""
    d = tmp_path / "fleet"
    d.mkdir()
    for i in range(6):
        text = "".join(line + "\n" for line in fleet_lines(40, seed=i)).encode()
        if i % 3 == 2:
            (d / f"server{i}.log.gz").write_bytes(gzip.compress(text))
        else:
            (d / f"server{i}.log").write_bytes(text)
    return d


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def worker_state(_: object) -> tuple[int, int, str | None, int]:
    """A local worker's (here, not in the test module: that imports the CLI, which sets malloc thresholds
    on import): pid, parent pid, OPENBLAS_NUM_THREADS, and how many mmapped blocks a 16 MiB malloc added (0: from the heap)."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _Mallinfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = libc.mallinfo2().hblks
    block = libc.malloc(16 << 20)
    mapped = libc.mallinfo2().hblks - before
    libc.free(block)
    return os.getpid(), os.getppid(), os.environ.get("OPENBLAS_NUM_THREADS"), mapped
