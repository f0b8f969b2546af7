"""PNG pictures drawn by Graphviz's library (libgvc through ctypes) and encoded by quicsm.

``dot -Tpng`` spends about 70 % of its time in libpng and zlib: cairo's PNG writer lets libpng try all
five row filters on every row and compresses at zlib's default level, 0.35 of its 0.48 s on the
3,628 x 2,562 diagram of a 1,000-event model. Here Graphviz lays the graph out and draws it with the
same cairo renderer into an image surface quicsm owns (``gvRenderContext``), so the pixels are the ones
``dot -Tpng`` writes (tests compare them), and the PNG is written with no row filter at zlib level 3:
a file of about the same size in a third of the time.

Graphviz runs in a fresh process, as ``dot`` does (this module run as a script on a bare
interpreter), drawing into a memory file this process then encodes. In-process, its layout read
memory a working process had used and placed some edge labels differently from ``dot``, and a graph
its layout chokes on ("trouble in init_rank", a Graphviz 2.42 bug some side-by-side figures hit)
corrupted the heap.

:func:`draw_png` returns None whenever it cannot promise dot's pixels, and the caller runs ``dot``
as before: no libgvc, cairo or ``memfd_create``, ``$QUICSM_DOT`` naming another program (checked by
the caller), a graph Graphviz rejects or complains about (``dot`` then reports why), attributes that
size or turn the page (``size``, ``dpi``, ``rotate``, ...) or no ``bgcolor`` (quicsm's diagrams all set
one). Where Graphviz's printed bounding box (``%.5g``) cannot tell whether dot rounds a canvas side up
or down (about one large diagram in five: five-digit coordinates print with one decimal), the picture is
drawn one pixel larger and the page's cover of that last row or column says which (too near half a
pixel: dot draws it). A picture over :data:`MAX_PNG_SIDE` is drawn scaled to fit, as ``dot -Tpng
-Gsize=...`` scales it (then not dot's pixels).
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import struct
import sys
import zlib
from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:  # the drawing process imports no more than it needs (typing, numpy, subprocess)
    from typing import Any

    import numpy as np

__all__ = ["MAX_PNG_SIDE", "PNG_LEVEL", "draw_png", "encode_png"]

PNG_LEVEL = 3
"""zlib level of the PNGs written here (rows unfiltered): on the 1,000-event diagram 0.08 s and 829 kB,
where cairo's writer takes 0.35 s for 846 kB."""
DPI = 96.0
"""The resolution of Graphviz's cairo PNG device, given to the graph so that the drawing matches it."""
MAX_PNG_SIDE = 4096
"""Pixels on a PNG's longer side at most: a larger picture is drawn scaled down to fit, as ``dot``'s own
``size`` attribute scales (PlantUML caps its PNGs at the same 4,096 px a side, cropping). A 1,000-event
random log's model of 136 states drew 4,023 x 6,105 px (25 Mpx, 14 pt text 19 px high); scaled to 2,699
x 4,096 its text is 12 px high, still legible, and drawing and encoding it costs half. The SVG and PDF
stay full size (vectors: zoom in)."""
_PAGE_ATTRIBUTES = ("dpi", "resolution", "size", "ratio", "viewport", "page", "rotate", "landscape", "margin")
"""Graph attributes that change the canvas Graphviz computes: with any of them set, ``dot`` draws."""
_HALF = 127.5
_COVERAGE_SLACK = 2
"""Alpha levels around a half within which cairo's rasterised cover of a pixel cannot tell whether the
page reaches half of it (measured: 128 where Graphviz rounded down)."""
_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_BAND = 256
"""Rows encoded at a time."""
_ARGB32 = 0
_AGMAX = 2
"""``agseterr(AGMAX)``: Graphviz prints no warning or error here; a failure falls back to ``dot``,
which reports it."""


class _Libs:
    __slots__ = ("gvc", "cgraph", "cairo")

    def __init__(self, gvc: ctypes.CDLL, cgraph: ctypes.CDLL, cairo: ctypes.CDLL) -> None:
        self.gvc, self.cgraph, self.cairo = gvc, cgraph, cairo


def _declare(fn: Any, restype: object, *argtypes: object) -> None:
    fn.restype = restype
    fn.argtypes = list(argtypes)


