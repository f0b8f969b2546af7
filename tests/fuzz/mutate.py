"""Seeds (real inputs from tests/data and traces/, plus small synthesized ones) and byte mutators."""

from __future__ import annotations

import copy
import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path

from quicsm.traces.contract import format_line
from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[2]
MAX_INPUT = 1 << 13
"""Inputs are cut to this size: many small inputs find more than few large ones."""

TOKENS: tuple[bytes, ...] = (
    b"-",
    b"=",
    b" ",
    b"\t",
    b"\r",
    b"\x0b",
    b"\x0c",
    b"\n",
    b"\x00",
    b"\x1c",
    b"\x1f",
    b"\x85",
    "\u00a0".encode(),
    "\u0085".encode(),
    "\u2003".encode(),
    "\u3000".encode(),
    "\u2028".encode(),
    b"\xff\xfe",
    b"\xed\xa0\x80",
    b"QUICSM ",
    b"QUICSM v=1 ",
    b"v=1",
    b"v=2",
    b"conn=-",
    b"to=-",
    b"from=-",
    b"trigger=-",
    b"cc=-",
    b"t_us=-",
    b"ev=close",
    b"ev=update",
    b"ev=metrics",
    b"to=Init",
    b"from=Init",
    b"ssthresh=inf",
    b"Infinity",
    b"-Infinity",
    b"NaN",
    b"inf",
    b"1e999",
    b"1.5e3",
    b"-1",
    b"0",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551615",
    b"-9223372036854775809",
    b"1" * 4301,
    b"\xd9\xa1\xd9\xa2",  # Arabic-Indic digits
    b"1_000",
    b"+5",
    b"[" * 3000,
    b"{" * 3000,
    b'{"a":' * 3000,
    b"null",
    b"true",
    b"[]",
    b"{}",
    b'""',
    b'"x"',
    b"\x1f\x8b",
)


@dataclass(frozen=True, slots=True)
class Seeds:
    """Seed inputs by kind: ``log`` (text), ``sqlog``, ``qlog``, ``jsonl``, ``meta``, ``line`` (one payload)."""

    by_kind: dict[str, list[bytes]]

    def pick(self, rng: random.Random, kind: str) -> bytes:
        return rng.choice(self.by_kind[kind])


def _cut(data: bytes, rng: random.Random) -> bytes:
    """A window of whole lines of at most MAX_INPUT bytes (the head more often: headers live there)."""
    if len(data) <= MAX_INPUT:
        return data
    start = 0 if rng.random() < 0.5 else rng.randrange(len(data) - MAX_INPUT)
    nl = data.find(b"\n", start) + 1 if start else 0
    return data[nl : nl + MAX_INPUT]


def synth_log(n: int = 40) -> bytes:
    states = ["SlowStart", "CongestionAvoidance", "Recovery", "ApplicationLimited", "ProbeBw.Up", "Startup"]
    lines = []
    for i in range(n):
        frm = "Init" if i % 10 == 0 else states[i % len(states)]
        lines.append(
            f"2026/11/22 09:36:32.5{i:05d} "
            + format_line(conn=f"0x{i % 3:x}", t_us=1000 * i, cc="cubic", frm=frm, to=states[(i + 1) % 6], cwnd=i)
        )
        if i % 7 == 3:
            lines.append(f"noise line {i}")
        if i % 11 == 5:
            lines.append(f"QUICSM v=1 to=Recovery cc=bbr t_us={i} conn=k recovery=Growth extra_key=x")
    return ("\n".join(lines) + "\n").encode()


def synth_qlog() -> bytes:
    events = [
        {
            "time": 10.0 * i,
            "name": "recovery:congestion_state_updated",
            "data": {"old": "slow_start", "new": "recovery"},
        }
        for i in range(5)
    ] + [
        {"time": 55.5, "name": "recovery:metrics_updated", "data": {"congestion_window": 12000, "smoothed_rtt": 3.5}},
    ]
    doc = {
        "qlog_version": "0.3",
        "qlog_format": "JSON",
        "traces": [{"vantage_point": {"type": "server"}, "common_fields": {"ODCID": "abcd"}, "events": events}],
    }
    return json.dumps(doc).encode()


def load_seeds() -> Seeds:
    rng = random.Random(0)
    data = ROOT / "tests" / "data" / "quic-go-v0.65"
    logs = [synth_log(), gzip.decompress((data / "server.log.gz").read_bytes())]
    metas = []
    for i, p in enumerate(sorted((ROOT / "traces").rglob("server.log.gz"))):
        if i % 20 == 0:  # a sample of the real runs is enough
            logs.append(_cut(gzip.decompress(p.read_bytes()), rng))
            side = p.with_name("meta.json")
            if side.exists():
                metas.append(side.read_bytes())
    sqlog = gzip.decompress((data / "server.sqlog.gz").read_bytes())
    sqlogs = [sqlog[:MAX_INPUT], _cut(sqlog, rng)]
    for name in ("quiche-0.30.0-cubic/cubic.sqlog.gz", "neqo-cubic/neqo-cubic.sqlog.gz"):  # other stacks' shapes
        other = gzip.decompress((ROOT / "tests/data/qlog" / name).read_bytes())
        sqlogs += [other[:MAX_INPUT], _cut(other, rng)]
    for path in sorted((ROOT / "tests/data/metric-only").glob("*/*.sqlog.gz")):  # no state events (quinn, ngtcp2)
        other = gzip.decompress(path.read_bytes())
        sqlogs += [other[:MAX_INPUT], _cut(other, rng)]
    qlogs = [synth_qlog()]
    foreign = SHARED / "reference/qlog-samples/picoquic/qlog_trace_ref.qlog"
    if foreign.exists():  # beside the checkout on the project's machines and in CI
        qlogs.append(foreign.read_bytes())
    lines = [ln.split(b"QUICSM ", 1)[1] for log in logs for ln in log.splitlines() if b"QUICSM " in ln][:400]
    jsonl = [_trace_file(log) for log in logs[:3]]
    return Seeds(
        {
            "log": logs,
            "sqlog": sqlogs,
            "qlog": qlogs,
            "jsonl": jsonl,
            "meta": metas or [b'{"implementation": "x", "labels": {"a": "b"}}'],
            "line": lines,
            "baseline": _baselines(logs[:2]),
        }
    )


def _baselines(logs: list[bytes]) -> list[bytes]:
    """Baseline bundles (quicsm check) as plain JSON: a few connections of the seed logs, one set and two."""
    import tempfile

    from quicsm.check.bundle import bundle_bytes, make_baseline
    from quicsm.compare.sets import load_rows

    out = []
    with tempfile.TemporaryDirectory() as d:
        for i, log in enumerate(logs):
            src = Path(d) / f"s{i}.log"
            src.write_bytes(log)
            rows = [r for r in load_rows([str(src)]).rows if r.states][:4]
            out.append(gzip.decompress(bundle_bytes(make_baseline([("a", "seed", rows)]))))
            two = make_baseline([("a", "seed", rows[:2]), ("b", "seed", rows[2:] or rows)], split_by="scenario")
            out.append(gzip.decompress(bundle_bytes(two)))
    return out


def _trace_file(log: bytes) -> bytes:
    import tempfile

    from quicsm.traces import iter_traces, write_traces

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "s.log"
        src.write_bytes(log)
        out = Path(d) / "t.jsonl"
        write_traces(list(iter_traces([str(src)]))[:20], str(out))
        return _cut(out.read_bytes(), random.Random(1))


JSON_VALUES: tuple[object, ...] = (
    None,
    True,
    0,
    -1,
    1.5e3,
    1e300,
    -0.0,
    (1 << 63) - 1,
    1 << 63,
    (1 << 64) - 1,
    -(1 << 63) - 1,
    10**400,
    "",
    "x",
    "inf",
    "Infinity",
    "NaN",
    "18446744073709551615",
    "slow_start",
    "recovery",
    "congestion_avoidance",
    "application_limited",
    "SlowStart",
    "Init",
    "recovery:congestion_state_updated",
    "recovery:metrics_updated",
    "transport:packet_lost",
    "\u2028",
    "\x1b]0;x\x07",
    "\ud800",
    "s" * 300,
    [],
    {},
    [1, "a", None],
    {"new": "recovery"},
)
"""Odd JSON values that :func:`mutate_json` puts in a document."""


