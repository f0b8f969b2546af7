"""PNGs drawn by Graphviz in-process (quicsm.diagrams.gvlib): dot's pixels, or dot itself draws."""

from __future__ import annotations

import ctypes
import functools
import random
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from diagram_fixtures import make_model

from quicsm.diagrams import DotOptions, find_dot, gvlib, render_side_by_side, run_dot, to_dot, write_picture
from quicsm.errors import RenderError
from quicsm.inference import infer_sequences
from quicsm.inference.annotate import annotate_counts

pytestmark = pytest.mark.skipif(gvlib._libs() is None, reason="Graphviz's libgvc/libcairo cannot be loaded")


def _cairo_pixels(path: Path) -> tuple[int, int, bytes]:
    """(width, height, premultiplied ARGB32 rows) of a PNG file, as cairo's own PNG reader gives them."""
    cairo = ctypes.CDLL("libcairo.so.2")
    cairo.cairo_image_surface_create_from_png.restype = ctypes.c_void_p
    cairo.cairo_image_surface_create_from_png.argtypes = [ctypes.c_char_p]
    for name in ("cairo_image_surface_get_width", "cairo_image_surface_get_height", "cairo_image_surface_get_stride"):
        getattr(cairo, name).argtypes = [ctypes.c_void_p]
    cairo.cairo_image_surface_get_data.restype = ctypes.c_void_p
    cairo.cairo_image_surface_get_data.argtypes = [ctypes.c_void_p]
    cairo.cairo_surface_status.argtypes = [ctypes.c_void_p]
    cairo.cairo_surface_destroy.argtypes = [ctypes.c_void_p]
    surface = cairo.cairo_image_surface_create_from_png(str(path).encode())
    try:
        assert cairo.cairo_surface_status(surface) == 0, f"cairo cannot read {path}"
        width = cairo.cairo_image_surface_get_width(surface)
        height = cairo.cairo_image_surface_get_height(surface)
        stride = cairo.cairo_image_surface_get_stride(surface)
        data = ctypes.string_at(cairo.cairo_image_surface_get_data(surface), stride * height)
    finally:
        cairo.cairo_surface_destroy(surface)
    return width, height, data


def _dot_png(dot_text: str, path: Path) -> None:
    subprocess.run([find_dot(), "-Tpng", "-o", str(path)], input=dot_text.encode(), check=True)


