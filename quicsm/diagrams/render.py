"""Run Graphviz ``dot`` on DOT text and write the picture atomically, byte-identical for the same input.

Graphviz's SVG is already the same bytes for the same DOT text (it carries a version comment, which
only changes with Graphviz). A PNG is drawn by Graphviz's library and encoded by quicsm
(:mod:`quicsm.diagrams.gvlib`: dot's pixels in about 0.6x of ``dot -Tpng``'s time on the 1,000-event
diagram), else by ``dot -Tpng``; either scaled down to :data:`~quicsm.diagrams.gvlib.MAX_PNG_SIDE` pixels
a side. cairo's PDF carries a creation date; it is replaced by a
fixed one of the same length, so byte offsets inside the PDF stay valid.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from quicsm.diagrams.dot import DotOptions, to_dot
from quicsm.diagrams.gvlib import DPI, MAX_PNG_SIDE, draw_png
from quicsm.diagrams.overlay import Overlay
from quicsm.errors import RenderError
from quicsm.files import write_output
from quicsm.inference.annotate import AnnotatedModel

__all__ = ["FORMATS", "output_format", "find_dot", "run_dot", "write_picture", "write_diagram", "DOT_ENV"]

FORMATS = ("svg", "png", "pdf", "dot")
"""Output formats: Graphviz's ``-T`` for the first three, the DOT text itself for ``dot``."""
DOT_ENV = "QUICSM_DOT"
"""Environment variable naming the ``dot`` program to use instead of the one on PATH."""
_PDF_DATE = re.compile(rb"/(CreationDate|ModDate) \(D:(\d{14})([^)]*)\)")
_SETS_SIZE = re.compile(r"\bsize\s*=")
"""A graph that sizes its own page: the PNG cap is not put on it."""


def output_format(path: str, fmt: str | None = None) -> str:
    """The format to write: ``fmt`` if given, else the file suffix; ``-`` (stdout) defaults to DOT."""
    if fmt is not None:
        fmt = fmt.lower()
        if fmt not in FORMATS:
            raise RenderError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
        return fmt
    if path == "-":
        return "dot"
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix == "gv":
        return "dot"
    if suffix not in FORMATS:
        raise RenderError(f"{path}: cannot tell the format from the suffix; use .svg, .png, .pdf, .dot or --format")
    return suffix


def find_dot() -> str:
    """Path of Graphviz's ``dot`` ($QUICSM_DOT, else PATH); RenderError saying how to install it."""
    configured = os.environ.get(DOT_ENV)
    if configured:
        if shutil.which(configured) is None:
            raise RenderError(f"${DOT_ENV}={configured} is not an executable program")
        return configured
    found = shutil.which("dot")
    if found is None:
        raise RenderError(
            "Graphviz 'dot' not found on PATH; install Graphviz (apt-get install graphviz) "
            "or write DOT with -o FILE.dot / --format dot"
        )
    return found


def run_dot(dot_text: str, fmt: str, timeout: float = 300.0) -> bytes:
    """Lay out and draw ``dot_text`` as ``svg``, ``png`` or ``pdf``; stable bytes for the same text."""
    if fmt not in ("svg", "png", "pdf"):
        raise RenderError(f"Graphviz output format must be svg, png or pdf, got {fmt!r}")
    program = find_dot()
    try:
        if fmt == "png" and not os.environ.get(DOT_ENV):
            drawn = draw_png(dot_text, timeout)  # dot's pixels, drawn by libgvc and encoded faster
            if drawn is not None:
                return drawn
        sized = fmt != "png" or _SETS_SIZE.search(dot_text)  # -Gsize would replace a graph's own size
        cap = [] if sized else [f"-Gsize={MAX_PNG_SIDE / DPI:g},{MAX_PNG_SIDE / DPI:g}"]
        proc = subprocess.run(
            [program, f"-T{fmt}", *cap],
            input=dot_text.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", "0")},
        )
    except FileNotFoundError:
        raise RenderError(
            f"Graphviz 'dot' ({program}) cannot be run; install Graphviz (apt-get install graphviz)"
        ) from None
    except PermissionError:
        raise RenderError(f"Graphviz 'dot' ({program}) is not executable") from None
    except subprocess.TimeoutExpired:
        raise RenderError(
            f"Graphviz 'dot' took longer than {timeout:.0f} s; try --min-prob to draw fewer edges"
        ) from None
    if proc.returncode != 0 or not proc.stdout:
        err = proc.stderr.decode("utf-8", "replace").strip() or "no error message"
        raise RenderError(f"Graphviz 'dot -T{fmt}' failed (exit {proc.returncode}): {err[:2000]}")
    return _stable_pdf(proc.stdout) if fmt == "pdf" else proc.stdout


def _stable_pdf(data: bytes) -> bytes:
    """cairo < 1.17 stamps the time into the PDF whatever SOURCE_DATE_EPOCH says: put a fixed date of
    the same length there, so the cross-reference offsets stay right."""

    def fixed(m: re.Match[bytes]) -> bytes:
        zone = re.sub(rb"\d", b"0", m.group(3)).replace(b"-", b"+")  # "Z" or "+00'00": same length, still valid
        return b"/%s (D:19700101000000%s)" % (m.group(1), zone)

    return _PDF_DATE.sub(fixed, data)


def write_picture(dot_text: str, path: str, fmt: str | None = None) -> str:
    """Write ``dot_text`` to ``path`` (``-`` = stdout) as DOT or drawn by Graphviz; returns the format.

    The picture is drawn first and written to a temp file renamed over ``path`` only when complete, so a
    failure leaves no file (and an existing one untouched).
    """
    fmt = output_format(path, fmt)
    write_output(path, picture_bytes(dot_text, path, fmt))  # a failed write: OutputError naming path
    return fmt


def picture_bytes(dot_text: str, path: str, fmt: str | None = None) -> bytes:
    """What :func:`write_picture` would write to ``path``: drawn before anything is written, so a command
    writing several files can draw all of them first and leave none behind when one drawing fails."""
    fmt = output_format(path, fmt)
    return dot_text.encode("utf-8") if fmt == "dot" else run_dot(dot_text, fmt)


def write_diagram(
    model: AnnotatedModel,
    path: str,
    fmt: str | None = None,
    options: DotOptions = DotOptions(),
    overlay: Overlay | None = None,
) -> str:
    """Draw an annotated model into a picture file (``quicsm render``, ``quicsm diagram``).

    Parameters
    ----------
    model : AnnotatedModel
        What :func:`quicsm.learn` returns (or :func:`quicsm.inference.annotate.load_model` reads).
    path : str or path-like
        The picture; written whole or not at all.
    fmt : str, optional
        ``svg``, ``png``, ``pdf`` or ``dot``; default: from the suffix of ``path``.
    options : DotOptions
        Layout and labels (minimum edge probability shown, title, legend).
    overlay : Overlay, optional
        Values drawn over the states and edges (a comparison's differences).

    Returns
    -------
    str
        The format written.

    Raises
    ------
    quicsm.errors.RenderError
        An unknown format, or Graphviz missing or failing.

    Examples
    --------
    >>> import quicsm, tempfile
    >>> am = quicsm.learn(quicsm.summarize([TRACES / "fig13/desktop"]), "dfg")
    >>> out = tempfile.mkdtemp() + "/desktop.svg"
    >>> quicsm.render(am, out)
    'svg'
    >>> open(out).read().count("<svg")
    1
    """
    return write_picture(to_dot(model, options, overlay), path, fmt)
