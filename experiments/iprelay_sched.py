"""Why the quic-go endpoints answer later in the handshake through the IP relay: the same page load as
``iprelay_handshake.py`` (quic-go reno, 1 MB, 50 Mbit/s, 36 ms RTT), with a bpftrace scheduler and
packet trace instead of tcpdump, all on one clock (CLOCK_MONOTONIC):

- ``rx``/``tx``: every packet received / queued on the client's (c0) and the server's (s0) interface
  (tracepoints net:netif_receive_skb, net:net_dev_queue);
- ``wk``: every wake-up of an endpoint thread (sched:sched_wakeup: target CPU, and which task
  on which CPU woke it);
- ``sw``: every context switch into or out of an endpoint thread (sched:sched_switch: the
  previous task's state, so a preemption is told from a sleep).

From each trace, per reaction window (C1: the client's answer to the server's handshake flight, last
server packet at c0 -> the client's next packet at c0; S1: the server's answer to the client's first
flight at s0), for the endpoint's threads: the time they were running on a CPU, the time they were
runnable but waiting for a CPU (from a wake-up or a preemption to the next switch-in), and which
tasks ran on that CPU meanwhile.

    sudo python3 experiments/iprelay_sched.py run [--rounds 5] [--arms udp,ip]
    python3 experiments/iprelay_sched.py analyse

Runs go to /tmp/qsm-exp/iprelay-sched/<arm>-NN; writes experiments/iprelay_sched.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, welch_p, write_report

HERE = Path(__file__).resolve().parent
OUT = Path("/tmp/qsm-exp/iprelay-sched")
LOCK = "/tmp/quicsm-testbed.lock"

BPF = r"""
tracepoint:net:netif_receive_skb /str(args->name) == "c0" || str(args->name) == "s0"/
{ printf("rx|%lld|%d|%s|%d\n", nsecs, cpu, str(args->name), args->len); }
tracepoint:net:net_dev_queue /str(args->name) == "c0" || str(args->name) == "s0"/
{ printf("tx|%lld|%d|%s|%d\n", nsecs, cpu, str(args->name), args->len); }
tracepoint:sched:sched_wakeup
/strncmp(args->comm, "quicsm-c", 8) == 0 || strncmp(args->comm, "quicsm-s", 8) == 0/
{ printf("wk|%lld|%d|%d|%s|%d|%d|%s\n", nsecs, cpu, args->pid, args->comm, args->target_cpu, pid, comm); }
tracepoint:sched:sched_switch
/strncmp(args->prev_comm, "quicsm-c", 8) == 0 || strncmp(args->prev_comm, "quicsm-s", 8) == 0 ||
 strncmp(args->next_comm, "quicsm-c", 8) == 0 || strncmp(args->next_comm, "quicsm-s", 8) == 0/
{ printf("sw|%lld|%d|%d|%s|%lld|%d|%s\n", nsecs, cpu, args->prev_pid, args->prev_comm, args->prev_state,
         args->next_pid, args->next_comm); }
