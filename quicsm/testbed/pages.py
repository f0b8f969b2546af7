"""The page every testbed server serves, for the servers quicsm writes in Python or as files (the Go,
quiche and quinn servers build the same in their own code): ``/`` is an HTML page with one
``<script async src="/obj/i">`` per object, ``/obj/i`` is ``size`` bytes of a valid empty script."""

from __future__ import annotations

__all__ = ["object_body", "page_html"]


def page_html(objects: int, size: int) -> str:
    tags = "".join(f'<script async src="/obj/{i}"></script>\n' for i in range(objects))
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>quicsm {objects} x {size} B</title></head>'
        f"<body>\n{tags}</body></html>\n"
    )


def object_body(size: int) -> bytes:
    body = bytearray(b"x" * size)
    if size >= 4:
        body[:2], body[-2:] = b"/*", b"*/"
    return bytes(body)