@lru_cache(maxsize=1)
def _libs() -> _Libs | None:
    """libgvc, libcgraph and libcairo (Graphviz's own), or None where they cannot be loaded."""
    try:
        gvc, cgraph, cairo = (ctypes.CDLL(n) for n in ("libgvc.so.6", "libcgraph.so.6", "libcairo.so.2"))
        p, i, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
        _declare(gvc.gvContext, p)
        _declare(gvc.gvLayout, i, p, p, s)
        _declare(gvc.gvRenderContext, i, p, p, s, p)
        _declare(gvc.attach_attrs, None, p)
        _declare(cgraph.agmemread, p, s)
        _declare(cgraph.agget, s, p, s)
        _declare(cgraph.agsafeset, i, p, s, s, s)
        _declare(cgraph.agseterr, i, i)
        _declare(cgraph.agerrors, i)
        _declare(cairo.cairo_image_surface_create_for_data, p, p, i, i, i, i)
        _declare(cairo.cairo_create, p, p)
        _declare(cairo.cairo_status, i, p)
        _declare(cairo.cairo_surface_flush, None, p)
        _declare(cairo.cairo_scale, None, p, ctypes.c_double, ctypes.c_double)
    except (OSError, AttributeError):
        return None
    return _Libs(gvc, cgraph, cairo)


def _text(libs: _Libs, g: int, name: str) -> str:
    value = libs.cgraph.agget(g, name.encode())
    return value.decode() if value else ""


def _printed_error(value: float) -> float:
    """How far a coordinate Graphviz printed with ``%.5g`` can be from the one it holds."""
    return 0.0 if value == 0 else 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - 4)


def _pixels(low: float, high: float, pad: float) -> tuple[int, int] | None:
    """A canvas side as Graphviz computes it, ``ROUND((high - low + 2 pad) * dpi / 72)``, as (fewest, most)
    pixels the printed coordinates allow: equal where they settle the rounding, else one apart; None for
    an empty side. (A side beyond cairo's 32,767 pixels is drawn scaled to :data:`MAX_PNG_SIDE`.)"""
    size, error = high - low + 2 * pad, _printed_error(low) + _printed_error(high)
    first, last = int((size - error) * DPI / 72.0 + 0.5), int((size + error) * DPI / 72.0 + 0.5)
    return (first, last) if 0 < first else None


def _canvas(libs: _Libs, g: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The width and height in pixels of the canvas ``dot -Tpng`` draws this laid-out graph on, each as
    (fewest, most) pixels (:func:`_pixels`)."""
    libs.gvc.attach_attrs(g)
    pad_text = _text(libs, g, "pad")
    try:
        llx, lly, urx, ury = (float(v) for v in _text(libs, g, "bb").split(","))
        pads = [float(v) * 72.0 for v in pad_text.split(",")] if pad_text else [4.0]  # cairo's default pad
    except ValueError:
        return None
    width = _pixels(llx, urx, pads[0])
    height = _pixels(lly, ury, pads[-1])
    return None if width is None or height is None else (width, height)


def _rounded_up(alpha: int) -> bool | None:
    """Whether dot's canvas has a last row (column) that the drawing covers ``alpha`` / 255 of: Graphviz
    fills the page from the top left and rounds its size to whole pixels, so it has one when the page
    covers half of it or more. None where the coverage is too near a half to tell (or not painted)."""
    if alpha >= _HALF + _COVERAGE_SLACK:
        return True
    if 0 < alpha <= _HALF - _COVERAGE_SLACK:
        return False
    return None


def draw_png(dot_text: str, timeout: float = 300.0) -> bytes | None:
    """``dot -Tpng``'s picture of ``dot_text`` as PNG bytes (scaled to :data:`MAX_PNG_SIDE`, as ``dot
    -Tpng -Gsize=...`` scales), or None where ``dot`` must draw it. A fresh
    process (this module as a script) draws into a memory file; the pixels are encoded here. Raises
    ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
    if _libs() is None or sys.byteorder != "little" or not hasattr(os, "memfd_create"):
        return None  # (encode_png reads cairo's pixels as B, G, R, A bytes)
    import subprocess

    import numpy as np

    fd = os.memfd_create("quicsm-png")
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-S", __file__, str(fd)],
            input=dot_text.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
            check=False,
            pass_fds=(fd,),
        )
        head = proc.stdout.split()
        if proc.returncode != 0 or len(head) != 3 or head[0] != b"ARGB32":
            return None
        width, height = int(head[1]), int(head[2])
        if os.fstat(fd).st_size != 4 * width * height:
            return None
        with mmap.mmap(fd, 4 * width * height, access=mmap.ACCESS_READ) as pixels:
            return encode_png(np.frombuffer(pixels, dtype=np.uint8).reshape(height, width, 4))
    except (OSError, ValueError):
        return None  # (a layout over the time bound raises: dot would take as long)
    finally:
        os.close(fd)


