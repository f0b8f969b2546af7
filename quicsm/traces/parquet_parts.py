"""One Parquet file from row groups encoded apart: each group is written as its own small Parquet file
(a *part*, in memory, by any thread or process), and the parts' column chunks are copied one after the
other into the output, behind one footer whose offsets are moved to where the chunks landed. Encoding,
the costly step, then runs beside the reader on the second core, in several threads or worker
processes, and the file is the same bytes however many encoded it.

The footer is Parquet's ``FileMetaData`` in Thrift's compact protocol; only its offsets, row count and
row-group ordinals change, so it is decoded into a plain tree (:func:`_decode`) and encoded back
(:func:`_encode`) without a schema of the Thrift structs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO, Any

__all__ = ["Part", "Splicer", "encode_part"]

MAGIC = b"PAR1"

# compact protocol types
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)

# field ids (parquet.thrift)
_FMD_NUM_ROWS, _FMD_ROW_GROUPS = 3, 4
_RG_COLUMNS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 5, 7
_CC_FILE_OFFSET, _CC_META, _CC_OFFSET_INDEX, _CC_COLUMN_INDEX = 2, 3, 4, 6
_CMD_DATA_PAGE, _CMD_INDEX_PAGE, _CMD_DICT_PAGE, _CMD_BLOOM = 9, 10, 11, 14


@dataclass(slots=True)
class Part:
    """One row group encoded as a Parquet file of its own: its column chunks' bytes (what follows the
    leading magic, up to the footer) and its decoded footer."""

    chunks: bytes
    footer: list[Any]


def encode_part(table: Any, schema: Any, options: dict[str, Any]) -> Part:
    """``table`` as one row group, written as a Parquet file in memory with the store's writer options
    (None: no row group, the schema alone)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, schema, **options) as writer:
        if table is not None:
            writer.write_table(table, row_group_size=max(1, table.num_rows))
    data = sink.getvalue().to_pybytes()
    size = struct.unpack_from("<i", data, len(data) - 8)[0]
    start = len(data) - 8 - size
    footer, end = _read_struct(memoryview(data), start)
    if end != len(data) - 8 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise ValueError("unexpected Parquet part layout")
    return Part(data[4:start], footer)


class Splicer:
    """Parts written one after the other into ``out`` (a binary file at its start), then the footer:
    the file one writer writes, but for the footer's bytes being the parts' own."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.at = len(MAGIC)
        self.head: list[Any] | None = None
        self.groups: list[Any] = []
        self.rows = 0
        out.write(MAGIC)

    def add(self, part: Part) -> None:
        shift = self.at - len(MAGIC)
        if self.head is None:
            self.head = part.footer
        for group in _field(part.footer, _FMD_ROW_GROUPS, (_STRUCT, []))[1]:
            self.groups.append(_moved_group(group, shift, len(self.groups)))
        self.rows += _field(part.footer, _FMD_NUM_ROWS, 0)
        self.out.write(part.chunks)
        self.at += len(part.chunks)

    def close(self, schema_of: Part | None = None) -> None:
        """Write the footer (after one part at least). ``schema_of``: a part of no rows written with the
        schema as it stands at the end (Arrow metadata known only then), whose footer is taken but for the
        rows: the file one writer opened with that schema writes."""
        if self.head is None and schema_of is None:
            raise ValueError("no part to close a Parquet file with")
        footer = [
            (
                fid,
                kind,
                self.rows if fid == _FMD_NUM_ROWS else (_STRUCT, self.groups) if fid == _FMD_ROW_GROUPS else value,
            )
            for fid, kind, value in (schema_of.footer if schema_of is not None else self.head or [])
        ]
        body = bytearray()
        _write_struct(body, footer)
        self.out.write(bytes(body))
        self.out.write(struct.pack("<i", len(body)))
        self.out.write(MAGIC)


def _field(fields: list[Any], fid: int, default: Any) -> Any:
    for f, _, value in fields:
        if f == fid:
            return value
    return default


def _moved_group(group: list[Any], shift: int, ordinal: int) -> list[Any]:
    """A row group's metadata with its offsets moved by ``shift`` bytes and its ordinal set."""
    out = []
    for fid, kind, value in group:
        if fid == _RG_COLUMNS:
            value = (value[0], [_moved_chunk(c, shift) for c in value[1]])
        elif fid == _RG_FILE_OFFSET:
            value += shift
        elif fid == _RG_ORDINAL:
            value = ordinal
        out.append((fid, kind, value))
    return out


