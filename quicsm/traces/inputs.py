"""Inputs: what the arguments of a verb name, the trace-id scope of each file, its sidecar metadata, and
opening it once (its kind is sniffed from the bytes the reader then reads on).

Everything here is linear in the number of files: a run over 10^6 small files lists, scopes and opens
each once. Opening bytes (plain, gzip, stdin) lives in :mod:`quicsm.files`.
"""

from __future__ import annotations

import contextlib
import glob
import io
import os
import stat
import sys
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

from quicsm.errors import InputError, reading
from quicsm.files import GZIP_MAGIC, STDIN, GzipReader, headed, is_gzip, note_inputs, open_binary
from quicsm.traces.events import TraceMeta
from quicsm.traces.readers import kind_of, name_kind, spec_for, suffixes
from quicsm.traces.sniff import HEAD_BYTES, kind_by_name

__all__ = [
    "FileBatch",
    "INPUT_SUFFIXES",
    "SIDECAR",
    "STDIN",
    "Scopes",
    "Sidecars",
    "expand_input",
    "expand_inputs",
    "file_batches",
    "local_size",
    "show_batches",
    "is_gzip",
    "open_binary",
    "open_input",
    "read_file_list",
    "trace_scopes",
    "workers",
    "workers_for",
]

SIDECAR = "meta.json"

INPUT_SUFFIXES = (
    ".log",
    ".log.gz",
    ".txt",
    ".txt.gz",
    ".qlog",
    ".qlog.gz",
    ".sqlog",
    ".sqlog.gz",
    ".jsonl",
    ".jsonl.gz",
    ".parquet",
)
"""What a directory contributes (a glob takes every file it matches but hidden ones and ``meta.json``)."""


def open_input(path: str) -> tuple[str, BinaryIO]:
    """The input's kind and its bytes (gunzipped), from one open: the head that decides the kind is read
    once and served again to the reader; a file smaller than that comes back whole as a ``BytesIO``
    (read with the system calls ``cat`` makes, no buffered file object), and so does a plain file smaller
    than its reader's :attr:`~quicsm.traces.readers.ReaderSpec.whole`. Stdin is a log unless its
    name says otherwise (it has none). The kind is the registry's (:func:`quicsm.traces.readers.kind_of`)."""
    if path == STDIN:
        return name_kind(path), open_binary(path)
    with reading(path):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            head = _read_up_to(fd, HEAD_BYTES)
        except OSError:
            os.close(fd)
            raise
    if head.startswith(GZIP_MAGIC):
        # the head read is inflated once, for the kind and for the reader; a file that fit in it is closed
        whole = len(head) < HEAD_BYTES
        if whole:
            os.close(fd)
        raw = io.BytesIO() if whole else open(fd, "rb", buffering=0)
        gz = GzipReader(raw, head=head)
        return kind_of(gz.head(HEAD_BYTES, whole), path), gz  # type: ignore[return-value]
    kind = kind_of(head, path)
    if len(head) < HEAD_BYTES:  # the whole file: served from memory, no second read
        os.close(fd)
        return kind, io.BytesIO(head)
    with reading(path):
        try:
            limit = spec_for(kind).whole
            data = _read_whole(fd, head, limit() if callable(limit) else limit)
        except BaseException:
            os.close(fd)
            raise
    if data is not None:
        os.close(fd)
        return kind, io.BytesIO(data)
    return kind, _rewound(fd, head)


def _read_whole(fd: int, head: bytes, limit: int) -> bytes | None:
    """A regular file smaller than ``limit`` bytes, whole: its ``head`` and the rest read after it (one
    byte more than its size asked: a file that grew since is not taken whole). None otherwise, the file
    then read from its first byte again."""
    if limit <= len(head):
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or not len(head) <= st.st_size < limit:  # (a file that shrank: read again too)
        return None
    want = st.st_size - len(head)
    rest = _read_up_to(fd, want + 1)
    return None if len(rest) > want else head + rest


def _read_up_to(fd: int, n: int) -> bytes:
    """``n`` bytes from ``fd``, fewer only at the end of the file (a short read is not the end)."""
    data = os.read(fd, n)
    while 0 < len(data) < n:
        more = os.read(fd, n - len(data))
        if not more:
            break
        data += more
    return data


