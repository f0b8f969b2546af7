"""Outputs: whole or nothing for files; devices and pipes are written into, never replaced."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import synth_cubic_lines

from quicsm.cli.main import cli
from quicsm.files import atomic_output


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    out.write_text("old")
    with pytest.raises(RuntimeError), atomic_output(str(out), binary=False) as fh:
        fh.write("half")
        raise RuntimeError("stop")
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["m.json"]


def test_a_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    with atomic_output(str(fifo)) as fh:
        fh.write(b"through the pipe")
    reader.join(timeout=10)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and os.listdir(tmp_path) == ["pipe"]


def test_dash_o_dev_null_keeps_dev_null_a_device(tmp_path: Path) -> None:
    """`quicsm infer LOG -o /dev/null` (as benchmarks do) once replaced the device with a regular file."""
    log = tmp_path / "server.log"
    log.write_text("".join(line + "\n" for line in synth_cubic_lines(3, 20)))
    res = CliRunner().invoke(cli, ["infer", str(log), "-o", "/dev/null"])
    assert res.exit_code == 0, res.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not [n for n in os.listdir("/dev") if n.startswith(".null.")]


# ---- faults on the output path (issue 36 items 12-14): one line naming the output, old file kept, no temporary


def _log(path: Path, conns: int = 30, steps: int = 40) -> Path:
    path.write_text("\n".join(synth_cubic_lines(conns, steps, seed=3)) + "\n")
    return path


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mounts a small or read-only tmpfs)")


@pytest.fixture
def small_disk(tmp_path: Path):
    import subprocess

    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


VERBS = {
    "parse-parquet": lambda log, out: ["parse", log, "-o", f"{out}/x.parquet"],
    "parse-jsonl": lambda log, out: ["parse", log, "-o", f"{out}/x.jsonl"],
    "infer": lambda log, out: ["infer", log, "--engine", "dfg", "-o", f"{out}/x.json"],
    "export": lambda log, out: ["export", log, "-o", f"{out}/x.log"],
    "compare": lambda log, out: ["compare", log, log, "--engine", "dfg", "--format", "json", "-o", f"{out}/x.json"],
    "baseline": lambda log, out: ["baseline", "save", log, "-o", f"{out}/x.qsb"],
}


@needs_root
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_full_disk_is_one_line_naming_the_output_and_keeps_the_old_file(
    verb: str, tmp_path: Path, small_disk: Path
) -> None:
    log = str(_log(tmp_path / "server.log", conns=200, steps=60))
    args = VERBS[verb](log, str(small_disk))
    out = Path(args[-1])
    out.write_bytes(b"old")
    fd = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT)  # the rest of the disk taken: no output fits
    try:
        while os.write(fd, bytes(4096)):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1 and not isinstance(res.exception, OSError), res.output
    assert f"Error: {out}: cannot write (No space left on device); the old file is kept" in res.output
    assert "Traceback" not in res.output and ".tmp" not in res.output
    assert out.read_bytes() == b"old" and sorted(os.listdir(small_disk)) == sorted([out.name, "filler"])


@needs_root
def test_a_read_only_place_is_one_line(tmp_path: Path) -> None:
    import subprocess

    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(ro)], check=True)
    try:
        for sub in ("m.json", "sub/m.json"):
            res = CliRunner().invoke(
                cli, ["infer", str(_log(tmp_path / "s.log")), "--engine", "dfg", "-o", f"{ro}/{sub}"]
            )
            assert res.exit_code == 1 and f"Error: {ro}/{sub}: cannot write (Read-only file system)" in res.output
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_an_output_that_is_a_directory_is_one_line(verb: str, tmp_path: Path) -> None:
    log = str(_log(tmp_path / "server.log"))
    args = VERBS[verb](log, str(tmp_path))
    Path(args[-1]).mkdir()
    res = CliRunner().invoke(cli, args)
    assert res.exit_code in (1, 2) and "Traceback" not in res.output, res.output
    assert "is a directory" in res.output and ".tmp" not in res.output
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_an_output_equal_to_an_input_is_refused(tmp_path: Path) -> None:
    import gzip

    raw = gzip.compress(_log(tmp_path / "in.log").read_bytes())
    (tmp_path / "in.log.gz").write_bytes(raw)
    (tmp_path / "link").symlink_to(tmp_path)
    for out in ("in.log.gz", "./in.log.gz", str(tmp_path / "link" / "in.log.gz")):
        res = CliRunner().invoke(cli, ["parse", str(tmp_path / "in.log.gz"), "-o", str(tmp_path / out)])
        assert res.exit_code == 1 and "is also an input; not overwritten" in res.output, (out, res.output)
    os.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["parse", "in.log.gz", "-o", "in.log.gz"])
    assert res.exit_code == 1 and "Error: in.log.gz: is also an input; not overwritten" in res.output
    res = CliRunner().invoke(cli, ["infer", str(tmp_path), "--engine", "dfg", "-o", str(tmp_path / "in.log.gz")])
    assert res.exit_code == 1, res.output  # a directory's files are inputs too
    assert (tmp_path / "in.log.gz").read_bytes() == raw


def test_stale_temporaries_of_dead_writers_go_on_the_next_write(tmp_path: Path) -> None:
    """What a SIGKILL left: a temporary named for a writer that no longer runs (live writers' stay)."""
    import hashlib
    import socket
    import subprocess

    from quicsm.files import _host_tag

    assert _host_tag() == hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]  # as earlier versions name them
    gone_pid = subprocess.Popen(["true"])
    gone_pid.wait()
    stale = tmp_path / f".m.json.{gone_pid.pid}-{_host_tag()}.abcd1234.tmp"
    alive = tmp_path / f".m.json.{os.getpid()}-{_host_tag()}.efgh5678.tmp"
    other = tmp_path / f".n.json.{gone_pid.pid}-{_host_tag()}.abcd1234.tmp"
    for p in (stale, alive, other):
        p.write_bytes(b"partial")
    with atomic_output(str(tmp_path / "m.json")) as fh:
        fh.write(b"{}")
    assert sorted(os.listdir(tmp_path)) == sorted([alive.name, other.name, "m.json"])


def _until(cond, timeout: float = 60.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("dask", [None, "local:2"])
def test_sigterm_while_writing_leaves_no_temporary(tmp_path: Path, dask: str | None) -> None:
    import signal
    import subprocess
    import sys

    logs = [str(_log(tmp_path / f"s{i}.log", conns=400, steps=100)) for i in range(4)]
    out = tmp_path / "out"
    out.mkdir()
    args = [sys.executable, "-m", "quicsm", "parse", *logs, "-o", str(out / "x.parquet"), "-q"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # this tree's quicsm
    proc = subprocess.Popen(args + (["--dask", dask] if dask else []), stderr=subprocess.PIPE, env=env)
    try:
        _until(lambda: any(n.endswith(".tmp") for n in os.listdir(out)) or proc.poll() is not None)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1].decode()
    finally:
        proc.kill()
    assert proc.returncode in (128 + signal.SIGTERM, -signal.SIGTERM, 0), err
    assert "Traceback" not in err
    assert [n for n in os.listdir(out) if n != "x.parquet"] == []


def test_sigterm_the_instant_the_temporary_is_made_leaves_nothing(tmp_path: Path) -> None:
    """The signal between the temporary's creation and anything after it (a loaded machine preempts a
    process right after a system call): it is found by name."""
    import signal
    import subprocess
    import sys

    script = (
        "import os, signal, tempfile, sys\n"
        "from quicsm.files import atomic_output\n"
        "made = tempfile.mkstemp\n"
        "def made_then_killed(*a, **k):\n"
        "    r = made(*a, **k)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return r\n"
        "tempfile.mkstemp = made_then_killed\n"
        "with atomic_output(sys.argv[1]) as fh:\n"
        "    fh.write(b'never')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "x.json")], env=env, timeout=60)
    assert done.returncode in (128 + signal.SIGTERM, -signal.SIGTERM)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("verb", ["parse-jsonl", "infer", "export"])
def test_a_full_device_is_one_line(verb: str, tmp_path: Path) -> None:
    """`-o /dev/full` (a device written in place): ENOSPC is the same one line as a full disk."""
    args = VERBS[verb](str(_log(tmp_path / "server.log")), "/dev")
    args[-1] = "/dev/full"
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1 and "Error: /dev/full: cannot write (No space left on device)" in res.output, res.output


def test_check_may_not_write_over_its_baseline(tmp_path: Path) -> None:
    log = str(_log(tmp_path / "server.log"))
    base = tmp_path / "base.qsb"
    assert CliRunner().invoke(cli, ["baseline", "save", log, "-o", str(base)]).exit_code == 0
    before = base.read_bytes()
    res = CliRunner().invoke(cli, ["check", str(base), log, "--json", str(base)])
    assert res.exit_code == 2 and f"{base}: is also an input; not overwritten" in res.output, res.output
    assert base.read_bytes() == before


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "rename-aside"])
def test_replace_dir_puts_the_new_directory_in_place_and_removes_the_old(
    tmp_path: Path, exchange: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways (one exchange, or the fallback without renameat2) end alike: the new tree at the target,
    nothing else beside it."""
    from quicsm import files

    if not exchange:
        monkeypatch.setattr(files, "_exchange", lambda a, b: False)
    target, new = tmp_path / "set", tmp_path / ".set.new"
    for d, text in ((target, "old"), (new, "new")):
        d.mkdir()
        (d / "f").write_text(text)
    files.replace_dir(new, target)
    assert (target / "f").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["set"]
    new.mkdir()
    files.replace_dir(new, tmp_path / "other")  # nothing to replace: a rename
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "set"]