"""


def one(arm: str, out: Path) -> None:
    """In a child under the lock: one traced 1 MB page load at 50 Mbit/s, 36 ms RTT."""
    import uuid

    from quicsm.testbed import netns, runner
    from quicsm.testbed.emulator import SERVER_PORT, Emulator
    from quicsm.testbed.relay import RelayConfig, build_relay
    from quicsm.testbed.stack import stack_for

    mode = arm.split("-")[0]
    out.mkdir(parents=True, exist_ok=True)
    cfg = runner.RunConfig(cc="reno", rate_mbps=50, rtt_ms=36, size=1_000_000)
    bins = stack_for(cfg)
    emu = Emulator(
        tag=uuid.uuid4().hex[:6],
        tbf=netns.TbfConfig(cfg.rate_bps, cfg.queue_bytes()),
        relay_cfg=RelayConfig(18.0),
        bins=build_relay(),
        work_dir=out,
        mode=mode,
    )
    (out / "trace.bt").write_text(BPF)
    with emu:
        with open(out / "sched.txt", "w") as fh:
            bt = subprocess.Popen(["bpftrace", "-B", "full", str(out / "trace.bt")], stdout=fh, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "Attaching" not in (out / "sched.txt").read_text():
                time.sleep(0.2)
            time.sleep(0.5)
            server = emu.procs.start(
                "server",
                cfg.server_stack.server_argv(cfg, bins, f"{emu.topo.server_ip}:{SERVER_PORT}", out / "server.log"),
                ns=emu.topo.ns("srv"),
            )
            ready = emu.procs.wait_ready(server, timeout=20)
            url = f"https://{emu.client_target}/"
            child = emu.procs.start(
                "client",
                cfg.server_stack.client_argv(cfg, bins, url, str(ready.get("spki", ""))),
                ns=emu.topo.ns("cli"),
            )
            res = emu.procs.read_json(child, timeout=60)
            child.popen.wait()
            time.sleep(0.3)
            bt.send_signal(2)
            bt.wait(timeout=30)
        assert emu.relay is not None
        threads = subprocess.run(
            ["ps", "-L", "-o", "tid,cls,rtprio,time,comm", "-p", str(emu.relay.popen.pid)],
            capture_output=True,
            text=True,
        ).stdout
        (out / "relay-threads.txt").write_text(threads)
        stats = emu.stop_relay()
        emu.procs.stop(server, grace=5)
    res["load1"] = float(Path("/proc/loadavg").read_text().split()[0])
    res["relay_fifo"] = [stats.get(d, {}).get("sched_fifo") for d in ("down", "up")]
    (out / "client.json").write_text(json.dumps(res))


def run(out: Path, rounds: int, arms: list[str], per_lock: int = 2) -> None:
    taken = len(list(out.glob(f"{arms[0]}-[0-9][0-9]")))
    k = taken
    while k < taken + rounds:
        n = min(per_lock, taken + rounds - k)
        steps = [
            f"{sys.executable} {__file__} one {arm} {out / f'{arm}-{i:02d}'}" for i in range(k, k + n) for arm in arms
        ]
        subprocess.run(["flock", LOCK, "bash", "-c", " ; ".join(steps)], check=False)
        k += n


def _events(path: Path) -> list[list[str]]:
    """The trace's events in time order (bpftrace prints per-CPU buffers, not in order)."""
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        f = line.split("|")
        if f and f[0] in ("rx", "tx", "wk", "sw") and len(f) >= 5:
            rows.append(f)
    rows.sort(key=lambda f: int(f[1]))
    return rows


def _window(rows: list[list[str]], dev: str, role: str) -> tuple[int, int]:
    """C1 at c0 (role client) or S1 at s0 (role server), in ns: last packet in -> next packet out."""
    rx = [int(f[1]) for f in rows if f[0] == "rx" and f[3] == dev and int(f[4]) > 60]
    tx = [int(f[1]) for f in rows if f[0] == "tx" and f[3] == dev and int(f[4]) > 60]
    if role == "client":
        d1 = rx[0]  # the server's first packet at the client
        u2 = next(t for t in tx if t > d1)
        return max(t for t in rx if t < u2), u2
    s_first = tx[0]  # the server's first packet out
    return max(t for t in rx if t < s_first), s_first


def reaction(rows: list[list[str]], comm: str, lo: int, hi: int) -> dict[str, float]:
    """Running, waiting-for-CPU time (ms) of ``comm``'s threads inside [lo, hi], and who ran instead."""
    running: dict[int, int] = {}  # pid -> since
    waiting: dict[int, tuple[int, int]] = {}  # pid -> (since, cpu)
    run_ns = wait_ns = 0
    first_run: int | None = None
    instead: Counter[str] = Counter()
    wakeups = preempted = 0
    cpus: Counter[str] = Counter()

    def clip(a: int, b: int) -> int:
        return max(0, min(b, hi) - max(a, lo))

    for f in rows:
        t = int(f[1])
        if t > hi:
            break
        if f[0] == "wk" and f[4] == comm:
            pid = int(f[3])
            if pid not in running:
                waiting[pid] = (t, int(f[5]))
                if t >= lo:
                    wakeups += 1
                    cpus["woken by " + f[7] + (" same cpu" if int(f[2]) == int(f[5]) else " other cpu")] += 1
        elif f[0] == "sw":
            cpu, prev_pid, prev_comm, prev_state, next_pid, next_comm = (
                int(f[2]),
                int(f[3]),
                f[4],
                int(f[5]),
                int(f[6]),
                f[7],
            )
            if prev_comm == comm and prev_pid in running:
                run_ns += clip(running.pop(prev_pid), t)
                if prev_state == 0:  # preempted while runnable: waits for a CPU again
                    waiting[prev_pid] = (t, cpu)
                    if t >= lo:
                        preempted += 1
            if next_comm == comm:
                w = waiting.pop(next_pid, None)
                if w is not None:
                    wait_ns += clip(w[0], t)
                    if clip(w[0], t) > 0:
                        instead[f"{prev_comm}:{prev_pid}"] += clip(w[0], t)
                running[next_pid] = t
                if first_run is None and t >= lo:
                    first_run = t
    for since in running.values():
        run_ns += clip(since, hi)
    for since, _ in waiting.values():
        wait_ns += clip(since, hi)
    top = ", ".join(f"{k} {v / 1e6:.2f}" for k, v in instead.most_common(3))
    return {
        "window": (hi - lo) / 1e6,
        "run": run_ns / 1e6,
        "wait": wait_ns / 1e6,
        "first_run": ((first_run - lo) / 1e6) if first_run is not None else float("nan"),
        "wakeups": wakeups,
        "preempted": preempted,
        "instead": top,  # type: ignore[dict-item]
        "cpus": ", ".join(f"{k} {v}" for k, v in cpus.most_common(3)),  # type: ignore[dict-item]
    }


