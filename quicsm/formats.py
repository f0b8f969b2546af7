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
from typing import Any, TypeVar

import msgspec
import msgspec.toml

from quicsm.errors import InputError

__all__ = ["checked", "problem", "toml_line"]

T = TypeVar("T")
_AT_END = re.compile(r" - at `\$\.?([^`]*)`$")


def problem(exc: msgspec.ValidationError) -> tuple[str, str]:
    """Where in the document (``nodes[3].visits``, or empty at the top) and what is wrong, on one line."""
    msg = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(exc))
    m = _AT_END.search(msg)
    what = msg[: m.start()] if m else msg
    return (m.group(1) if m else ""), what[:1].lower() + what[1:]


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


def checked(data: Any, kind: type[T], source: str, *, what: str = "JSON") -> T:
    """``data`` (JSON bytes or text, or objects already decoded; a TOML document when ``what`` is
    ``"TOML"``) as ``kind``; InputError ``source[:line]: where: why`` when it does not hold the declared
    shape (the line: of a TOML document's key)."""
    try:
        if what == "TOML":
            return msgspec.toml.decode(data, type=kind)
        if isinstance(data, bytes | bytearray | memoryview | str):
            return msgspec.json.decode(data, type=kind)
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as exc:
        where, why = problem(exc)
        key = why.partition("unknown field `")[2].partition("`")[0]  # the line of the key itself
        place = f"{where}.{key}" if where and key else key or where
        line = toml_line(data if isinstance(data, str) else bytes(data).decode(), place) if what == "TOML" else None
        at = f"{source}:{line}" if line else source
        raise InputError(f"{at}: {where}: {why}" if where else f"{at}: {why}") from None
    except msgspec.DecodeError as exc:
        raise InputError(f"{source}: not valid {what} ({str(exc).removeprefix('Invalid TOML: ')})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not valid {what} (not UTF-8 text at byte {exc.start})") from None
    except RecursionError:
        raise InputError(f"{source}: not valid {what} (nested too deeply)") from None