def mutate_json(data: bytes, rng: random.Random) -> bytes | None:
    """One to four edits that keep a JSON document JSON (None if ``data`` is not JSON): a value swapped for
    an odd one, a member or element dropped or doubled, a key renamed, events swapped. Byte edits seldom
    leave a document JSON, and only a document that is JSON is held to the object reader (the oracle)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict | list):
        return None
    for _ in range(rng.choice((1, 1, 2, 4))):
        nodes: list[dict[str, object] | list[object]] = []
        todo: list[object] = [doc]
        while todo:  # every container, in document order
            node = todo.pop()
            if isinstance(node, dict | list) and node:
                nodes.append(node)
                todo.extend(node.values() if isinstance(node, dict) else node)
        if not nodes:
            break
        node = rng.choice(nodes)
        keys: list[object] = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = rng.choice(keys)
        op = rng.randrange(5)
        if op == 0 or op == 1:
            node[key] = copy.deepcopy(rng.choice(JSON_VALUES))  # type: ignore[index]
        elif op == 2:
            del node[key]  # type: ignore[arg-type]
        elif op == 3 and isinstance(node, list):
            node.insert(int(key), copy.deepcopy(node[int(key)]))  # type: ignore[call-overload]
        elif op == 3 and isinstance(node, dict):
            node[rng.choice((str(key).upper(), str(key) + "_", "x"))] = node.pop(str(key))
        elif isinstance(node, list):
            other = rng.randrange(len(node))
            node[int(key)], node[other] = node[other], node[int(key)]  # type: ignore[call-overload]
    indent = rng.choice((None, None, 1))
    return json.dumps(doc, indent=indent, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def mutate(data: bytes, rng: random.Random, seeds: Seeds, kind: str) -> bytes:
    """One to eight random edits: bit flips, byte edits, tokens, splices, line shuffles, truncation. A JSON
    document (kind ``qlog``) is kept whole (cut anywhere it stops being JSON), and half of its mutants are
    made by :func:`mutate_json` instead."""
    limit = MAX_INPUT * 2 if kind != "qlog" else max(MAX_INPUT * 2, len(data) + MAX_INPUT)
    if kind == "qlog" and rng.random() < 0.5:
        edited = mutate_json(data, rng)
        if edited is not None:
            return edited[:limit]
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 4, 8))):
        op = rng.randrange(10)
        n = len(buf)
        at = rng.randrange(n + 1) if n else 0
        if op == 0 and n:
            buf[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[rng.randrange(n)] = rng.randrange(256)
        elif op == 2:
            buf[at:at] = rng.choice(TOKENS)
        elif op == 3 and n:
            # replace the token at a random spot (a field value, usually)
            end = at
            while end < n and buf[end] not in b" \n=,:":
                end += 1
            buf[at:end] = rng.choice(TOKENS)
        elif op == 4 and n:
            del buf[at : at + rng.randrange(1, 64)]
        elif op == 5:
            other = seeds.pick(rng, kind)
            a = rng.randrange(len(other) + 1)
            buf[at:at] = other[a : a + rng.randrange(1, 512)]
        elif op == 6 and n:
            lines = bytes(buf).split(b"\n")
            rng.shuffle(lines)
            buf = bytearray(b"\n".join(lines))
        elif op == 7 and n:
            del buf[rng.randrange(n) :]
        elif op == 8 and n:
            a = rng.randrange(n)
            piece = buf[a : a + rng.randrange(1, 256)]
            buf[at:at] = piece * rng.randrange(1, 8)
        elif op == 9:
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    return bytes(buf[:limit])


def gzip_variant(data: bytes, rng: random.Random) -> bytes:
    """Gzip the input, then maybe damage the compressed bytes (flip, cut, append garbage or a member)."""
    z = bytearray(gzip.compress(data, compresslevel=rng.choice((1, 6, 9)), mtime=0))
    op = rng.randrange(6)
    if op == 0 and len(z) > 20:
        z[rng.randrange(10, len(z))] ^= 1 << rng.randrange(8)
    elif op == 1:
        del z[rng.randrange(len(z)) :]
    elif op == 2:
        z += rng.choice((b"\x00" * 8, b"garbage", gzip.compress(b"QUICSM v=1 conn=z t_us=1 cc=cubic to=A\n")))
    elif op == 3 and len(z) > 20:
        del z[rng.randrange(10, len(z)) :: 2][:8]
    return bytes(z)
