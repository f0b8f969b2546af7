"""Checked decoding of the JSON files quicsm reads, against formats declared once as msgspec structs.

Each format (trace JSON Lines, model JSON, compare JSON, the patch-set manifest, check's bundle and
report) is a msgspec ``Struct`` beside the code that writes it: decoding validates against it, and
the JSON Schemas shipped in ``quicsm/schemas/`` are generated from it (tests/test_schemas.py holds
them in sync). msgspec was chosen for check's bundle first: one C pass decodes and validates, and its
errors carry the JSON path. A bad file is one :class:`~quicsm.errors.InputError` line: the file, the
path in it, and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import msgspec.inspect
import msgspec.toml

from quicsm.errors import InputError, QuicsmError

__all__ = ["checked", "described", "problem", "toml_line"]

T = TypeVar("T")
_AT_BYTE = re.compile(r"\(byte (\d+)\)$")
_AT_END = re.compile(r" - at `\$\.?([^`]*)`$")


def described(text: str) -> msgspec.Meta:
    """A Struct field's description (``Annotated[T, described(...)]``), shown in the generated JSON Schema."""
    return msgspec.Meta(description=text)


def problem(exc: msgspec.ValidationError, kind: Any = None) -> tuple[str, str]:
    """Where in the document (``nodes[3].visits``, ``scenario[1].rat``; empty at the top) and what is
    wrong, on one line. An unknown key is said at its own place, with the keys ``kind`` knows there; a
    missing one at its place too; a table's values (msgspec's ``[...]``) at the table's."""
    msg = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(exc))
    m = _AT_END.search(msg)
    where = (m.group(1) if m else "").replace("[...]", "")
    why = msg[: m.start()] if m else msg
    why = why[:1].lower() + why[1:]
    for said in ("object contains unknown field `", "object missing required field `"):
        if key := why.partition(said)[2].partition("`")[0]:
            known = _fields_at(kind, where) if said[7] == "c" else []
            why = "required key missing" if said[7] == "m" else f"unknown key (known: {', '.join(sorted(known))})"
            where = f"{where}.{key}" if where else key
    return where, why


def _fields_at(kind: Any, where: str) -> list[str]:
    """The keys of the Struct at ``where`` in ``kind`` (none when ``where`` holds no Struct)."""
    mi = msgspec.inspect
    t = mi.type_info(kind) if kind is not None else None
    for step in [s for m in _PLACE.finditer(where) for s in m.groups() if s is not None] + [""]:
        while isinstance(t, mi.Metadata | mi.UnionType | mi.DictType):  # a table's values: their Struct
            if isinstance(t, mi.UnionType):
                t = next((u for u in t.types if isinstance(u, mi.StructType | mi.ListType | mi.DictType)), None)
            else:
                t = t.type if isinstance(t, mi.Metadata) else t.value_type
        if isinstance(t, mi.StructType) and step:
            t = next((f.type for f in t.fields if f.encode_name == step), None)
        elif isinstance(t, mi.ListType) and step.isdigit():
            t = t.item_type
        elif step:
            return []
    return [f.encode_name for f in t.fields] if isinstance(t, mi.StructType) else []


_PLACE = re.compile(r"([^.\[\]]+)(?:\[(\d+)\])?")
_TOML_KEY = re.compile(r'\s*(["\']?)([A-Za-z0-9_-]+)\1\s*=')


def toml_line(text: str, where: str) -> int | None:
    """The line of a TOML document that holds ``where`` (a place as :func:`problem` names it:
    ``scenario[1].rate``): the key's line or the table's header; None when none is found (a dotted key)."""
    want = [(m[1], int(m[2]) if m[2] else None) for m in _PLACE.finditer(where)]
    count: dict[tuple[str, ...], int] = {}
    table: list[tuple[str, int | None]] = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.lstrip()
        if s.startswith("["):
            array = s.startswith("[[")
            names = [x.strip().strip("\"'") for x in s[2 if array else 1 : s.find("]")].split(".")]
            table = []
            for i, name in enumerate(names):
                key = tuple(names[: i + 1])
                if array and i == len(names) - 1:
                    count[key] = count.get(key, -1) + 1
                table.append((name, count.get(key)))
            here = table
        elif m := _TOML_KEY.match(s):
            here = [*table, (m[2], None)]
        else:
            continue
        if here == want:
            return n
    return None


def _at(source: str, line: int) -> str:
    """``FILE:LINE: `` (and what ``source`` says after the file: ``meta.json:1: run metadata: ``)."""
    file, sep, rest = source.partition(": ")
    return f"{file}:{line}: {rest}{sep}"


def checked(
    data: Any,
    kind: type[T],
    source: str,
    *,
    what: str = "JSON",
    error: type[QuicsmError] = InputError,
    name: Callable[[str], str] | None = None,
) -> T:
    """``data`` (JSON bytes or text, or objects already decoded; a TOML document when ``what`` is
    ``"TOML"``) as ``kind``; ``error`` (an InputError unless the caller's layer has its own) reading
    ``source[:line]: where: why`` when it does not hold the declared shape: the line of a TOML document's
    key, ``where`` as :func:`problem` names it or as ``name`` says it (``scenario 2 (b): rate``). The one
    translation of msgspec's errors: each condition has one wording."""
    try:
        if what == "TOML":
            return msgspec.toml.decode(data, type=kind)
        if isinstance(data, bytes | bytearray | memoryview | str):
            return msgspec.json.decode(data, type=kind)
        return msgspec.convert(data, kind)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise error(_said(exc, data, kind, source, what, name)) from None


def _said(exc: Exception, data: Any, kind: Any, source: str, what: str, name: Callable[[str], str] | None) -> str:
    """What :func:`checked` says of ``exc``."""
    pre = f"{source}: " if source else ""
    if isinstance(exc, msgspec.ValidationError):
        where, why = problem(exc, kind)
        line = None
        if what == "TOML":
            text = data if isinstance(data, str) else bytes(data).decode()
            line = toml_line(text, where) or toml_line(text, where.rpartition(".")[0])
        at = _at(source, line) if line else pre
        said = name(where) if name and where else where
        return f"{at}{said}: {why}" if said else f"{at}{why}"
    if isinstance(exc, msgspec.DecodeError):
        why = str(exc).removeprefix("Invalid TOML: ")
        at_byte = _AT_BYTE.search(why)
        if (at_byte or "truncated" in why) and isinstance(data, bytes | bytearray | memoryview | str):
            raw = data.encode() if isinstance(data, str) else bytes(data)  # JSON: said at its line (a cut: the last)
            pre = _at(source, raw.count(10, 0, int(at_byte[1]) if at_byte else len(raw)) + 1)
        return f"{pre}not valid {what} ({why})"
    if isinstance(exc, UnicodeDecodeError):
        return f"{pre}not valid {what} (not UTF-8 text at byte {exc.start})"
    return f"{pre}not valid {what} (nested too deeply)"
