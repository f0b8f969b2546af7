"""The kernel's TCP as a traced stack: bpftrace on three tracepoints turns a server namespace's TCP
senders into contract lines (docs/log-format.md, "Kernel TCP").

What this kernel offers, checked: the tracepoints ``tcp:tcp_probe`` (every incoming segment of an
established socket, before it is processed), ``tcp:tcp_cong_state_set`` (every ca_state change)
and ``sock:inet_sock_set_state``, and kernel BTF, so eBPF can read ``struct tcp_sock`` and the BBR
module's private ``struct bbr`` from the socket a tracepoint hands over. It has no kprobes
(``kprobe_events`` is missing) and refuses fentry (``available_filter_functions``: EPERM), so every
reading happens at one of those tracepoints:

* Recovery, Loss, CWR and Disorder come from ``tcp_cong_state_set``, at the instant of the change.
* SlowStart / CongestionAvoidance: cwnd against ssthresh as ``tcp_probe`` sees them on each ACK,
  which are the values the kernel's own slow-start test uses for that ACK.
* ApplicationLimited: the kernel's app-limited mark (``tp->app_limited`` non-zero) on each ACK.
* BBR: ``struct bbr``'s ``mode`` and ``pacing_gain`` on each ACK; a mode the previous ACK entered
  is seen when the next one arrives, so BBR transitions are stamped up to one ACK interval late. Drain
  entered and left within one ACK (inflight already at the estimated BDP when Startup ends) is seen
  as Startup followed by ProbeBw; BBR has no other way between them, so Drain is written in between,
  at the same instant.

Only sockets of the server's network namespace are traced (its inode is compared in the kernel),
so other testbeds on the machine never leak in. bpftrace prints a socket only when one of the
values above changes. It runs with a parent-death signal and is listed in a registry, so a run
killed outright has its bpftrace stopped by the next run (:func:`cleanup_stale`). It also writes a
heartbeat every second: once the reading run is gone the write fails (SIGPIPE) and bpftrace ends
itself, its probes with it; the parent-death signal alone is not enough (this bpftrace loses it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from quicsm.errors import TestbedError
from quicsm.traces.contract import SSTHRESH_INF, format_line

__all__ = [
    "CA_STATES",
    "BBR_MODES",
    "KernelTracer",
    "Translator",
    "bpftrace_script",
    "check_tracing",
    "cleanup_stale",
    "REGISTRY",
]

CA_STATES = ("Open", "Disorder", "CWR", "Recovery", "Loss")
"""``enum tcp_ca_state`` in order (include/net/tcp.h)."""
_CA_TO_STATE = {1: "Disorder", 2: "CWR", 3: "Recovery", 4: "Loss"}
_CA_TRIGGER = {1: "reorder", 2: "cwr", 3: "loss", 4: "rto"}
BBR_MODES = ("Startup", "Drain", "ProbeBw", "ProbeRtt")
"""``enum bbr_mode`` in order (net/ipv4/tcp_bbr.c)."""
BBR_UNIT = 256
TCP_INFINITE_SSTHRESH = 0x7FFFFFFF
TCP_CLOSE = 7
REGISTRY = Path("/run/quicsm-ktrace")
TRACEFS = Path("/sys/kernel/tracing")
DEBUGFS = Path("/sys/kernel/debug")
BTF = Path("/sys/kernel/btf/vmlinux")
TRACEPOINTS = ("tcp/tcp_probe", "tcp/tcp_cong_state_set", "sock/inet_sock_set_state")

_SCRIPT = r"""
tracepoint:tcp:tcp_probe
/((struct sock *)args->skaddr)->__sk_common.skc_net.net->ns.inum == NSINUM/
{
  $sk = (struct sock *)args->skaddr;
  $tp = (struct tcp_sock *)$sk;
  $icsk = (struct inet_connection_sock *)$sk;
  $cwnd = $tp->snd_cwnd;
  $ssth = $tp->snd_ssthresh;
  $app = $tp->app_limited != 0 ? 1 : 0;
  $mode = 0; $pg = 0; $cyc = 0; $cons = 0;
  if ($icsk->icsk_ca_ops->name == "bbr") {
    $b = (struct bbr *)$icsk->icsk_ca_priv;
    $mode = $b->mode; $pg = $b->pacing_gain; $cyc = $b->cycle_idx; $cons = $b->packet_conservation;
  }
  $x = $app | ($mode << 1) | ($pg << 4) | ($cons << 14) | (($cwnd < $ssth ? 1 : 0) << 15);
  $k = (uint64)$sk;
  if (@c[$k] != $cwnd || @s[$k] != $ssth || @x[$k] != $x + 1) {
    @c[$k] = $cwnd; @s[$k] = $ssth; @x[$k] = $x + 1;
    $infl = $tp->packets_out - ($tp->sacked_out + $tp->lost_out) + $tp->retrans_out;
    printf("P %llu %llu %u %s %u %s %u %u %u %u %u %u %u %u %u %u %u\n", nsecs, $sk, $sk->__sk_common.skc_num,
      ntop(2, $sk->__sk_common.skc_daddr), args->dport, $icsk->icsk_ca_ops->name, $cwnd, $ssth, $tp->srtt_us >> 3,
      $infl, $tp->mss_cache, $app, $mode, $pg, $cyc, $cons, $icsk->icsk_ca_state);
  }
}

