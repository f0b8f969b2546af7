"""Inputs where fleets keep them: fsspec URLs (``s3://``, ``gs://``, ``https://``), listed and opened.

URLs are read as streams (gzip recognised by its magic bytes, not the name); globs in URLs are expanded
by the URL's filesystem, with its own (paginated) listing. Local paths are the traces layer's
(:func:`quicsm.traces.inputs.expand_inputs` calls :func:`list_urls` for URLs).
"""

from __future__ import annotations

import errno
import io
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, BinaryIO

from quicsm.errors import InputError, reading

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


def _reason(exc: BaseException) -> str:
    """An fsspec/botocore error's first line (a lost endpoint says which URL it could not reach)."""
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


@contextmanager
def _as_oserror() -> Iterator[None]:
    """A store's failure as the :class:`OSError` a reader and :func:`quicsm.errors.reading` know: botocore's
    and aiohttp's own exceptions, and fsspec's OSErrors without a reason, carry their first line."""
    try:
        yield
    except FileNotFoundError:
        raise
    except Exception as exc:
        if isinstance(exc, OSError) and exc.strerror:
            raise
        raise OSError(errno.EIO, _reason(exc)) from None


def list_urls(pattern: str, options: dict[str, str] | None = None) -> list[str]:
    """The objects a URL glob matches, sorted, as URLs (the filesystem's own paginated listing);
    ``options``: fsspec storage options (``endpoint_url``, ``anon``, ...). A store that cannot be
    reached or refuses is one :class:`InputError` naming the pattern."""
    fsspec = _fsspec()
    try:
        fs, _ = fsspec.core.url_to_fs(pattern, **dict(options or {}))
        found = sorted(fs.glob(pattern))
    except Exception as exc:  # botocore's errors are not OSErrors
        raise InputError(f"{pattern}: cannot list ({_reason(exc)})") from None
    if not found:
        raise InputError(f"{pattern}: matches no file")
    proto = pattern.split("://", 1)[0]
    return [f if "://" in f else f"{proto}://{f}" for f in found]


class _Remote(io.RawIOBase):
    """A remote file whose failures are :class:`OSError` (what a reader expects of a file): a store lost
    mid-read raises botocore's and aiohttp's own exceptions, which no reader knows."""

    def __init__(self, fh: Any) -> None:
        self._fh = fh

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        with _as_oserror():
            data = self._fh.read(len(b))
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        with suppress(Exception):
            self._fh.close()
        super().close()


def open_url(url: str, options: dict[str, str] | None = None) -> BinaryIO:
    """A streaming binary reader for ``url``, gunzipped when the data starts with gzip's magic, as a
    local file is (:class:`quicsm.files.GzipReader`: a truncated object gives what decompressed)."""
    from quicsm.files import GzipReader

    fsspec = _fsspec()
    with reading(url):
        with _as_oserror():
            fh = fsspec.open(url, "rb", **dict(options or {})).open()
        stream = io.BufferedReader(_Remote(fh), buffer_size=1 << 20)
        try:
            head = stream.peek(2)[:2]
        except OSError:
            stream.close()
            raise
    if head == _GZIP_MAGIC:
        return GzipReader(stream)  # type: ignore[return-value]
    return stream
