"""Inputs where fleets keep them: local paths, directories, or fsspec URLs (``s3://``, ``gs://``, ``https://``).

URLs are read as streams (gzip recognised by its magic bytes, not the name); globs in URLs are expanded
by the URL's filesystem. Local paths keep every behaviour of :mod:`quicsm.traces.parse` (stdin, sidecar
``meta.json``, directories).
"""

from __future__ import annotations

import gzip
from typing import Any, BinaryIO

from quicsm.errors import InputError

__all__ = ["is_url", "expand_sources", "open_url"]

_GZIP_MAGIC = b"\x1f\x8b"


def is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError:
        raise InputError("URL inputs need fsspec: pip install 'quicsm[fleet]'") from None
    return fsspec


def expand_sources(paths: list[str]) -> list[str]:
    """Local paths via :func:`quicsm.traces.inputs.expand_inputs`; URL globs via fsspec, sorted."""
    from quicsm.traces.inputs import expand_inputs

    out: list[str] = []
    for p in paths:
        if not is_url(p):
            out.extend(expand_inputs([p]))
            continue
        if not any(c in p for c in "*?["):
            out.append(p)
            continue
        fs, _, _ = _fsspec().core.get_fs_token_paths(p)
        try:
            found = sorted(fs.glob(p))
        except Exception as exc:
            raise InputError(f"{p}: cannot list ({exc})") from None
        if not found:
            raise InputError(f"{p}: matches no file")
        proto = p.split("://", 1)[0]
        out.extend(f if "://" in f else f"{proto}://{f}" for f in found)
    return out


def open_url(url: str) -> BinaryIO:
    """A streaming binary reader for ``url``; gunzipped when the data starts with gzip's magic."""
    fsspec = _fsspec()
    try:
        fh = fsspec.open(url, "rb").open()
    except FileNotFoundError:
        raise InputError(f"{url}: no such file") from None
    except Exception as exc:
        raise InputError(f"{url}: cannot open ({exc})") from None
    head = fh.read(2)
    fh.seek(0)
    if head == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh
