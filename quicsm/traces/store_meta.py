"""Per-trace metadata of a Parquet store, read back without a JSON decode and a Trace per connection.

The writer stores each trace's metadata as one JSON text, ``{"cc":S,"id":S,"implementation":V,"key":S,
"labels":...,"sources":...,"version":V}`` (sorted keys, no spaces). A trace owns its cc, id and key;
the rest is what the traces of one input share. Reading splits the texts at their first four ``,"``:
that pair never occurs raw inside a JSON string, so once cc, id and key are checked to be single
strings and the implementation member to be whole, the cuts are the top-level ones, and decoding the
parts gives what decoding the whole text gives. Three ways, fastest first, each falling back to the
next on anything it does not handle:

1. on the Arrow buffers with NumPy, when every owned string is plain (no escape), the shared parts
   decoded once per run of equal ones (a store written by quicsm from logs: one run per input);
2. text by text in Python, any owned strings, any number of shared parts;
3. each text decoded whole (other tools, other key orders), which is also where errors are raised.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from quicsm.traces.events import Trace

if TYPE_CHECKING:
    import numpy as np

    from quicsm.traces.columnar import SharedMeta

__all__ = ["shell", "stored_meta", "split_texts", "decode_whole"]

SHARED_KEYS = frozenset({"implementation", "labels", "sources", "version"})
Owned = tuple[list[str], list[str], list[str]]
"""Per trace: ids, keys, ccs."""


def shell(m: dict[str, Any]) -> Trace:
    """A trace without events from its decoded metadata."""
    return Trace(
        id=m["id"],
        cc=m["cc"],
        events=[],
        key=m.get("key", ""),
        implementation=m.get("implementation"),
        version=m.get("version"),
        sources=tuple(m.get("sources", ())),
        labels=dict(m.get("labels") or {}),
    )


def stored_meta(values: Any, pick: np.ndarray) -> tuple[Owned, SharedMeta]:
    """Trace ``i``'s metadata is ``values[pick[i]]`` (an Arrow string array, the column's dictionary)."""
    split = _split_buffers(values, pick) if len(pick) else None
    if split is not None:
        return split
    every = values.to_pylist()
    texts = [every[i] for i in pick.tolist()]
    return split_texts(texts) or decode_whole(texts)


def decode_whole(texts: list[str]) -> tuple[Owned, SharedMeta]:
    from quicsm.traces.columnar import SharedMeta

    metas = json.loads("[" + ",".join(texts) + "]") if texts else []  # one decode call for the batch
    if len(metas) != len(texts):  # a text holding a comma-joined list: decode one by one (and fail there)
        metas = [json.loads(m) for m in texts]
    shells = [shell(m) for m in metas]
    owned = ([t.id for t in shells], [t.key for t in shells], [t.cc for t in shells])
    return owned, SharedMeta(shells, list(range(len(shells))))


def split_texts(texts: list[str]) -> tuple[Owned, SharedMeta] | None:
    """Way 2; None when a text is not in the writer's layout."""
    owned: list[str] = []
    shared: dict[str, int] = {}
    heads: set[str] = set()
    marks: set[str] = set()
    of = []
    for t in texts:
        p = t.split(',"', 4)  # {"cc":S | id":S | implementation":V | key":S | the shared rest
        if len(p) < 4:
            return None
        last = len(p) == 4  # the key is the last member
        marks.add(p[0][:6] + p[1][:4] + p[3][:5] + t[-1])
        owned += (p[0][6:], p[1][4:], p[3][5:-1] if last else p[3][5:])
        heads.add(p[2])
        of.append(shared.setdefault(p[2] + "}" if last else f'{p[2]},"{p[4]}', len(shared)))
    if not texts or marks != {'{"cc":id":key":}'}:
        return None
    try:
        strings = json.loads("[" + ",".join(owned) + "]")
        if len(strings) != len(owned) or not all(type(x) is str for x in strings):
            return None
    except ValueError:
        return None  # decoded whole, where the error is reported
    return _with_shared((strings[1::3], strings[2::3], strings[0::3]), heads, list(shared), of)


def _with_shared(owned: Owned, heads: set[str], shared: list[str], of: list[int]) -> tuple[Owned, SharedMeta] | None:
    """The owned strings with the shared parts decoded (``implementation":V`` heads, ``implementation":V,
    "labels":...}`` texts), or None when a part is not what the layout says it is."""
    from quicsm.traces.columnar import SharedMeta

    try:
        if not all(json.loads('{"' + h + "}").keys() == {"implementation"} for h in heads):
            return None  # the implementation member is not whole: a later cut may be inside it
        common = [json.loads('{"' + text) for text in shared]
    except ValueError:
        return None
    if not all(c.keys() <= SHARED_KEYS for c in common):
        return None
    return owned, SharedMeta([shell({"id": "", "cc": "", **c}) for c in common], of)