tracepoint:tcp:tcp_cong_state_set
/((struct sock *)args->skaddr)->__sk_common.skc_net.net->ns.inum == NSINUM/
{
  printf("C %llu %llu %u %s %u %u\n", nsecs, args->skaddr, args->sport, ntop(2, args->daddr), args->dport,
    args->cong_state);
}

tracepoint:sock:inet_sock_set_state
/args->protocol == 6 && ((struct sock *)args->skaddr)->__sk_common.skc_net.net->ns.inum == NSINUM/
{
  printf("S %llu %llu %u %s %u %u %u\n", nsecs, args->skaddr, args->sport, ntop(2, args->daddr), args->dport,
    args->oldstate, args->newstate);
  if (args->newstate == 7) {
    $k = (uint64)args->skaddr;
    delete(@c[$k]); delete(@s[$k]); delete(@x[$k]);
  }
}

interval:s:1 { printf("T %llu\n", nsecs); }

END { clear(@c); clear(@s); clear(@x); }
"""


def bpftrace_script(netns_inode: int) -> str:
    """The bpftrace program for the sockets of the network namespace with that inode."""
    return _SCRIPT.replace("NSINUM", str(int(netns_inode)))


def check_tracing() -> None:
    """One line naming what is missing for kernel TCP tracing: root, bpftrace, BTF or tracefs.

    Mounts tracefs (and debugfs, where bpftrace 0.17 looks for tracepoint formats) if needed."""
    import shutil

    if os.geteuid() != 0:
        raise TestbedError("kernel TCP tracing needs root (eBPF and tracefs): run it with sudo")
    if shutil.which("bpftrace") is None:
        raise TestbedError("kernel TCP tracing needs bpftrace: apt-get install bpftrace (Debian)")
    if not BTF.exists():
        raise TestbedError(f"kernel TCP tracing needs kernel BTF ({BTF} missing: a kernel with CONFIG_DEBUG_INFO_BTF)")
    for fs, where in (("tracefs", TRACEFS), ("debugfs", DEBUGFS)):
        if not (where / "README").exists() and not (where / "tracing").exists():
            proc = subprocess.run(["mount", "-t", fs, "nodev", str(where)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise TestbedError(f"kernel TCP tracing needs {fs} at {where}: mount failed: {proc.stderr.strip()}")
    for tp in TRACEPOINTS:
        if not (TRACEFS / "events" / tp).is_dir():
            raise TestbedError(
                f"kernel TCP tracing needs the tracepoint {tp.replace('/', ':')} (not in {TRACEFS}/events)"
            )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_bpftrace(pid: int) -> bool:
    try:
        return b"bpftrace" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def cleanup_stale(registry: Path = REGISTRY) -> list[int]:
    """Stop bpftrace processes whose run died without stopping them (SIGKILL); returns their pids.
    Their probes go with them: eBPF tracepoint links live as long as the process's descriptors."""
    stopped: list[int] = []
    if not registry.is_dir():
        return stopped
    for entry in registry.glob("*.json"):
        try:
            info = json.loads(entry.read_text())
            pid, owner = int(info["pid"]), int(info["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            entry.unlink(missing_ok=True)
            continue
        if _alive(owner) and _alive(pid):
            continue
        if _alive(pid) and _is_bpftrace(pid):
            os.kill(pid, signal.SIGKILL)
            stopped.append(pid)
        entry.unlink(missing_ok=True)
    return stopped


def _parent_death_signal() -> None:
    """In the child before exec: SIGTERM when the parent dies, so a killed run stops tracing too."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()


@dataclass
class _Conn:
    key: str
    cc: str = "-"
    state: str = "Init"
    ca: int = 0
    cwnd: int | None = None
    ssthresh: int | None = None
    srtt_us: int | None = None
    inflight: int | None = None
    mss: int = 0
    app: bool = False
    mode: int = 0
    pacing_gain: int = 0
    cycle: int = 0
    conservation: bool = False
    recovery: str | None = None
    pending_t: int | None = None
    """Time of a return to ca_state Open whose SlowStart/CongestionAvoidance the next ACK decides."""
    pending_trigger: str = "recovery_exit"


@dataclass
class Translator:
    """Turns bpftrace's lines (``P``/``C``/``S`` records) into contract lines, one connection per
    socket. ``write`` receives each finished line; ``wall_offset_ns`` maps the monotonic clock of
    the records to the wall clock for the Go-log-style prefix (aligns flows of different stacks)."""

    write: Callable[[str], None]
    wall_offset_ns: int = 0
    conns: dict[str, _Conn] = field(default_factory=dict)
    records: int = 0
    bad: int = 0

    def feed(self, line: str) -> None:
        parts = line.split()
        if not parts or parts[0] not in ("P", "C", "S"):
            return
        if len(parts) < 7:
            self.bad += 1
            return
        try:
            kind, t_ns = parts[0], int(parts[1])
            key = f"tcp{parts[3]}/{parts[4]}:{parts[5]}"
            if kind == "P" and len(parts) == 18:
                self._probe(t_ns, key, parts)
            elif kind == "C" and len(parts) == 7:
                self._cong(t_ns, key, int(parts[6]))
            elif kind == "S" and len(parts) == 8:
                self._sock(t_ns, key, int(parts[7]))
            else:
                self.bad += 1
                return
        except ValueError:
            self.bad += 1
            return
        self.records += 1

    def close_all(self) -> None:
        """End every connection still open (the run stopped before the sockets closed)."""
        for c in list(self.conns.values()):
            self._resolve_pending(c)

    # -- records ---------------------------------------------------------------------------------

    def _conn(self, key: str) -> _Conn:
        c = self.conns.get(key)
        if c is None:
            c = self.conns[key] = _Conn(key)
        return c

    def _probe(self, t_ns: int, key: str, p: list[str]) -> None:
        c = self._conn(key)
        c.cc = p[6]
        cwnd_pk, ssth_pk = int(p[7]), int(p[8])
        c.mss = int(p[11]) or c.mss
        was_unbounded = c.ssthresh == SSTHRESH_INF
        c.cwnd = cwnd_pk * c.mss
        c.ssthresh = SSTHRESH_INF if ssth_pk >= TCP_INFINITE_SSTHRESH else ssth_pk * c.mss
        infl = int(p[10])
        c.srtt_us, c.inflight = int(p[9]), (infl if infl < 1 << 31 else 0) * c.mss
        c.app, c.mode, c.pacing_gain, c.cycle = p[12] == "1", int(p[13]), int(p[14]), int(p[15])
        c.conservation = p[16] == "1"
        c.ca = int(p[17])
        slow = cwnd_pk < ssth_pk
        if c.pending_t is not None:
            t_ns, trigger = c.pending_t, c.pending_trigger
            c.pending_t = None
        elif was_unbounded and c.ssthresh != SSTHRESH_INF and c.ca == 0:
            trigger = "hystart"  # ssthresh set without a loss: Cubic's hybrid slow start ended it
        else:
            trigger = "ack"
        self._settle(c, t_ns, trigger, slow)

    def _cong(self, t_ns: int, key: str, ca: int) -> None:
        c = self._conn(key)
        if c.state == "Init":
            c.ca = ca
            return  # before the first ACK: nothing to leave yet
        old, c.ca = c.ca, ca
        if c.cc == "bbr":
            self._settle(c, t_ns, _CA_TRIGGER.get(ca, "recovery_exit"), None)
            return
        if ca in _CA_TO_STATE:
            c.pending_t = None
            if _CA_TO_STATE[ca] == c.state:  # entered again (another RTO in Loss): no transition
                self._line(c, t_ns, ev="update", trigger=_CA_TRIGGER[ca])
            else:
                self._emit(c, t_ns, _CA_TO_STATE[ca], _CA_TRIGGER[ca])
        elif old == 1:  # Disorder -> Open: cwnd and ssthresh did not change
            self._settle(c, t_ns, "reorder_end", None)
        else:  # out of CWR/Recovery/Loss: the window was just set; the next ACK shows it
            c.pending_t, c.pending_trigger = t_ns, "recovery_exit"

    def _sock(self, t_ns: int, key: str, new: int) -> None:
        c = self.conns.get(key)
        if c is None or new != TCP_CLOSE:
            return
        self._resolve_pending(c)
        if c.state != "Init":
            self._line(c, t_ns, ev="close", trigger="close")
        del self.conns[key]

    # -- states ----------------------------------------------------------------------------------

    def _resolve_pending(self, c: _Conn) -> None:
        if c.pending_t is not None and c.cwnd is not None and c.ssthresh is not None:
            t, c.pending_t = c.pending_t, None
            self._settle(c, t, c.pending_trigger, c.cwnd < c.ssthresh)

    def _settle(self, c: _Conn, t_ns: int, trigger: str, slow: bool | None) -> None:
        """Emit the state the socket is in now (a transition if it changed, else a metrics update)."""
        if slow is None:
            slow = c.cwnd is not None and c.ssthresh is not None and c.cwnd < c.ssthresh
        if c.cc == "bbr":
            state = self._bbr_state(c)
            recovery = "NotInRecovery" if c.ca < 2 else ("Conservation" if c.conservation else "Growth")
            if state != c.state:
                c.recovery = recovery
                if c.state == "Startup" and state.startswith("ProbeBw"):
                    # BBR leaves Startup only through Drain, which it also leaves within the same ACK when
                    # inflight is already at the estimated BDP (tcp_bbr.c, bbr_check_drain): no ACK sees it
                    self._emit(c, t_ns, "Drain", _bbr_trigger(c.state, "Drain"))
                self._emit(c, t_ns, state, "init" if c.state == "Init" else _bbr_trigger(c.state, state))
            elif recovery != c.recovery:
                c.recovery = recovery
                self._line(c, t_ns, ev="update", trigger=trigger)
            else:
                self._line(c, t_ns, ev="update", trigger="ack")
            return
        if c.ca in _CA_TO_STATE:
            state = _CA_TO_STATE[c.ca]
        elif c.app:
            state = "ApplicationLimited"
        else:
            state = "SlowStart" if slow else "CongestionAvoidance"
        if state == c.state:
            self._line(c, t_ns, ev="update", trigger="ack")
            return
        if c.state == "Init":
            trigger = "init"
        elif state == "ApplicationLimited":
            trigger = "app_limited"
        elif c.state == "SlowStart" and state == "CongestionAvoidance" and trigger == "ack":
            trigger = "ssthresh"
        elif trigger == "hystart" and not (c.state == "SlowStart" and state == "CongestionAvoidance"):
            trigger = "ack"
        self._emit(c, t_ns, state, trigger)

    @staticmethod
    def _bbr_state(c: _Conn) -> str:
        mode = BBR_MODES[c.mode] if 0 <= c.mode < len(BBR_MODES) else f"Mode{c.mode}"
        if mode != "ProbeBw":
            return mode
        if c.pacing_gain > BBR_UNIT:
            return "ProbeBw.Up"
        return "ProbeBw.Down" if c.pacing_gain < BBR_UNIT else "ProbeBw.Cruise"

    def _emit(self, c: _Conn, t_ns: int, state: str, trigger: str) -> None:
        frm, c.state = c.state, state
        self._line(c, t_ns, frm=frm, to=state, trigger=trigger)

    def _line(self, c: _Conn, t_ns: int, **kw: Any) -> None:
        extra: dict[str, Any] = {"ca": CA_STATES[c.ca].lower() if 0 <= c.ca < len(CA_STATES) else c.ca}
        if c.cc == "bbr":
            extra.update(recovery=c.recovery, cycle=c.cycle, pacing_gain_x256=c.pacing_gain)
        text = format_line(
            conn=c.key,
            t_us=t_ns // 1000,
            cc=c.cc,
            cwnd=c.cwnd,
            inflight=c.inflight,
            ssthresh=c.ssthresh,
            srtt_us=c.srtt_us,
            mss=c.mss or None,
            app_limited=int(c.app),
            **kw,
            **extra,
        )
        wall = (t_ns + self.wall_offset_ns) / 1e9
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(wall)) + f".{int(wall * 1e6) % 1_000_000:06d}"
        self.write(f"{stamp} {text}")


def _bbr_trigger(old: str, new: str) -> str:
    if new == "ProbeRtt":
        return "min_rtt_expired"
    if old == "Startup" and new == "Drain":
        return "full_bw"
    return "ack"


def netns_inode(ns: str) -> int:
    """Inode of a named network namespace (``ip netns``), as the kernel's ``ns.inum``."""
    try:
        return os.stat(f"/var/run/netns/{ns}").st_ino
    except FileNotFoundError:
        raise TestbedError(f"network namespace {ns!r} does not exist") from None


@dataclass
class KernelTracer:
    """Context manager: traces the TCP senders of network namespace ``ns`` into ``log_path``."""

    ns: str
    log_path: Path
    ready_timeout_s: float = 90.0
    proc: subprocess.Popen[bytes] | None = field(init=False, default=None)
    translator: Translator | None = field(init=False, default=None)
    _reader: threading.Thread | None = field(init=False, default=None)
    _out: IO[str] | None = field(init=False, default=None)
    _entry: Path | None = field(init=False, default=None)
    _ready: threading.Event = field(init=False, default_factory=threading.Event)
    _stderr: Path | None = field(init=False, default=None)

    def __enter__(self) -> KernelTracer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        check_tracing()
        cleanup_stale()
        inode = netns_inode(self.ns)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        script = self.log_path.with_name(self.log_path.stem + ".bt")
        script.write_text(bpftrace_script(inode))
        self._stderr = self.log_path.with_name(self.log_path.stem + ".bpftrace.stderr")
        offset = time.time_ns() - time.monotonic_ns()
        self._out = open(self.log_path, "w", encoding="utf-8", buffering=1 << 16)
        out = self._out

        def write(line: str) -> None:
            out.write(line + "\n")

        self.translator = Translator(write=write, wall_offset_ns=offset)
        with open(self._stderr, "wb") as err:
            self.proc = subprocess.Popen(
                ["bpftrace", "-B", "line", str(script)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                preexec_fn=_parent_death_signal,
            )
        REGISTRY.mkdir(parents=True, exist_ok=True)
        self._entry = REGISTRY / f"{self.proc.pid}.json"
        self._entry.write_text(json.dumps({"pid": self.proc.pid, "owner": os.getpid(), "ns": self.ns}))
        self._reader = threading.Thread(target=self._read, name="ktrace", daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.ready_timeout_s
        while not self._ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                lines = self._stderr.read_text(errors="replace").splitlines()
                tail = "\n".join(x for x in lines if "RLIMIT_MEMLOCK" not in x)[-600:]
                self.stop()
                state = "exited" if self.proc.poll() is not None else "not attached in time"
                raise TestbedError(f"bpftrace {state}: {tail or 'no message'}")

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None and self.translator is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace")
            if not self._ready.is_set() and line.startswith("Attaching"):
                self._ready.set()
                continue
            self.translator.feed(line)

    def stop(self) -> dict[str, int]:
        """Detach (SIGINT lets bpftrace remove its probes), finish the log; returns counters."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self._reader is not None:
            self._reader.join(timeout=15)
        if self.translator is not None:
            self.translator.close_all()
        if self._out is not None:
            self._out.close()
            self._out = None
        if self._entry is not None:
            self._entry.unlink(missing_ok=True)
        t = self.translator
        return {"records": t.records if t else 0, "bad_records": t.bad if t else 0}
