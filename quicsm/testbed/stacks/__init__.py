"""Server stacks of the testbed, and the registry that holds them.

A stack is what the testbed runs behind the emulated path: an implementation (quic-go, Cloudflare
quiche, ...) built with its congestion controller instrumented, plus the client that loads a page from
it. The runner only talks to the :class:`Stack` interface, so a new stack is one module in this
package that subclasses :class:`Stack` and calls :func:`register`; modules here are imported on first
use of the registry. ``quicsm testbed run/matrix/build`` take ``--stack NAME`` from :func:`names`.

What a stack says about itself (class attributes) and does (methods):

* ``name`` (``--stack``), ``implementation`` (what traces and ``meta.json`` call it), ``ccs`` (the
  ``--cc`` values it takes, its default first), ``clients`` (``go``, ``chromium``), ``protocol`` and ``http_versions`` (the
  HTTP versions its pages come over, its own first), ``zero_rtt`` and ``max_cwnd`` (whether runs may resume
  with 0-RTT, rebuild the server with another maximum congestion window), ``version_field`` (the
  :class:`~quicsm.testbed.runner.RunConfig` field holding its version; ``stack_version`` by default,
  which ``--stack-version`` sets for every stack) and ``default_version``;
* :meth:`Stack.versions` -- versions it has pinned patch sets for;
* :meth:`Stack.validate` -- refuse a run configuration it cannot run;
* :meth:`Stack.build` -- server and client binaries for a configuration (cached; progress lines go to
  ``progress``) as a :class:`Built`, whose ``meta`` records how they were made (toolchain, locked
  dependency versions); it lands in each run's ``meta.json`` under ``build``;
* :meth:`Stack.server_argv` / :meth:`Stack.client_argv` -- the command lines of a run (the server must
  print a JSON ready line with ``"ready": true`` and ``spki`` on stdout, and write its contract lines
  to the ``-log`` file the runner names, which becomes ``server.log``);
* :meth:`Stack.session` -- anything that must run beside the server for the length of one page load
  (a kernel tracer, say), as a context manager;
* :meth:`Stack.labels` / :meth:`Stack.run_meta` -- labels its traces carry, and what it adds to the
  ``versions`` block of ``meta.json`` (e.g. the version the server reported in its ready line).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicsm.errors import TestbedError
from quicsm.plugins import Registry

if TYPE_CHECKING:
    from quicsm.testbed.config import RunParams, ServerClient
    from quicsm.testbed.procs import ProcGroup

__all__ = ["Built", "Progress", "RunContext", "Source", "Stack", "all_stacks", "get", "names", "page_flag", "register"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Built:
    """Binaries of one stack build, and how they were made."""

    stack: str
    version: str
    cc: str
    server: Path
    client: Path
    patch_set: str | None
    """Name of the patch set compiled into the server (None for an uninstrumented server)."""
    cached: bool
    """True when nothing was built (the cache had it)."""
    seconds: float
    meta: Mapping[str, Any] = field(default_factory=dict)
    """What the build records: toolchain, module or crate checksums, locked dependency versions,
    where the patch set came from. Copied into each run's ``meta.json`` as ``build``."""

    def to_json(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**d, "server": str(self.server), "client": str(self.client), "meta": dict(self.meta)}


@dataclass(frozen=True)
class Source:
    """A release of a stack's source as a registry served it."""

    version: str
    dir: Path
    release: Mapping[str, Any]
    """What a patch set made for it records: ``{"module": {...}}`` or ``{"crate": {...}}``."""
    origin: str
    """Where it came from (``Go module proxy``, ``crates.io``)."""
    date: str | None = None
    """Release date, when the registry says."""

    def record(self) -> dict[str, Any]:
        """The content of the tree's SOURCE_FILE."""
        import datetime as dt

        return {
            **dict(self.release),
            **({"date": self.date} if self.date else {}),
            "from": self.origin,
            "fetched": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }


@dataclass(frozen=True)
class RunContext:
    """One page load as :meth:`Stack.session` sees it (after the server is ready, before the client)."""

    cfg: RunParams
    bins: ServerClient
    run_dir: Path
    log_path: Path
    """``server.log``: where the contract lines of this run must end up."""
    server_ns: str
    client_ns: str
    server_addr: str
    procs: ProcGroup
    """Start helper processes through this, so a failed or interrupted run stops them too."""


