"""Graphviz rendering: formats, byte-stable output, missing or failing dot, atomic writes."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest
from diagram_fixtures import make_model

import quicsm.diagrams.render as render
import quicsm.files as files
from quicsm.diagrams import DotOptions, output_format, run_dot, to_dot, write_diagram, write_picture
from quicsm.diagrams.render import DOT_ENV
from quicsm.diagrams.style import wrap_state
from quicsm.errors import OutputError, RenderError


@pytest.fixture(scope="module")
def dot_text() -> str:
    return to_dot(make_model(15, seed=21), DotOptions(title="render test"))


def test_output_format_from_suffix_or_option() -> None:
    assert output_format("a/b.SVG") == "svg"
    assert output_format("m.png") == "png"
    assert output_format("m.pdf") == "pdf"
    assert output_format("m.dot") == "dot" and output_format("m.gv") == "dot"
    assert output_format("-") == "dot"
    assert output_format("-", "svg") == "svg"
    assert output_format("m.txt", "PNG") == "png"
    with pytest.raises(RenderError, match="m.txt"):
        output_format("m.txt")
    with pytest.raises(RenderError, match="jpeg"):
        output_format("m.svg", "jpeg")


@pytest.mark.parametrize("fmt", ["svg", "png", "pdf", "dot"])
def test_same_input_same_bytes(tmp_path: Path, dot_text: str, fmt: str) -> None:
    first, second = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
    assert write_picture(dot_text, str(first)) == fmt
    assert write_picture(dot_text, str(second)) == fmt
    data = first.read_bytes()
    assert data == second.read_bytes()
    magic = {"svg": b"<?xml", "png": b"\x89PNG", "pdf": b"%PDF", "dot": b"// quicsm"}[fmt]
    assert data.startswith(magic)
    assert len(data) > 1000
    if fmt == "pdf":
        assert b"/CreationDate (D:19700101000000" in data


def test_svg_shows_states_shares_and_probabilities(tmp_path: Path) -> None:
    am = make_model(12, seed=22)
    out = tmp_path / "m.svg"
    write_diagram(am, str(out))
    svg = out.read_text()
    for n in am.nodes:
        if n.kind == "state":
            assert f">{wrap_state(n.state)[0]}<" in svg
            share = "&lt;0.1" if 0 < n.time_fraction < 0.0005 else f"{100 * n.time_fraction:.1f}"
            assert f">{share}%<" in svg
    for e in am.edges:
        assert f"> {e.probability:.2f} <" in svg or f">{e.probability:.2f}<" in svg


def test_missing_dot_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dot_text: str) -> None:
    monkeypatch.delenv(DOT_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RenderError, match="apt-get install graphviz"):
        run_dot(dot_text, "svg")
    with pytest.raises(RenderError, match="apt-get install graphviz"):
        write_picture(dot_text, str(tmp_path / "m.svg"))
    assert not (tmp_path / "m.svg").exists()
    write_picture(dot_text, str(tmp_path / "m.dot"))  # DOT needs no Graphviz
    assert (tmp_path / "m.dot").read_text() == dot_text


def _fake_dot(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-dot"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_failing_dot_leaves_no_partial_file_and_keeps_the_old_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dot_text: str
) -> None:
    out = tmp_path / "out" / "m.svg"
    out.parent.mkdir()
    out.write_bytes(b"previous picture")
    monkeypatch.setenv(
        DOT_ENV, _fake_dot(tmp_path, 'printf "<svg half written"\necho "Error: layout exploded" >&2\nexit 3\n')
    )
    with pytest.raises(RenderError, match=r"exit 3.*layout exploded"):
        write_picture(dot_text, str(out))
    assert out.read_bytes() == b"previous picture"
    assert os.listdir(out.parent) == ["m.svg"]
    new = tmp_path / "out" / "new.png"
    with pytest.raises(RenderError):
        write_picture(dot_text, str(new))
    assert not new.exists() and os.listdir(out.parent) == ["m.svg"]


def test_dot_syntax_error_is_reported_with_graphviz_message(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="syntax error"):
        write_picture("digraph { a -> ; }", str(tmp_path / "bad.svg"))
    assert not (tmp_path / "bad.svg").exists()


def test_failed_write_leaves_no_temp_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dot_text: str) -> None:
    """A disk that fills up half way through the write: the half file is removed, nothing is left."""
    original = files.atomic_output

    class HalfWriter:
        def __init__(self, fh: IO[bytes]) -> None:
            self.fh = fh

        def write(self, data: bytes) -> int:
            self.fh.write(data[: len(data) // 2])
            raise OSError(28, "No space left on device")

        def flush(self) -> None:
            self.fh.flush()

    @contextmanager
    def full_disk(path: str, binary: bool = True) -> Iterator[HalfWriter]:
        with original(path, binary) as fh:
            yield HalfWriter(fh)

    monkeypatch.setattr(files, "atomic_output", full_disk)
    with pytest.raises(OutputError, match="m.dot: cannot write .No space left"):
        write_picture(dot_text, str(tmp_path / "m.dot"))
    assert os.listdir(tmp_path) == []


def test_pictures_get_normal_file_modes(tmp_path: Path, dot_text: str) -> None:
    """Temp files are 0600; a written picture is readable like any file the user makes (or keeps its old mode)."""
    mask = os.umask(0o022)
    try:
        write_picture(dot_text, str(tmp_path / "new.dot"))
        assert stat.S_IMODE((tmp_path / "new.dot").stat().st_mode) == 0o644
        kept = tmp_path / "kept.dot"
        kept.write_text("old")
        kept.chmod(0o640)
        write_picture(dot_text, str(kept))
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text() == dot_text
    finally:
        os.umask(mask)


def test_pdf_dates_are_pinned_without_moving_offsets() -> None:
    raw = b"1 0 obj << /CreationDate (D:20261122084036Z) /ModDate (D:20261122084036-05'00) >> endobj"
    fixed = render._stable_pdf(raw)
    assert len(fixed) == len(raw)
    assert b"(D:19700101000000Z)" in fixed and b"(D:19700101000000+00'00)" in fixed
