"""Child processes of a run: started in a namespace (optionally in a cgroup), ready-line handshake,
stopped by process group. Every child is tracked so a Ctrl-C or a failed run stops them all."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicsm.errors import TestbedError
from quicsm.testbed.netns import ns_argv

__all__ = ["Child", "ProcGroup", "last_json_object"]


def last_json_object(out: bytes) -> dict[str, Any] | None:
    """The last line of ``out`` that is a JSON object (a client's result), if any."""
    for line in reversed(out.decode(errors="replace").splitlines()):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


@dataclass
class Child:
    """A started process: its Popen, where its stderr goes, and the parsed ready line."""

    name: str
    popen: subprocess.Popen[bytes]
    stderr_path: Path
    ready: dict[str, Any] = field(default_factory=dict)

    def stderr_tail(self, n: int = 800) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-n:].strip()
        except OSError:
            return ""


class ProcGroup:
    """Starts children and guarantees they are stopped (SIGTERM, then SIGKILL of the group)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[Child] = []

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        ns: str | None = None,
        preexec: Callable[[], None] | None = None,
        env: dict[str, str] | None = None,
        stdout_path: Path | None = None,
        pass_fds: Sequence[int] = (),
    ) -> Child:
        full = ns_argv(ns, list(argv)) if ns else list(argv)
        err_path = self.log_dir / f"{name}.stderr"
        with open(err_path, "wb") as err:
            out: Any = open(stdout_path, "wb") if stdout_path else subprocess.PIPE
            try:
                popen = subprocess.Popen(
                    full,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    preexec_fn=preexec,
                    env={**os.environ, **(env or {})},
                    pass_fds=tuple(pass_fds),
                )
            except OSError as exc:
                raise TestbedError(f"{name}: cannot start {full[0]}: {exc}") from None
            finally:
                if stdout_path:
                    out.close()
        child = Child(name, popen, err_path)
        self.children.append(child)
        return child

    def wait_ready(self, child: Child, timeout: float = 20.0, key: str = "ready") -> dict[str, Any]:
        """Read stdout lines until a JSON object with ``key`` true appears."""
        assert child.popen.stdout is not None
        deadline = time.monotonic() + timeout
        fd = child.popen.stdout.fileno()
        buf = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                break
            chunk = os.read(fd, 65536)
            if not chunk:  # stdout closed: the child is exiting; let it finish to report its status
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.popen.wait(timeout=5)
                break
            buf += chunk
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and obj.get(key):
                    child.ready = obj
                    return obj
        rc = child.popen.poll()
        state = f"exited with {rc}" if rc is not None else f"not ready after {timeout:.0f} s"
        raise TestbedError(f"{child.name} {state}: {child.stderr_tail()}")

    def read_json(self, child: Child, timeout: float) -> dict[str, Any]:
        """Wait for the child to exit and return the last JSON object it printed."""
        try:
            out, _ = child.popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop(child)
            raise TestbedError(f"{child.name} did not finish within {timeout:.0f} s") from None
        last = last_json_object(out or b"")
        if last is None:
            raise TestbedError(
                f"{child.name} exited {child.popen.returncode} without a JSON result: {child.stderr_tail()}"
            )
        return last

    def stop(self, child: Child, grace: float = 5.0) -> int | None:
        """SIGTERM the child's process group, SIGKILL after ``grace`` seconds."""
        p = child.popen
        if p.poll() is None:
            _signal_group(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
        _signal_group(p.pid, signal.SIGKILL)  # stragglers of the group
        if p.stdout is not None:
            p.stdout.close()
        return p.returncode

    def stop_all(self) -> None:
        for child in reversed(self.children):
            with contextlib.suppress(Exception):
                self.stop(child)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