class Stack:
    """Base class of a stack; subclasses set the class attributes and implement :meth:`build`."""

    name: ClassVar[str] = ""
    implementation: ClassVar[str] = ""
    description: ClassVar[str] = ""
    ccs: ClassVar[tuple[str, ...]] = ()
    """Its controllers; the first is the one a run that names none uses (``--cc``'s default)."""
    clients: ClassVar[tuple[str, ...]] = ("go", "chromium")
    version_field: ClassVar[str] = "stack_version"
    default_version: ClassVar[str] = ""
    packet_threshold: ClassVar[bool] = False
    """Whether the server can be rebuilt with a fixed packet-reordering threshold (``--packet-threshold``)."""
    target: ClassVar[str | None] = None
    """The patch target (:mod:`quicsm.instrumentation.targets`) of the stack's source, if it has one."""
    protocol: ClassVar[str] = "h3"
    """The HTTP version its pages come over unless a run asks for another of :attr:`http_versions`."""
    http_versions: ClassVar[tuple[str, ...]] = ("h3",)
    zero_rtt: ClassVar[bool] = False
    """Whether its server accepts 0-RTT data from a resumed Go client (``RunParams.zero_rtt``)."""
    max_cwnd: ClassVar[bool] = False
    """Whether its server can be rebuilt with another maximum congestion window (``RunParams.max_cwnd``)."""
    qlog: ClassVar[bool] = False
    """Whether the server writes its own qlog when asked (``RunParams.qlog``)."""
    pages: ClassVar[bool] = False
    """Whether its server serves pages of mixed object sizes (``RunParams.page``, the ``-page`` flag)."""

    # ---- versions and checks ----------------------------------------------------------------------
    def normalize_version(self, version: str) -> str:
        """The canonical spelling of a version (quic-go: ``0.64.1`` -> ``v0.64.1``)."""
        return version

    def version(self, cfg: RunParams) -> str:
        """The version a run uses: ``stack_version`` if set, else the stack's own field, else the default."""
        own = getattr(cfg, self.version_field, None) if self.version_field != "stack_version" else None
        return self.normalize_version(cfg.stack_version or own or self.default_version)

    def versions(self) -> list[str]:
        """Versions with pinned (shipped) patch sets, oldest first."""
        return [self.default_version] if self.default_version else []

    @staticmethod
    def version_key(version: str) -> tuple[int, ...]:
        """``0.11.19`` -> (0, 11, 19): a crate's or Chromium's release numbers, to sort by."""
        return tuple(int(x) for x in version.split(".") if x.isdigit())

    def validate(self, cfg: RunParams) -> None:
        """Refuse what this stack cannot run (a one-line :class:`TestbedError`)."""
        if cfg.cc not in self.ccs:
            raise TestbedError(f"cc {cfg.cc!r} on {self.name}: choose {' or '.join(self.ccs)}")
        if cfg.client not in self.clients:
            raise TestbedError(f"client {cfg.client!r} on {self.name}: choose {' or '.join(self.clients)}")
        if cfg.qlog and not self.qlog:
            able = [s.name for s in all_stacks() if s.qlog]
            raise TestbedError(f"qlog: only the {', '.join(able)} servers write their own qlog here")
        if cfg.patch_set and self.target is None:
            raise TestbedError(f"--set: stack {self.name} takes no patch set")
        if cfg.packet_threshold is not None and not self.packet_threshold:
            able = [s.name for s in all_stacks() if s.packet_threshold]
            raise TestbedError(f"packet threshold: only the {' and '.join(able)} server can be rebuilt with one")
        if cfg.http is not None and cfg.http not in self.http_versions:
            raise TestbedError(f"http {cfg.http!r} on {self.name}: choose {' or '.join(self.http_versions)}")
        if cfg.zero_rtt and not self.zero_rtt:
            able = [s.name for s in all_stacks() if s.zero_rtt]
            raise TestbedError(
                f"0-RTT: stack {self.name} does not resume with 0-RTT here (stacks that do: {', '.join(able)})"
            )
        if cfg.zero_rtt and cfg.client != "go":
            raise TestbedError(
                "0-RTT runs need the Go client (it makes the connection whose session ticket it resumes)"
            )
        if cfg.zero_rtt and cfg.duration_s is not None:
            raise TestbedError("0-RTT is a page-load measure: give either zero_rtt or a duration (long flow)")
        if cfg.page is not None and not self.pages:
            able = [s.name for s in all_stacks() if s.pages]
            raise TestbedError(f"page: stack {self.name} serves N objects of one size (mixed pages: {', '.join(able)})")
        if cfg.max_cwnd is not None and not self.max_cwnd:
            able = [s.name for s in all_stacks() if s.max_cwnd]
            raise TestbedError(f"max cwnd: only the {' and '.join(able)} server can be rebuilt with one")
        own = getattr(cfg, self.version_field, None) if self.version_field != "stack_version" else None
        field_default = _field_default(self.version_field)
        if cfg.stack_version and own and own != field_default:
            a, b = self.normalize_version(cfg.stack_version), self.normalize_version(own)
            if a != b:
                option = "--" + self.version_field.replace("_", "-")
                raise TestbedError(f"--stack-version {a} and {option} {b} disagree: give one")

    # ---- source -----------------------------------------------------------------------------------
    def pristine_source(self, version: str, *, progress: Progress | None = None) -> Source:
        """The registry's pristine source of ``version`` (read-only, in a download cache)."""
        raise TestbedError(f"stack {self.name} has no source quicsm can fetch and patch")

    def fetch(self, version: str, dest: Path, *, progress: Progress | None = None) -> Source:
        """A writable copy of the pristine source of ``version`` at ``dest`` (which must not exist), with a
        :data:`~quicsm.instrumentation.targets.SOURCE_FILE` saying which release it is; written beside
        ``dest`` and renamed into place."""
        import json
        import shutil
        import tempfile

        from quicsm.instrumentation.targets import SOURCE_FILE
        from quicsm.testbed.buildtools import copy_writable

        src = self.pristine_source(self.normalize_version(version), progress=progress)
        if dest.exists():
            raise TestbedError(f"{dest}: already exists (give a new directory)")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.quicsm-fetch-", dir=dest.parent))
        try:
            copy_writable(src.dir, tmp / "tree")
            (tmp / "tree" / SOURCE_FILE).write_text(json.dumps(src.record(), indent=1) + "\n", encoding="utf-8")
            os.rename(tmp / "tree", dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return Source(src.version, dest, src.release, src.origin, src.date)

    # ---- building ---------------------------------------------------------------------------------
    def build(self, cfg: RunParams, *, progress: Progress | None = None, force: bool = False) -> Built:
        """Server and client for ``cfg`` (its version, cc, patch set), from the cache when possible."""
        raise NotImplementedError

    # ---- running ----------------------------------------------------------------------------------
    def server_argv(self, cfg: RunParams, bins: ServerClient, addr: str, log_path: Path) -> list[str]:
        """The server's command line (the testbed's Go server flags; other servers take the same)."""
        argv = [str(bins.server), "-addr", addr, "-objects", str(cfg.objects), "-size", str(cfg.size)]
        argv += ["-log", str(log_path), *(["-0rtt"] if cfg.zero_rtt else [])]
        return argv + page_flag(cfg)

    def client_argv(self, cfg: RunParams, bins: ServerClient, url: str, spki: str) -> list[str]:
        """The Go client's command line (the Chromium client is the runner's own)."""
        argv = [str(bins.client), "-url", url, "-spki", spki, "-timeout", f"{int(cfg.client_timeout_s)}s"]
        argv += ["-0rtt"] if cfg.zero_rtt else []
        return argv + (["-duration", f"{cfg.duration_s:g}s"] if cfg.duration_s is not None else [])

    def session(self, ctx: RunContext) -> contextlib.AbstractContextManager[None]:
        """Processes beside the server for one page load (nothing by default)."""
        return contextlib.nullcontext()

    def labels(self, cfg: RunParams) -> dict[str, str]:
        """Labels the traces of a run carry besides the scenario's."""
        return {}

    def run_meta(self, cfg: RunParams, bins: ServerClient, ready: Mapping[str, Any]) -> dict[str, Any]:
        """Entries for the ``versions`` block of ``meta.json`` (``ready`` is the server's ready line)."""
        return {}


def page_flag(cfg: RunParams) -> list[str]:
    """``-page N:BYTES,...`` for a page of mixed object sizes (the Go servers' flag), else nothing."""
    if cfg.page is None:
        return []
    return ["-page", ",".join(f"{n}:{size}" for n, size in cfg.page_groups)]


def with_go_client(stack: Stack, cfg: RunParams, server: Any, progress: Progress | None, **meta: Any) -> Built:
    """A Rust server build (:class:`~quicsm.testbed.buildtools.RustServer`) and the uninstrumented quic-go
    client of the run's ``quic_go_version`` that loads the page from it."""
    client_cfg = replace(cfg, stack="quic-go", cc="reno", stack_version=None, patch_set=None)
    client = get("quic-go").build(client_cfg, progress=progress)
    return Built(
        stack=stack.name,
        version=server.version,
        cc=cfg.cc,
        server=server.binary,
        client=client.client,
        patch_set=server.patch_set,
        cached=server.cached and client.cached,
        seconds=round(server.seconds + client.seconds, 3),
        meta={**server.meta, **meta, "client": {"quic_go": client.version, "patch_set": client.patch_set}},
    )


def _field_default(name: str) -> Any:
    from dataclasses import MISSING

    from quicsm.testbed.config import RunParams

    for f in fields(RunParams):
        if f.name == name:
            return None if f.default is MISSING else f.default
    return None


_REGISTRY: Registry[Stack] = Registry(__name__, __path__)


def register(stack: Stack) -> Stack:
    """Add a stack (a module of this package calls this at import)."""
    if not stack.name or not stack.ccs or not stack.implementation:
        raise ValueError(f"{type(stack).__name__}: a stack needs name, implementation and ccs")
    return _REGISTRY.register(stack.name, stack)


def all_stacks() -> Iterator[Stack]:
    return iter(sorted(_REGISTRY.load().values(), key=lambda s: (s.name != "quic-go", s.name)))


def names() -> list[str]:
    """Stack names, quic-go (the default) first."""
    return [s.name for s in all_stacks()]


def get(name: str) -> Stack:
    """The stack called ``name``; a one-line error listing the known ones."""
    try:
        return _REGISTRY.load()[name]
    except KeyError:
        raise TestbedError(f"stack {name!r}: choose one of {', '.join(names())}") from None