GRAPHS = {
    "model": lambda: to_dot(make_model(15, seed=21), DotOptions(title="render test")),
    "model-lr": lambda: to_dot(make_model(40, seed=5), DotOptions(rankdir="LR")),
    "side-by-side": lambda: render_side_by_side([("a", make_model(12, seed=3)), ("b", make_model(12, seed=4))]),
    "transparent": lambda: 'digraph { bgcolor="transparent"; a [style=filled, fillcolor="#ff000080"]; a -> b }',
    "pad-xy": lambda: 'digraph { bgcolor=white; pad="0.5,0.1"; a -> b -> c; a -> c [label="x"] }',
    "no-pad": lambda: 'digraph { bgcolor="#ffeedd"; a -> b }',
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_in_process_png_has_dots_pixels(name: str, tmp_path: Path) -> None:
    text = GRAPHS[name]()
    ours = gvlib.draw_png(text)
    assert ours is not None, "the in-process path declined a graph it should draw"
    (tmp_path / "ours.png").write_bytes(ours)
    _dot_png(text, tmp_path / "dot.png")
    theirs = _cairo_pixels(tmp_path / "dot.png")
    assert theirs[0] > 10 and theirs[1] > 10
    assert _cairo_pixels(tmp_path / "ours.png") == theirs
    assert gvlib.draw_png(text) == ours  # same text, same bytes


def test_pictures_it_cannot_promise_are_left_to_dot(tmp_path: Path) -> None:
    sized = 'digraph { bgcolor=white; size="1,1"; a -> b -> c }'
    assert gvlib.draw_png(sized) is None
    assert gvlib.draw_png("digraph { bgcolor=white; dpi=150; a -> b }") is None
    assert gvlib.draw_png("digraph { a -> b }") is None  # no bgcolor: dot's PNG device paints white
    assert gvlib.draw_png("digraph { a -> ; }") is None
    png = run_dot(sized, "png")  # dot draws it
    (tmp_path / "sized.png").write_bytes(png)
    _dot_png(sized, tmp_path / "dot.png")
    assert _cairo_pixels(tmp_path / "sized.png") == _cairo_pixels(tmp_path / "dot.png")
    with pytest.raises(RenderError, match="syntax error"):  # and reports what is wrong with the text
        write_picture("digraph { a -> ; }", str(tmp_path / "bad.png"))
    assert not (tmp_path / "bad.png").exists()


INIT_RANK_BUG = """digraph g {
  graph [bgcolor="white"];
  subgraph cluster_a {
    a5 -> a6 [style="invis"]; { rank="same"; a6; a9; }
    a3 -> a5 [label="x"]; a5 -> a8 [label="x"]; a5 -> a9 [label="x"]; a7 -> a1 [label="x"]; a7 -> a2 [label="x"];
    a7 -> a5 [label="x"]; a8 -> a2 [label="x"]; a8 -> a6 [label="x"]; a8 -> a9 [label="x"];
  }
  subgraph cluster_b {
    b1 -> b2 [style="invis"]; { rank="same"; b2; n6; } { rank="same"; b3; n1; n2; n5; } { rank="same"; b4; n3; n7; }
    n0 -> n4 [label="x"]; n2 -> n1 [label="x"]; n4 -> n6 [label="x"]; n5 -> n2 [label="x"]; n5 -> n8 [label="x"];
    n6 -> n1 [label="x"]; n6 -> n2 [label="x"]; n6 -> n8 [label="x"];
  }
}"""
"""Graphviz 2.42/2.43 fail this with "trouble in init_rank": labelled flat edges in rank=same groups of
two clusters (cut down from a side-by-side quicsm drew before its flat edges took xlabels)."""


def test_a_layout_graphviz_fails_stays_in_the_child(tmp_path: Path) -> None:
    """dot reports 'trouble in init_rank' on this graph and, run in-process, it corrupted the heap; the
    child declines it, this process goes on, dot's error is raised."""
    text = INIT_RANK_BUG
    assert gvlib.draw_png(text) is None
    with pytest.raises(RenderError, match="init_rank"):
        write_picture(text, str(tmp_path / "m.png"))
    assert not (tmp_path / "m.png").exists()
    assert gvlib.draw_png(GRAPHS["model"]()) is not None


def test_canvas_sides_the_printed_bounding_box_allows() -> None:
    assert gvlib._pixels(0.0, 100.0, 0.0) == (133, 133)  # 133.33
    assert gvlib._pixels(0.0, 1885.8, 18.0) == (2562, 2562)  # 2562.4, within 0.07 px of the printed value
    assert gvlib._pixels(0.0, 1874.6, 0.0) == (2499, 2500)  # 2499.47 +- 0.07: 2499 or 2500
    assert gvlib._pixels(0.0, 123460.0, 0.0) == (164607, 164620)  # beyond cairo: drawn scaled to MAX_PNG_SIDE
    assert gvlib._pixels(0.0, 0.0, 0.0) is None
    assert [gvlib._rounded_up(a) for a in (0, 120, 125, 127, 128, 130, 136, 255)] == [
        None,  # nothing painted there: cannot tell
        False,
        False,
        None,  # too near half a pixel
        None,
        True,
        True,
        True,
    ]


@functools.lru_cache(maxsize=1)
def _context(libs: object) -> int:
    """One Graphviz context for this process, as ``dot`` has (a context freed and made again leaves
    Graphviz's global state half reset: later pictures came out different)."""
    return int(libs.gvc.gvContext())  # type: ignore[attr-defined]


def _random_model_dot(seed: int) -> str:
    rnd = random.Random(seed)
    names = [f"State{i}" for i in range(rnd.randint(5, 10))]
    seqs = [[rnd.choice(names) for _ in range(rnd.randint(2, 12))] for _ in range(40)]
    res = infer_sequences(seqs, "ktails")
    am = annotate_counts(res, [1] * len(seqs), [[1000] * len(s) for s in seqs], sum(map(len, seqs)), 1)
    return to_dot(am, DotOptions(title=f"model {seed}"))


@pytest.mark.parametrize(("seed", "canvas"), [(43, (3864, 2763)), (26, (3692, 3803))])
def test_a_canvas_the_bounding_box_leaves_open_is_read_from_the_page(
    seed: int, canvas: tuple[int, int], tmp_path: Path
) -> None:
    """Large diagrams' coordinates print with one decimal (``%.5g``), so about one in five leaves a side's
    rounding open: drawn on the larger canvas, the page's cover of the last column or row tells dot's
    (here 2763 of 2763-2764 high, and 3803 of 3802-3803), and the pixels are dot's."""
    text = _random_model_dot(seed)
    libs = gvlib._libs()
    assert libs is not None
    g = libs.cgraph.agmemread(text.encode())
    libs.cgraph.agsafeset(g, b"dpi", b"96.0", b"")
    libs.gvc.gvLayout(_context(libs), g, b"dot")
    (w0, w1), (h0, h1) = gvlib._canvas(libs, g) or ((0, 0), (0, 0))
    assert (w0, h0) != (w1, h1) and w0 <= canvas[0] <= w1 and h0 <= canvas[1] <= h1  # one side left open
    ours = gvlib.draw_png(text)
    assert ours is not None
    (tmp_path / "ours.png").write_bytes(ours)
    _dot_png(text, tmp_path / "dot.png")
    theirs = _cairo_pixels(tmp_path / "dot.png")
    assert theirs[:2] == canvas and _cairo_pixels(tmp_path / "ours.png") == theirs


def _decode(png: bytes) -> np.ndarray:
    """The pixels of a PNG written by encode_png (unfiltered rows, one IDAT)."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    channels = {2: 3, 6: 4}[png[25]]
    size = int.from_bytes(png[33:37], "big")
    assert png[37:41] == b"IDAT"
    rows = np.frombuffer(zlib.decompress(png[41 : 41 + size]), dtype=np.uint8).reshape(height, -1)
    assert (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(height, width, channels)


def test_encode_png_stores_cairos_pixels_unpremultiplied() -> None:
    rng = np.random.default_rng(7)
    argb = rng.integers(0, 256, size=(300, 257, 4), dtype=np.uint8)  # more rows than one band
    argb[:, :, 3] = 255
    rgb = _decode(gvlib.encode_png(argb))
    assert rgb.shape == (300, 257, 3)
    assert (rgb == argb[:, :, 2::-1]).all()
    alpha = rng.integers(0, 256, size=(300, 257), dtype=np.uint8)
    colour = rng.integers(0, 256, size=(300, 257, 3), dtype=np.uint16)
    argb[:, :, :3] = (colour * alpha[:, :, None] // 255).astype(np.uint8)  # premultiplied: c <= a
    argb[:, :, 3] = alpha
    rgba = _decode(gvlib.encode_png(argb)).astype(np.int32)
    assert (rgba[:, :, 3] == alpha).all()
    back = rgba[:, :, [2, 1, 0]] * alpha[:, :, None].astype(np.int32)  # premultiply again: within one step
    assert (np.abs(back - argb[:, :, :3].astype(np.int32) * 255) <= 255).all()
    assert (rgba[alpha == 0][:, :3] == 0).all()


def test_a_layout_over_the_time_bound_is_not_drawn_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drawing process runs out of time: run_dot says so at once, without running dot for as long again."""
    ran: list[list[str]] = []

    def slow(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
        ran.append(cmd)
        raise subprocess.TimeoutExpired(cmd, 0.01)

    monkeypatch.setattr(subprocess, "run", slow)
    with pytest.raises(RenderError, match="longer than"):
        run_dot(GRAPHS["model"](), "png", timeout=0.01)
    assert len(ran) == 1 and ran[0][-2].endswith("gvlib.py")


def _png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def test_a_picture_over_the_side_cap_is_scaled_to_fit_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 300-state chain is about 290 inches high (27,800 px at 96 dpi): drawn in-process and by dot alike it
    comes out MAX_PNG_SIDE pixels high, the width scaled with it, as dot's own size attribute scales."""
    text = "digraph { bgcolor=white; " + " -> ".join(f'"state {i}"' for i in range(300)) + " }"
    ours = gvlib.draw_png(text)
    assert ours is not None
    assert _png_size(ours)[1] == gvlib.MAX_PNG_SIDE
    monkeypatch.setenv("QUICSM_DOT", find_dot())  # another dot program: dot draws the PNG
    theirs = run_dot(text, "png")
    assert _png_size(theirs) == _png_size(ours)
    small = GRAPHS["model"]()
    assert max(_png_size(run_dot(small, "png"))) < gvlib.MAX_PNG_SIDE  # small pictures keep dot's size
