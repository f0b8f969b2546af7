"""Arrow arrays built straight from NumPy buffers and Python strings.

``pyarrow.array`` on an ndarray imports ``numpy.ma`` (masked arrays), and on a list of strings tries
pandas; in a one-shot ``quicsm parse`` those imports cost more than converting the data. These build
the same arrays from their buffers (validity bitmap, values, offsets), with no copy of NumPy values
that already have the right dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ints", "strings", "dictionary"]


def _validity(mask: np.ndarray | None) -> tuple[Any, int]:
    """Arrow's validity bitmap (bit set = present) for ``mask`` (True = null), and the null count."""
    import pyarrow as pa

    if mask is None:
        return None, 0
    nulls = int(np.count_nonzero(mask))
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(~mask, bitorder="little")), nulls


def ints(values: np.ndarray, arrow_type: Any, mask: np.ndarray | None = None) -> Any:
    """An Arrow integer array of ``arrow_type`` holding ``values`` (null where ``mask`` is True)."""
    import pyarrow as pa

    data = np.ascontiguousarray(values, dtype=np.dtype(arrow_type.to_pandas_dtype()))
    validity, nulls = _validity(mask)
    return pa.Array.from_buffers(arrow_type, len(data), [validity, pa.py_buffer(data)], null_count=nulls)


def strings(values: list[str]) -> Any:
    """An Arrow UTF-8 string array of ``values`` (no nulls)."""
    import pyarrow as pa

    encoded = [v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    if offsets[-1] >= 1 << 31:  # beyond int32 offsets: let Arrow split or widen
        return pa.array(values, pa.string())
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers, null_count=0)


def dictionary(indices: np.ndarray, index_type: Any, values: list[str], mask: np.ndarray | None = None) -> Any:
    """A dictionary-encoded string array: ``values[indices]``, null where ``mask`` is True."""
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(ints(indices, index_type, mask), strings(values))