def _rewound(fd: int, head: bytes) -> BinaryIO:
    """The file from its first byte: seeked back, or (a pipe, a FIFO such as ``<(zcat x.gz)``) its head
    served from memory before the rest."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        return headed(open(fd, "rb"), head)
    return open(fd, "rb")


def _walk_inputs(top: str) -> tuple[list[str], list[str]]:
    """The input files under ``top``, recursively, sorted; file types come from the directory listing
    (no stat per file), symbolic links to directories are not followed (as :func:`os.walk`). And the
    testbed runs' ``qlog/`` folders left out: a run (a folder with a ``meta.json``) whose own log holds
    contract lines has its qlogs left out, the same connections written twice (quic-go and quinn runs
    made with ``qlog = true``); a run whose log holds none (ngtcp2's: an empty ``server.log``) is read
    from its qlogs. A qlog named as a file or by a glob is always read."""

    wanted = INPUT_SUFFIXES + suffixes()  # and the names of kinds reader modules registered
    found: list[str] = []
    left_out: list[str] = []
    folders = [top]
    while folders:
        qlogs, run, first = None, False, len(found)
        with os.scandir(folders.pop()) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    if e.name == QLOG_FOLDER:
                        qlogs = e.path
                    else:
                        folders.append(e.path)
                elif e.name == SIDECAR:
                    run = True
                elif e.name.lower().endswith(wanted) and e.name[0] != "." and e.is_file():
                    found.append(e.path)
        if qlogs is not None:
            logs = [p for p in found[first:] if kind_by_name(p) == "log"] if run else []
            (left_out if any(map(_holds_contract_lines, logs)) else folders).append(qlogs)
    found.sort()
    return found, sorted(left_out)


def _holds_contract_lines(path: str) -> bool:
    """Whether a log holds the contract tag, read up to its first one. Not just its head: the contract
    lets a tag sit on any line (docs/log-format.md), and a log whose first tag came after HEAD_BYTES of
    other output would have its run's qlogs read too, each connection twice. An empty log is read at
    once; an unreadable one holds none (its qlogs are read)."""
    from quicsm.traces.contract import TAG_BYTES

    try:
        with open_binary(path) as fh:
            tail = b""
            while chunk := fh.read(1 << 20):
                if TAG_BYTES in tail + chunk:
                    return True
                tail = chunk[1 - len(TAG_BYTES) :]
    except (InputError, OSError, EOFError, zlib.error):
        pass
    return False


def _plain_name(path: str) -> bool:
    """Not hidden, not a sidecar: a glob takes every other file it matches."""
    name = os.path.basename(path)
    return not name.startswith(".") and name != SIDECAR


def _glob(pattern: str) -> Iterator[str]:
    """The paths ``pattern`` matches, as :func:`glob.glob` with ``recursive=True`` finds them, but
    ``**`` does not descend into symbolic links to directories (as :func:`os.walk` and a directory
    argument): a link loop is not followed round, so every file is found once and the walk ends."""
    head, sep, rest = pattern.partition("**")
    if not sep or (head and not head.endswith("/")) or (rest and not rest.startswith("/")):
        yield from glob.iglob(pattern)  # no ** component: glob's single levels cannot loop
        return
    tops = [p for p in glob.iglob(head) if os.path.isdir(p)] if glob.has_magic(head) else [head]
    for top in tops:
        for folder in _folders(top or "."):
            prefix = folder if top else os.path.relpath(folder)
            if not rest:
                yield prefix if top else folder
                continue
            sub = os.path.join(glob.escape(prefix), rest.lstrip("/")) if prefix != "." else rest.lstrip("/")
            yield from _glob(sub)


def _folders(top: str) -> Iterator[str]:
    """``top`` and every folder under it, not through symbolic links, hidden ones left out (as glob's ``**``)."""
    stack = [top]
    while stack:
        folder = stack.pop()
        yield folder
        try:
            with os.scandir(folder) as entries:
                subs = [e.path for e in entries if e.name[0] != "." and e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        stack.extend(sorted(subs, reverse=True))


def expand_input(arg: str) -> list[str]:
    """One argument of any verb: ``-``, a file, a quoted glob, or a directory (its inputs, recursively); sorted."""
    if arg == STDIN:
        return [STDIN]
    if os.path.isdir(arg):
        found, left_out = _walk_inputs(arg)
        if not found:
            raise InputError(f"{arg}: directory holds no log, qlog or trace files ({', '.join(INPUT_SUFFIXES)})")
        if left_out:
            from quicsm.textsafe import terminal

            print(
                f"note: {len(left_out)} run(s)' {QLOG_FOLDER}/ left out (e.g. {terminal(left_out[0])}): the run's log "
                "holds the contract lines of the same connections; name the qlogs to read them",
                file=sys.stderr,
            )
        return found
    if not os.path.exists(arg) and glob.has_magic(arg):
        found = []
        for p in sorted(_glob(arg)):  # one stat a match (10^5 files: 0.8 s saved)
            try:
                mode = os.stat(p).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                found.extend(expand_input(p))
            elif stat.S_ISREG(mode) and _plain_name(p):
                found.append(p)
        if not found:
            raise InputError(f"{arg}: no file matches")
        return found
    with reading(arg):
        mode = os.stat(arg).st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):  # /dev/zero, /dev/urandom, a disk: endless or not a log
        raise InputError(f"{arg}: a device, not a file (give - to read stdin)")
    return [arg]


def expand_inputs(args: Sequence[str], storage_options: dict[str, str] | None = None) -> list[str]:
    """Every argument through :func:`expand_input` (URL globs listed by their store, with fsspec's
    ``storage_options``), in order; stdin at most once (it can be read only once). The one expansion
    of every verb's inputs."""
    from quicsm.fleet.sources import has_glob, is_url, list_urls

    if isinstance(args, str | bytes) or not all(isinstance(a, str | os.PathLike) for a in args):
        raise InputError(f"inputs must be a list of paths, not {str(args)[:80]!r}")
    out: list[str] = []
    for a in args:
        arg = os.fspath(a)
        if is_url(arg):
            out.extend(list_urls(arg, storage_options) if has_glob(arg) else [arg])
        else:
            out.extend(expand_input(arg))
    if out.count(STDIN) > 1:
        raise InputError("- (stdin) is given more than once; it can be read only once")
    out = _once(out)
    note_inputs(out)  # the command's outputs may not replace them
    return out


def _once(paths: list[str]) -> list[str]:
    """Each file once, where it first appears: arguments that overlap (a folder and a glob of its
    files, one file under two spellings) would read its connections twice, under the same ids. Said
    on stderr, with how many and one of them."""
    norm = os.path.normpath
    keys = paths
    absolute = sum(p[:1] == "/" for p in paths)
    if 0 < absolute < len(paths):  # both spellings: relative ones made absolute
        cwd = os.getcwd() + "/"
        keys = [p if p[:1] == "/" or "://" in p or p == STDIN else cwd + p for p in paths]
    if any("/." in k or "//" in k or k[:1] == "." for k in keys):  # ./a, a/../b, a//b
        keys = [norm(k) if "/." in k or "//" in k or k[:1] == "." else k for k in keys]
    if len(set(keys)) == len(keys):
        return paths
    seen: set[str] = set()
    out: list[str] = []
    twice: list[str] = []
    for p, key in zip(paths, keys):
        if key in seen:
            twice.append(p)
        else:
            seen.add(key)
            out.append(p)
    if twice:
        from quicsm.textsafe import terminal

        print(
            f"note: {len(twice)} input file(s) named more than once by the arguments (e.g. {terminal(twice[0])}); "
            "each is read once",
            file=sys.stderr,
        )
    return out


class Scopes(Mapping[str, str]):
    """The trace-id scope of each path (:func:`trace_scopes`): its file name, unless listed apart. A
    name is cut from the path when asked for, so a run over 10^6 files holds no scope string a file."""

    __slots__ = ("_paths", "_apart")

    def __init__(self, paths: Sequence[str], apart: dict[str, str]) -> None:
        self._paths, self._apart = paths, apart

    def __getitem__(self, path: str) -> str:
        hit = self._apart.get(path)
        return hit if hit is not None else path[path.rfind("/") + 1 :]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(self._paths))

    def __len__(self) -> int:
        return len(set(self._paths))


def trace_scopes(paths: Sequence[str]) -> Scopes:
    """Short, unique trace-id prefixes: the file name, or more of the path where names collide.

    A path gets the shortest suffix of its (normalised) components that no other path shares, all of
    it when none is unique; a path given twice collides with itself. File names are counted as
    strings; only the paths whose names collide are looked at again, one component more each round,
    and only they (and names that normalising changes) are kept apart. Each folder is normalised once,
    so the work is O(files x depth); the memory, beside the paths, a name and two dictionary slots a
    file while counting, and nothing a file after.
    """
    prefixes: dict[str, str] = {}  # folder as given, with its slash -> normalised, with its slash

    def split(p: str) -> tuple[str, str]:
        cut = p.rfind("/") + 1
        name = p[cut:]
        if name in ("", ".", ".."):  # not a file name: the whole path normalised
            full = os.path.normpath(p)
            cut = full.rfind("/") + 1
            return full[:cut], full[cut:]
        if not cut:
            return "", name
        folder = p[:cut]
        prefix = prefixes.get(folder)
        if prefix is None:  # a folder and a plain name normalise as the folder alone would
            prefix = prefixes[folder] = os.path.normpath(folder + "_")[:-1]
        return prefix, name

    apart: dict[str, str] = {}
    colliding: list[tuple[str, str, int]] = []  # path, normalised, where its suffix of this round starts
    bases = [split(p)[1] for p in paths]
    counts = Counter(bases)
    for p, name in zip(paths, bases):
        if counts[name] > 1:
            prefix, name = split(p)
            if prefix:
                colliding.append((p, prefix + name, len(prefix)))
                continue
        if len(p) - p.rfind("/") - 1 != len(name) or not p.endswith(name):  # not the name as given
            apart[p] = name
    del bases, counts
    while colliding:
        keys = [full[full.rfind("/", 0, start - 1) + 1 :] for _, full, start in colliding]
        counts = Counter(keys)
        left = []
        for (p, full, _), key in zip(colliding, keys):
            start = len(full) - len(key)
            if not start or counts[key] <= 1:
                apart[p] = key
            else:
                left.append((p, full, start))
        colliding = left
    return Scopes(paths, apart)


@dataclass(frozen=True, slots=True)
class FileBatch:
    """A share of a run's input files read as one task (a Dask worker's): each with the trace-id scope
    the whole run gives it, so ids do not depend on how the files were cut into tasks."""

    files: tuple[str, ...]
    scopes: tuple[str, ...]
    bytes: int = 0
    """Their size (local files; 0 for URLs)."""
    options: tuple[tuple[str, str], ...] = ()
    """fsspec storage options for URLs (``--storage-option``): they travel to the workers with the task."""

    def scope_map(self) -> dict[str, str]:
        return dict(zip(self.files, self.scopes))

    def storage_options(self) -> dict[str, str]:
        return dict(self.options)


TASK_BYTES = 64 << 20
TASK_FILES = 4096
TASKS_PER_WORKER = 8
"""``local:N`` cuts a run into at least this many tasks a worker (fewer files each, never more than
:data:`TASK_FILES`): a pool task costs about a millisecond, and many small tasks end together where
five tasks of 4,096 files on two workers left the last one running alone."""
SIZE_SAMPLE = 512
"""Files ``stat``-ed to estimate the sizes of a run of more (a ``stat`` a file cost 0.45 s at 10^5)."""

SMALL_RUN_FILES = 1000
SMALL_RUN_BYTES = 1 << 30
"""A run of fewer files than :data:`SMALL_RUN_FILES` and under :data:`SMALL_RUN_BYTES` (local files) is
too small to gain from ``--dask``: the workers' start and feeding cost about what they save (on two
cores ``local:2`` lost to one process on 1 qlog, 0.40 against 0.37 s, and on 400 qlogs, 1.29x, before
session 8's faster reads). From this many files on, ``dask="auto"`` reads local files on ``local:2`` when
a second core is usable and idle (:func:`workers_for`): 2,000 testbed qlogs of 0.11 MB ran in 0.68x the
time of one process (experiments/fleet.notes.md)."""
AUTO = "auto"
"""``dask="auto"`` (``--dask auto``, the default of the verbs that learn a model): :func:`workers_for` chooses."""
OFF = "off"
"""``dask="off"`` (``--dask off``), as None: one process."""


def local_size(path: str) -> int:
    """A local file's size in bytes; 0 for stdin, a URL or a file that cannot be ``stat``-ed (said when it
    is read)."""
    from quicsm.fleet.sources import is_url

    try:
        return 0 if path == STDIN or is_url(path) else os.path.getsize(path)
    except OSError:
        return 0


def workers_for(dask: str | None, files: Sequence[str]) -> str | None:
    """The scheduler a run of ``files`` (expanded: :func:`expand_inputs`) is read on; None for one process.

    ``dask`` None, "" or ``"off"``: one process; a scheduler (``local[:N]``, ``tcp://host:8786``): as
    given; ``"auto"``: ``local:2`` when a second core is usable and idle
    (:func:`quicsm.fleet.machine.spare_core`), the workers can be forked (no other thread runs here:
    :func:`quicsm.fleet.machine.forks`), every input is a local file and the run is not too small to
    gain: :data:`SMALL_RUN_FILES` files or more, or :data:`SMALL_RUN_BYTES` in enough files for two
    workers' tasks (200 qlogs of 6.2 MB: 0.87x the wall time of one process; one 1 GB qlog gains
    nothing). Results do not depend on it: tasks return in input order and are merged in it.

    Examples
    --------
    >>> from quicsm.traces.inputs import workers_for
    >>> workers_for("off", ["a.qlog"]), workers_for("local:4", ["a.qlog"]), workers_for("auto", ["a.qlog"])
    (None, 'local:4', None)
    """
    if dask != AUTO:
        return None if dask in (None, "", OFF) else dask
    from quicsm.fleet.machine import forks, spare_core
    from quicsm.fleet.sources import is_url

    if not spare_core() or not forks() or any(p == STDIN or is_url(p) for p in files):
        return None
    if len(files) >= SMALL_RUN_FILES:
        return "local:2"
    if len(files) < 2 * TASKS_PER_WORKER:
        return None
    return "local:2" if sum(map(local_size, files)) >= SMALL_RUN_BYTES else None


@contextmanager
def workers(dask: str | None, files: Sequence[str]) -> Iterator[str | None]:
    """:func:`workers_for`'s choice for the block that reads ``files``; local workers that ``"auto"``
    started are shut down on leaving it (the caller asked for none: a later run in this process must
    not meet workers forked with an old environment)."""
    chosen = workers_for(dask, files)
    try:
        yield chosen
    finally:
        if chosen and dask == AUTO:
            from quicsm.fleet.pool import close_pools

            close_pools()


def file_batches(
    files: Sequence[str],
    *,
    dask: str | None = None,
    storage_options: dict[str, str] | None = None,
    target_bytes: int = TASK_BYTES,
    max_files: int = TASK_FILES,
    workers: int | None = None,
) -> list[FileBatch]:
    """``files`` cut, in order, into batches of about ``target_bytes`` (local sizes) and at most
    ``max_files`` files: tasks large enough that a scheduler's cost per task is small beside the work,
    and many enough to keep the workers busy (``local:N``: :data:`TASKS_PER_WORKER` a worker at
    least). Relative paths are refused for a cluster whose workers run elsewhere (``tcp://``: they
    would look in their own directory); a run too small to gain (:data:`SMALL_RUN_FILES`) is said
    on stderr.

    Sizes: of a run of more than :data:`SIZE_SAMPLE` files, a sample is ``stat``-ed first; when its
    files are so small that batches of ``max_files`` stay under an eighth of ``target_bytes``, the run
    is cut by count alone and its batches say no size (progress then counts files).

    ``workers``: cut as for ``local:workers`` whatever runs the batches (one process, ``local:N``, a
    cluster): a cut that is a function of the files alone (``parse -o x.parquet`` ends its row groups
    where the batches end, so its bytes do not depend on who read them)."""
    from quicsm.fleet.cluster import parse_scheduler
    from quicsm.fleet.sources import is_url

    where, nworkers = parse_scheduler(dask) if dask else ("", None)
    if dask and where != "local":
        rel = next((p for p in files if not is_url(p) and not os.path.isabs(p)), None)
        if rel is not None:
            raise InputError(
                f"{rel}: a relative path, but the workers of {dask} run in their own directory; "
                "give absolute paths on a shared filesystem, or URLs"
            )
    if workers is not None or where == "local":
        per = workers or nworkers or 2
        max_files = min(max_files, max(1, -(-len(files) // (TASKS_PER_WORKER * per))))
    options = tuple(sorted((storage_options or {}).items()))
    scopes = trace_scopes(files)

    out: list[FileBatch] = []
    estimate = None
    if len(files) > SIZE_SAMPLE:
        sample = files[:: len(files) // SIZE_SAMPLE]
        mean = sum(map(local_size, sample)) / len(sample)
        if mean * max_files < target_bytes / 8:
            estimate = round(mean * len(files))
    if estimate is not None:
        for start in range(0, len(files), max_files):
            part = tuple(files[start : start + max_files])
            out.append(FileBatch(part, tuple(scopes[p] for p in part), 0, options))
    else:
        start, total = 0, 0
        for i, path in enumerate(files):
            total += local_size(path)
            if total >= target_bytes or i + 1 - start >= max_files or i + 1 == len(files):
                part = tuple(files[start : i + 1])
                out.append(FileBatch(part, tuple(scopes[p] for p in part), total, options))
                start, total = i + 1, 0
    total = estimate if estimate is not None else sum(b.bytes for b in out)
    if dask and len(files) < SMALL_RUN_FILES and total < SMALL_RUN_BYTES and not any(map(is_url, files)):
        print(
            f"warning: --dask on {len(files)} file(s), {total / 1e6:.0f} MB: a run this small spends more on "
            "starting and feeding the workers than it gains (docs/fleet.md: when Dask pays off)",
            file=sys.stderr,
        )
    return out


def show_batches(what: str, batches: Sequence[FileBatch]) -> Callable[[FileBatch], None]:
    """Progress over batches of files (:class:`quicsm.fleet.run.Progress`), as the executor's callback."""
    from quicsm.fleet.run import Progress

    shown = Progress(what, sum(len(b.files) for b in batches), sum(b.bytes for b in batches))
    return lambda b: shown.advance(len(b.files), b.bytes)


class Sidecars:
    """The ``meta.json`` beside each input, if any (testbed runs write one; a run's ``qlog/`` folder takes
    the run's), remembered per directory: one look for ``meta.json`` per folder, not per file."""

    def __init__(self) -> None:
        self._by_dir: dict[str, TraceMeta] = {}

    def __call__(self, path: str) -> TraceMeta:
        if path == STDIN:
            return TraceMeta()
        folder = path[: path.rfind("/") + 1]  # as given (with its slash): one folder is spelled alike in a run
        hit = self._by_dir.get(folder)
        if hit is None:
            hit = self._by_dir[folder] = _sidecar_in(os.path.abspath(folder or "."))
        return hit


QLOG_FOLDER = "qlog"
"""Where the testbed writes a run's qlogs: ``<run>/qlog/``, beside the run's ``<run>/meta.json``."""


def _sidecar_in(folder: str) -> TraceMeta:
    from quicsm.traces.runmeta import Sidecar, read_meta

    side = os.path.join(folder, SIDECAR)
    if not os.path.isfile(side) and os.path.basename(folder) == QLOG_FOLDER:
        side = os.path.join(os.path.dirname(folder), SIDECAR)  # a run's qlog/ folder: the run's meta.json
    if not os.path.isfile(side):
        return TraceMeta()
    d: Sidecar = read_meta(side, Sidecar)
    return TraceMeta(d.implementation, d.version, {k: str(v) for k, v in d.labels.items()}, d.cc)


MAX_LISTED = 4_000_000
"""Inputs ``--files-from`` may name: 4x the largest run measured (10^6 files); a path held costs ~100 bytes."""
MAX_PATH_BYTES = 4096
"""Longest line of a ``--files-from`` list (Linux's PATH_MAX)."""


def read_file_list(source: str) -> list[str]:
    """The inputs named in ``source`` (``--files-from``), one a line (blank lines skipped); ``-`` is
    stdin. So ``find``, ``aws s3 ls`` and the like compose with quicsm. Read a line at a time: a line
    longer than a path can be or holding NUL (``/dev/zero``), or more than :data:`MAX_LISTED` lines,
    is an error naming the line, not memory filled."""
    name = "<stdin>" if source == STDIN else source
    out: list[str] = []
    with reading(name), contextlib.nullcontext(sys.stdin.buffer) if source == STDIN else open(source, "rb") as fh:
        for n, raw in enumerate(iter(lambda: fh.readline(MAX_PATH_BYTES + 1), b""), 1):
            if b"\0" in raw:
                raise InputError(f"{name}:{n}: not a list of inputs (a NUL byte; give one path a line)")
            if len(raw) > MAX_PATH_BYTES and not raw.endswith(b"\n"):
                raise InputError(f"{name}:{n}: a line longer than {MAX_PATH_BYTES} bytes; not a path")
            line = os.fsdecode(raw).strip()
            if line:
                if len(out) >= MAX_LISTED:
                    raise InputError(f"{name}:{n}: more than {MAX_LISTED:,} inputs listed")
                out.append(line)
    return out