_QUOTE, _BACKSLASH = 34, 92


def _split_buffers(values: Any, pick: np.ndarray) -> tuple[Owned, SharedMeta] | None:
    """Way 1: the cuts, checks and owned strings of a whole batch as array operations on the bytes."""
    import numpy as np
    import pyarrow as pa

    if values.type != pa.string() or values.null_count:
        return None
    bufs = values.buffers()
    offsets = np.frombuffer(bufs[1], np.int32, count=values.offset + len(values) + 1)[values.offset :]
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    start, end = offsets[pick].astype(np.int64), offsets[pick + 1].astype(np.int64)
    if (end - start < 8).any():
        return None
    pairs = np.flatnonzero((data[:-1] == ord(",")) & (data[1:] == _QUOTE))  # every ," in the buffer
    first = np.searchsorted(pairs, start)
    if (first + 4 > len(pairs)).any():
        return None
    cuts = pairs[first[:, None] + np.arange(4)]  # increasing, from the text's start on
    if (cuts[:, 3] >= end).any() or (cuts[:, 2] + 7 > cuts[:, 3]).any() or (cuts[:, 0] + 6 > cuts[:, 1]).any():
        return None  # fewer than four cuts (a last key, other layouts), or no room for a mark: way 2

    def has(at: np.ndarray, mark: bytes) -> bool:
        return bool((data[at[:, None] + np.arange(len(mark))] == np.frombuffer(mark, np.uint8)).all())

    if not (has(start, b'{"cc":') and has(cuts[:, 0], b',"id":') and has(cuts[:, 2], b',"key":')):
        return None
    if not (data[end - 1] == ord("}")).all():
        return None
    # the owned strings must be plain: quoted, with no quote, backslash or control byte inside
    a = np.concatenate([start + 6, cuts[:, 0] + 6, cuts[:, 2] + 7])  # cc, id, key: their opening quote
    b = np.concatenate([cuts[:, 0], cuts[:, 1], cuts[:, 3]])  # after their closing quote
    if (b - a < 2).any() or not ((data[a] == _QUOTE) & (data[b - 1] == _QUOTE)).all():
        return None
    if int((b - a).sum()) >= 1 << 31:
        return None  # beyond one Arrow string array's offsets
    content = _gather(data, a + 1, b - 1)
    if ((content == _QUOTE) | (content == _BACKSLASH) | (content < 32)).any():
        return None
    try:
        strings = _strings(content, b - a - 2)
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    n = len(pick)
    # the shared parts (from the implementation member on, minus the key): a text whose part equals the
    # one before it joins its run, and each run's part is decoded once (a batch holds one part per input)
    spans = [(cuts[:, 1] + 2, cuts[:, 2]), (cuts[:, 3], end)]  # implementation":V | ,"labels":...}
    changed = np.ones(n, bool)
    changed[1:] = False
    for lo, hi in spans:
        changed[1:] |= (hi - lo)[1:] != (hi - lo)[:-1]
    for lo, hi in spans:
        same = np.flatnonzero(~changed)
        if len(same):
            diff = _gather(data, lo[same], hi[same]) != _gather(data, lo[same - 1], hi[same - 1])
            starts = np.cumsum(hi[same] - lo[same]) - (hi[same] - lo[same])
            changed[same] = np.add.reduceat(diff, starts) > 0
    runs = np.flatnonzero(changed)
    try:
        heads = [data[lo:hi].tobytes().decode() for lo, hi in zip(spans[0][0][runs], spans[0][1][runs])]
        rests = [data[lo:hi].tobytes().decode() for lo, hi in zip(spans[1][0][runs], spans[1][1][runs])]
    except UnicodeDecodeError:
        return None
    shared: dict[str, int] = {}
    per_run = [shared.setdefault(h + r, len(shared)) for h, r in zip(heads, rests)]
    of = np.repeat(per_run, np.diff(np.append(runs, n))).tolist()
    owned = (strings[n : 2 * n], strings[2 * n :], strings[:n])
    return _with_shared(owned, set(heads), list(shared), of)


def _gather(data: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The bytes ``data[a[i]:b[i]]`` for every i, one after another."""
    import numpy as np

    lengths = b - a
    starts = np.cumsum(lengths) - lengths
    return data[np.repeat(a - starts, lengths) + np.arange(int(lengths.sum()))]


def _strings(content: np.ndarray, lengths: np.ndarray) -> list[str]:
    """``content`` cut into strings of ``lengths`` bytes (UTF-8, checked)."""
    import numpy as np
    import pyarrow as pa

    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    arr = pa.Array.from_buffers(
        pa.string(), len(lengths), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(content)]
    )
    arr.validate(full=True)
    return arr.to_pylist()