def _draw_here(dot_text: bytes, fd: int) -> tuple[int, int] | None:
    """Lay out and draw in this process into the memory file ``fd``: (width, height), or None."""
    libs = _libs()
    if libs is None:
        return None
    gv, cg, cairo = libs.gvc, libs.cgraph, libs.cairo
    cg.agseterr(_AGMAX)
    ctx = gv.gvContext()
    g = cg.agmemread(dot_text)
    if not ctx or not g or any(_text(libs, g, a) for a in _PAGE_ATTRIBUTES) or not _text(libs, g, "bgcolor"):
        return None  # without a bgcolor dot's PNG device paints white where this (SVG) device paints none
    cg.agsafeset(g, b"dpi", str(DPI).encode(), b"")
    if gv.gvLayout(ctx, g, b"dot") != 0 or cg.agerrors():
        return None
    canvas = _canvas(libs, g)
    if canvas is None:
        return None
    (narrow, width), (low, height) = canvas  # drawn on the larger canvas, cut to dot's below
    scale = min(1.0, MAX_PNG_SIDE / max(width, height))
    if scale < 1.0:  # scaled to fit, as dot's size attribute scales: not dot's picture, so no cut below
        width, height = max(1, round(width * scale)), max(1, round(height * scale))
        narrow, low = width, height
    os.ftruncate(fd, 4 * width * height)  # zeroed, as cairo's own surface
    shared = mmap.mmap(fd, 4 * width * height)
    address = ctypes.addressof(ctypes.c_char.from_buffer(shared))
    surface = cairo.cairo_image_surface_create_for_data(address, _ARGB32, width, height, 4 * width)
    cr = cairo.cairo_create(surface)
    if scale < 1.0:
        cairo.cairo_scale(cr, scale, scale)
    # "svg:cairo" draws with the cairo renderer into the context given and, unlike "png:cairo", encodes
    # nothing at the end of the page; with dpi set it scales as the PNG device does
    if cairo.cairo_status(cr) != 0 or gv.gvRenderContext(ctx, g, b"svg:cairo", cr) != 0 or cg.agerrors():
        return None
    cairo.cairo_surface_flush(surface)
    # where the printed bounding box left a side's rounding open, the page's cover of the last column
    # (row) says it: alpha is the top byte of each little-endian ARGB32 pixel
    keep_width = width == narrow or _rounded_up(shared[4 * (width * (height // 2) + width - 1) + 3])
    keep_height = height == low or _rounded_up(shared[4 * (width * (height - 1) + width // 2) + 3])
    if keep_width is None or keep_height is None:
        return None
    if not keep_width:  # one column fewer: rows packed anew
        for row in range(1, height):
            shared.move(4 * narrow * row, 4 * width * row, 4 * narrow)
        width = narrow
    if not keep_height:
        height = low
    os.ftruncate(fd, 4 * width * height)
    return width, height


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_png(argb: np.ndarray, level: int = PNG_LEVEL) -> bytes:
    """A cairo ARGB32 image (height x width x 4 bytes: B, G, R, A premultiplied) as PNG, as cairo's writer
    stores it: RGB when every pixel is opaque, else RGBA with the colours unpremultiplied. Rows go to
    zlib in bands, so the image is never held twice."""
    import numpy as np

    height, width, _ = argb.shape
    opaque = bool((argb.view(np.uint32) >= 0xFF000000).all())  # native-endian pixels: alpha on top
    channels = 3 if opaque else 4
    packer = zlib.compressobj(level)
    parts: list[bytes] = []
    for top in range(0, height, _BAND):
        band = argb[top : top + _BAND]
        rows = np.zeros((len(band), 1 + channels * width), dtype=np.uint8)  # filter byte 0 (None) per row
        out = rows[:, 1:].reshape(len(band), width, channels)
        if opaque:
            out[:, :, 0], out[:, :, 1], out[:, :, 2] = band[:, :, 2], band[:, :, 1], band[:, :, 0]
        else:
            out[:, :, 0], out[:, :, 1], out[:, :, 2], out[:, :, 3] = (
                band[:, :, 2],
                band[:, :, 1],
                band[:, :, 0],
                band[:, :, 3],
            )
            partial = band[:, :, 3] != 255  # opaque pixels need no unpremultiply: (c * 255 + 127) / 255 = c
            if partial.any():
                alpha = band[:, :, 3][partial].astype(np.uint32)
                safe = np.maximum(alpha, 1)
                for dst, src in ((0, 2), (1, 1), (2, 0)):  # cairo's unpremultiply: (c * 255 + a / 2) / a
                    scaled = (band[:, :, src][partial].astype(np.uint32) * 255 + alpha // 2) // safe
                    out[:, :, dst][partial] = np.where(alpha == 0, 0, scaled)
        parts.append(packer.compress(rows.data))
    parts.append(packer.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, 2 if opaque else 6, 0, 0, 0)
    return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", b"".join(parts)) + _chunk(b"IEND", b"")


def _main() -> int:
    """The fresh process of :func:`draw_png`: DOT on stdin, the memory file's descriptor as argument;
    ``ARGB32 width height`` on stdout; exit status 1 when Graphviz declines or fails."""
    drawn = _draw_here(sys.stdin.buffer.read(), int(sys.argv[1]))
    if drawn is None:
        return 1
    sys.stdout.write(f"ARGB32 {drawn[0]} {drawn[1]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