def analyse(out: Path) -> None:
    table: dict[str, dict[str, list[dict[str, float]]]] = {}
    for d in sorted(out.glob("*-[0-9][0-9]")):
        arm = d.name.rsplit("-", 1)[0]
        try:
            rows = _events(d / "sched.txt")
            cj = json.loads((d / "client.json").read_text())
            c1 = reaction(rows, "quicsm-client", *_window(rows, "c0", "client"))
            s1 = reaction(rows, "quicsm-server", *_window(rows, "s0", "server"))
        except (OSError, ValueError, StopIteration):
            continue
        c1["page"] = cj["page_ms"]
        c1["load"] = cj["load1"]
        table.setdefault(arm, {"C1": [], "S1": []})
        table[arm]["C1"].append(c1)
        table[arm]["S1"].append(s1)
    keys = ("window", "run", "wait", "first_run", "wakeups", "preempted")
    lines = []
    for phase in ("C1", "S1"):
        lines += [
            f"\n### {phase}\n",
            "| arm | runs | " + " | ".join(keys) + " | p (window vs udp) | p (wait vs udp) |",
            "|---|---:|" + "---:|" * (len(keys) + 2),
        ]
        for arm, ph in table.items():
            rs = ph[phase]
            cells = [
                f"{statistics.median(r[k] for r in rs):.2f} [{min(r[k] for r in rs):.2f}-{max(r[k] for r in rs):.2f}]"
                for k in keys
            ]
            base = table.get("udp", {}).get(phase, [])
            pw = pq = ""
            if arm != "udp" and len(base) > 1 and len(rs) > 1:
                pw = fmt_p(welch_p([r["window"] for r in rs], [r["window"] for r in base]))
                pq = fmt_p(welch_p([r["wait"] for r in rs], [r["wait"] for r in base]))
            lines.append(f"| {arm} | {len(rs)} | " + " | ".join(cells) + f" | {pw} | {pq} |")
        lines.append("")
        for arm, ph in table.items():
            for i, r in enumerate(ph[phase]):
                lines.append(
                    f"- {arm} #{i} {phase}: window {r['window']:.2f} ms; ran instead (ms): {r['instead']}; "
                    f"wake-ups: {r['cpus']}"
                )
    loads = [r["load"] for ph in table.values() for r in ph["C1"]] or [float("nan")]
    pages = {arm: [r["page"] for r in ph["C1"]] for arm, ph in table.items()}
    page_line = "; ".join(f"{a}: median {statistics.median(v):.1f} ms (n={len(v)})" for a, v in pages.items())
    text = f"""# The IP relay's slower handshake reactions, traced in the scheduler

{__doc__.split(chr(10) + chr(10) + "    sudo")[0]}

Medians [min-max] over runs, ms (wakeups, preempted: counts). Time to the page's HTML: {page_line}.
Machine load (1-min average): {min(loads):.1f}-{max(loads):.1f}.

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/iprelay_sched.py analyse` (repo {git_rev()}).
{chr(10).join(lines)}
"""
    write_report(HERE / "iprelay_sched.md", text, HERE / "iprelay_sched.notes.md")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "analyse", "one"))
    ap.add_argument("args", nargs="*")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--arms", default="udp,ip")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()
    if a.what == "one":
        one(a.args[0], Path(a.args[1]))
    elif a.what == "run":
        run(Path(a.out), a.rounds, a.arms.split(","))
    else:
        analyse(Path(a.out))


if __name__ == "__main__":
    main()
