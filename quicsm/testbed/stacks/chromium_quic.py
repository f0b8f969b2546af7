"""Chromium's own QUIC (gQUIC, proto-quic 62.0.3187.0): the toy ``quic_server`` with its Cubic or BBR sender
patched by a quicsm set, and the toy ``quic_client`` loading the page (:mod:`quicsm.testbed.chromium_quic_build`).

This is the paper's subject, the QUIC Chromium shipped in 2017 (QUIC 35-39), not the Chromium *browser* client
of :mod:`quicsm.testbed.chromium` (a 2020s HTTP/3 client, which cannot speak gQUIC, nor can the Go client).

The server runs Cubic; ``--cc bbr`` starts it with ``--quicsm_cc=bbr`` (the testbed's server patch sets
``quic_reloadable_flag_quic_default_to_bbr``, so every connection runs ``BbrSender``). Each controller has its
own build (the set for ``--cc``), so the server's log holds only that controller's lines.

Page-load time: the patched ``quic_client --quicsm_json`` measures it itself with ``base::TimeTicks``, from the
start of the handshake to the last complete response (the page, then its objects together on the same
connection), the same span the Go client measures (from its request, which includes the handshake). The
process's own start-up is outside it, so a CPU-throttled client is timed on its page load, not its loading.
The toy client does not verify the certificate (``--disable-certificate-verification``); the Go client pins it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from quicsm.errors import TestbedError
from quicsm.testbed.buildtools import FileLock
from quicsm.testbed.chromium_quic_build import CERT_HOST
from quicsm.testbed.stacks import Built, Progress, Source, Stack, register

if TYPE_CHECKING:
    from quicsm.testbed.config import RunParams, ServerClient

__all__ = ["ChromiumQuicStack"]

VMODULE = {"cubic": "tcp_cubic_sender_base=1", "bbr": "bbr_sender=1"}
"""The files whose VLOG(1) lines (the sets' QUIC_LOG(INFO)) the server writes, per controller."""


class ChromiumQuicStack(Stack):
    name: ClassVar[str] = "chromium"
    implementation: ClassVar[str] = "chromium"
    description: ClassVar[str] = (
        "Chromium's own gQUIC (proto-quic 62.0.3187.0) with instrumented Cubic/BBR; toy quic_server + quic_client"
    )
    ccs: ClassVar[tuple[str, ...]] = ("cubic", "bbr")
    clients: ClassVar[tuple[str, ...]] = ("quic_client",)
    default_version: ClassVar[str] = "62.0.3187.0"
    target: ClassVar[str | None] = "chromium"

    def versions(self) -> list[str]:
        from quicsm.testbed.sets import shipped_versions

        return shipped_versions(self, "chromium")

    def validate(self, cfg: RunParams) -> None:
        super().validate(cfg)
        if cfg.duration_s is not None:
            raise TestbedError(
                "stack chromium: the toy quic_client loads one page; it cannot run a --duration long flow"
            )

    def pristine_source(self, version: str, *, progress: Progress | None = None) -> Source:
        from quicsm.testbed.chromium_quic_build import prepared_source

        src, record = prepared_source(version, progress=progress)
        return Source(version, src, {"chromium": {"version": version}}, f"Chromium source ({record['source']})")

    def build(self, cfg: RunParams, *, progress: Progress | None = None, force: bool = False) -> Built:
        from quicsm.testbed.chromium_quic_build import build_chromium_quic
        from quicsm.testbed.sets import resolve_set

        version = self.version(cfg)
        chosen = resolve_set(self, version, cfg.cc, cfg.patch_set, progress=progress)
        b = build_chromium_quic(version, chosen.patch_set, progress=progress, force=force)
        return Built(
            stack=self.name,
            version=version,
            cc=cfg.cc,
            server=b.server,
            client=b.client,
            patch_set=b.patch_set,
            cached=b.cached,
            seconds=b.seconds,
            meta={**b.meta, "patch_set_choice": chosen.to_json()},
        )

    def server_argv(self, cfg: RunParams, bins: ServerClient, addr: str, log_path: Path) -> list[str]:
        host, _, port = addr.rpartition(":")
        entry = Path(bins.server).parent
        ready = json.dumps({"spki": _spki(bins), "chromium": self.version(cfg)}, separators=(",", ":"))[1:-1]
        return [
            str(bins.server),
            f"--port={port}",
            f"--quicsm_bind={host.strip('[]')}",
            f"--quic_response_cache_dir={page_dir(cfg.objects, cfg.size)}",
            f"--certificate_file={entry / 'server.pem'}",
            f"--key_file={entry / 'server.key'}",
            f"--quicsm_log={log_path}",
            f"--quicsm_cc={cfg.cc}",
            f"--vmodule={VMODULE[cfg.cc]}",
            f"--quicsm_ready={ready}",
        ]

    def client_argv(self, cfg: RunParams, bins: ServerClient, url: str, spki: str) -> list[str]:
        target = urlsplit(url)
        if target.hostname is None or target.port is None:
            raise TestbedError(f"client target {url!r}: expected https://HOST:PORT/")
        return [
            str(bins.client),
            f"--host={target.hostname}",
            f"--port={target.port}",
            "--disable-certificate-verification",
            "--quicsm_json",
            *iter_urls(cfg.objects),
        ]

    def labels(self, cfg: RunParams) -> dict[str, str]:
        return {"stack": self.name, "chromium_version": self.version(cfg)}

    def run_meta(self, cfg: RunParams, bins: ServerClient, ready: Mapping[str, Any]) -> dict[str, Any]:
        return {"server_chromium": ready.get("chromium"), "server_cc": ready.get("cc")}


def page_dir(objects: int, size: int) -> Path:
    """The toy server's response cache for a page of ``objects`` objects of ``size`` bytes (as the testbed's Go
    server serves it: ``/`` an HTML page referencing ``/obj/0`` ...), made once under the cache."""
    root = _cache() / "pages"
    d = root / f"{objects}x{size}"
    if d.is_dir():  # renamed into place whole
        return d
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(root / f".{d.name}.lock"):
        if d.is_dir():
            return d
        tmp = Path(tempfile.mkdtemp(prefix=f".{d.name}-", dir=root))
        try:
            from quicsm.testbed.pages import object_body, page_html

            _response(tmp / "index", "/", "text/html; charset=utf-8", page_html(objects, size).encode())
            body = object_body(size)
            for i in range(objects):
                _response(tmp / f"obj{i}", f"/obj/{i}", "application/javascript", body)
            os.replace(tmp, d)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return d


def _response(path: Path, url_path: str, ctype: str, body: bytes) -> None:
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\nCache-Control: no-store\r\n"
        f"X-Original-Url: https://{CERT_HOST}{url_path}\r\n\r\n"
    )
    path.write_bytes(head.encode() + body)


def iter_urls(objects: int) -> Iterator[str]:
    """The page's URLs in the order the toy client loads them (the page, then its objects together)."""
    yield f"https://{CERT_HOST}/"
    for i in range(objects):
        yield f"https://{CERT_HOST}/obj/{i}"


def _cache() -> Path:
    from quicsm.testbed.chromium_quic_build import chromium_cache

    return chromium_cache()


def _spki(bins: ServerClient) -> str:
    """The server certificate's SPKI hash, from the build (``Built.meta`` or the entry's build.json)."""
    meta = getattr(bins, "meta", None)
    if isinstance(meta, Mapping) and meta.get("spki"):
        return str(meta["spki"])
    try:
        return str(json.loads((Path(bins.server).parent / "build.json").read_text()).get("spki", ""))
    except (OSError, ValueError):
        return ""


register(ChromiumQuicStack())
