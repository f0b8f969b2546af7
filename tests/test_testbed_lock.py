"""The testbed lock (tests/conftest.py): root tests take turns with emulator runs and benchmarks on the machine."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest
from conftest import TESTBED_LOCK, hold_testbed_lock


def _free(lock: Path) -> bool:
    """Whether another open file description could take ``lock`` now."""
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_the_lock_is_held_and_waited_for(tmp_path: Path) -> None:
    lock = tmp_path / "testbed.lock"
    holder = os.open(lock, os.O_CREAT | os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # what `flock LOCK CMD` holds while CMD runs
    threading.Timer(0.3, os.close, (holder,)).start()
    t0 = time.monotonic()
    with hold_testbed_lock("t", lock):
        waited = time.monotonic() - t0
        assert not _free(lock)
    assert waited >= 0.25
    assert _free(lock)


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (root tests take the testbed lock)")
def test_a_root_test_runs_holding_the_testbed_lock() -> None:
    assert not _free(TESTBED_LOCK)