def _moved_chunk(chunk: list[Any], shift: int) -> list[Any]:
    out = []
    for fid, kind, value in chunk:
        if fid in (_CC_FILE_OFFSET, _CC_OFFSET_INDEX, _CC_COLUMN_INDEX) and value:  # (Arrow writes file_offset 0)
            value += shift
        elif fid == _CC_META:
            value = [
                (f, k, v + shift if f in (_CMD_DATA_PAGE, _CMD_INDEX_PAGE, _CMD_DICT_PAGE, _CMD_BLOOM) else v)
                for f, k, v in value
            ]
        out.append((fid, kind, value))
    return out


# ---- Thrift compact protocol: a struct as [(field id, type, value)], a list as (element type, [values])


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, at
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _read_value(data: memoryview, at: int, kind: int) -> tuple[Any, int]:
    if kind in (_TRUE, _FALSE):  # a bool in a list or map: one byte
        return data[at] == 1, at + 1
    if kind == _BYTE:
        return struct.unpack_from("<b", data, at)[0], at + 1
    if kind in (_I16, _I32, _I64):
        raw, at = _varint(data, at)
        return _zigzag(raw), at
    if kind == _DOUBLE:
        return struct.unpack_from("<d", data, at)[0], at + 8
    if kind == _BINARY:
        n, at = _varint(data, at)
        return bytes(data[at : at + n]), at + n
    if kind in (_LIST, _SET):
        head = data[at]
        at += 1
        n, elem = head >> 4, head & 0x0F
        if n == 15:
            n, at = _varint(data, at)
        items = []
        for _ in range(n):
            item, at = _read_value(data, at, elem)
            items.append(item)
        return (elem, items), at
    if kind == _MAP:
        n, at = _varint(data, at)
        if not n:
            return (0, []), at
        types = data[at]
        at += 1
        pairs = []
        for _ in range(n):
            k, at = _read_value(data, at, types >> 4)
            v, at = _read_value(data, at, types & 0x0F)
            pairs.append((k, v))
        return (types, pairs), at
    if kind == _STRUCT:
        return _read_struct(data, at)
    raise ValueError(f"Thrift compact type {kind}")


def _read_struct(data: memoryview, at: int) -> tuple[list[Any], int]:
    fields: list[Any] = []
    last = 0
    while True:
        head = data[at]
        at += 1
        if head == 0:
            return fields, at
        kind, delta = head & 0x0F, head >> 4
        if delta:
            fid = last + delta
        else:
            raw, at = _varint(data, at)
            fid = _zigzag(raw)
        if kind in (_TRUE, _FALSE):
            value: Any = kind == _TRUE
        else:
            value, at = _read_value(data, at, kind)
        fields.append((fid, kind, value))
        last = fid


def _put_varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_value(out: bytearray, kind: int, value: Any) -> None:
    if kind in (_TRUE, _FALSE):
        out.append(1 if value else 2)
    elif kind == _BYTE:
        out += struct.pack("<b", value)
    elif kind in (_I16, _I32, _I64):
        _put_varint(out, (value << 1) ^ (value >> 63))
    elif kind == _DOUBLE:
        out += struct.pack("<d", value)
    elif kind == _BINARY:
        _put_varint(out, len(value))
        out += value
    elif kind in (_LIST, _SET):
        elem, items = value
        if len(items) < 15:
            out.append(len(items) << 4 | elem)
        else:
            out.append(0xF0 | elem)
            _put_varint(out, len(items))
        for item in items:
            _write_value(out, elem, item)
    elif kind == _MAP:
        types, pairs = value
        _put_varint(out, len(pairs))
        if pairs:
            out.append(types)
            for k, v in pairs:
                _write_value(out, types >> 4, k)
                _write_value(out, types & 0x0F, v)
    elif kind == _STRUCT:
        _write_struct(out, value)
    else:
        raise ValueError(f"Thrift compact type {kind}")


def _write_struct(out: bytearray, fields: list[Any]) -> None:
    last = 0
    for fid, kind, value in fields:
        wire = (_TRUE if value else _FALSE) if kind in (_TRUE, _FALSE) else kind
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | wire)
        else:
            out.append(wire)
            _put_varint(out, (fid << 1) ^ (fid >> 63))
        if kind not in (_TRUE, _FALSE):
            _write_value(out, kind, value)
        last = fid
    out.append(0)
