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
