"""Inputs where fleets keep them: fsspec URLs (``s3://``, ``gs://``, ``https://``), listed and opened.

URLs are read as streams (gzip recognised by its magic bytes, not the name); globs in URLs are expanded
by the URL's filesystem, with its own (paginated) listing. Local paths are the traces layer's
(:func:`quicsm.traces.inputs.expand_inputs` calls :func:`list_urls` for URLs).
"""

from __future__ import annotations

import gzip
from typing import Any, BinaryIO

from quicsm.errors import InputError

__all__ = ["is_url", "list_urls", "open_url", "has_glob"]

_GZIP_MAGIC = b"\x1f\x8b"


def is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def has_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError:
        raise InputError("URL inputs need fsspec: pip install 'quicsm[fleet]'") from None
    return fsspec


def list_urls(pattern: str, options: dict[str, str] | None = None) -> list[str]:
    """The objects a URL glob matches, sorted, as URLs (the filesystem's own paginated listing);
    ``options``: fsspec storage options (``endpoint_url``, ``anon``, ...)."""
    fs, _, _ = _fsspec().core.get_fs_token_paths(pattern, storage_options=dict(options or {}))
    try:
        found = sorted(fs.glob(pattern))
    except Exception as exc:
        raise InputError(f"{pattern}: cannot list ({exc})") from None
    if not found:
        raise InputError(f"{pattern}: matches no file")
    proto = pattern.split("://", 1)[0]
    return [f if "://" in f else f"{proto}://{f}" for f in found]


def open_url(url: str, options: dict[str, str] | None = None) -> BinaryIO:
    """A streaming binary reader for ``url``; gunzipped when the data starts with gzip's magic."""
    fsspec = _fsspec()
    try:
        fh = fsspec.open(url, "rb", **dict(options or {})).open()
    except FileNotFoundError:
        raise InputError(f"{url}: no such file") from None
    except Exception as exc:
        raise InputError(f"{url}: cannot open ({exc})") from None
    head = fh.read(2)
    fh.seek(0)
    if head == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh
