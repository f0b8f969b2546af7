"""The handshake through the IP relay and through the UDP relay, taken apart with packet captures: one
quic-go page load per run, captured with tcpdump on the client's (c0) and the server's (s0) interface.
Arms (``--arms``, alternating run by run): ``udp``, ``ip``, ``ip-noecn`` (ECN off in both quic-go
endpoints: the IP relay carries the ECN bits, the UDP relay does not) and ``ip-nort`` (the relay's two
sender threads without SCHED_FIFO).

From each pair of captures, per run:
- transit: one-way time through the emulator (client's first packet at c0 -> at s0, and the server's
  first packet at s0 -> at c0, averaged); the configured delay is 18 ms;
- S1: the server's reaction to the client's first flight (last client packet at s0 -> first server
  packet at s0);
- C1: the client's reaction to the server's handshake flight (last server packet at c0 -> the client's
  next packet at c0), i.e. TLS verification and sending its Finished;
- S2: the server's reaction to the client's second flight.

    sudo python3 experiments/iprelay_handshake.py run [--rounds 10]
    python3 experiments/iprelay_handshake.py analyse

Runs go to /tmp/qsm-exp/iprelay-hs/<arm>-NN; writes experiments/iprelay_handshake.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, welch_p, write_report

HERE = Path(__file__).resolve().parent
OUT = Path("/tmp/qsm-exp/iprelay-hs")
ARMS = ("udp", "ip", "ip-noecn")
LOCK = "/tmp/quicsm-testbed.lock"


def one(arm: str, out: Path) -> None:
    """In a child under the lock: one 1 MB page load at 50 Mbit/s, 36 ms RTT, captured."""
    import uuid

    from quicsm.testbed import netns, runner
    from quicsm.testbed.emulator import SERVER_PORT, Emulator
    from quicsm.testbed.relay import RelayConfig, build_relay
    from quicsm.testbed.stack import stack_for

    mode = arm.split("-")[0]
    if arm.endswith("-noecn"):
        os.environ["QUIC_GO_DISABLE_ECN"] = "true"  # inherited by server and client
    if arm.endswith("-nort"):  # the relay's two sender threads without SCHED_FIFO
        import quicsm.testbed.emulator as emulator_mod

        plain = emulator_mod.iprelay_argv
        emulator_mod.iprelay_argv = lambda *a, **k: [*plain(*a, **k), "-rt=false"]  # type: ignore[assignment]
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
    with emu:
        caps = []
        for role, dev in (("cli", "c0"), ("srv", "s0")):
            argv = ["tcpdump", "-i", dev, "-n", "-s", "96", "--time-stamp-precision", "nano"]
            argv += ["-w", str(out / f"{dev}.pcap"), "-U", "--immediate-mode", "udp"]
            caps.append(subprocess.Popen(netns.ns_argv(emu.topo.ns(role), argv), stderr=subprocess.DEVNULL))
        time.sleep(1.0)
        server = emu.procs.start(
            "server",
            cfg.server_stack.server_argv(cfg, bins, f"{emu.topo.server_ip}:{SERVER_PORT}", out / "server.log"),
            ns=emu.topo.ns("srv"),
        )
        ready = emu.procs.wait_ready(server, timeout=20)
        url = f"https://{emu.client_target}/"
        child = emu.procs.start(
            "client", cfg.server_stack.client_argv(cfg, bins, url, str(ready.get("spki", ""))), ns=emu.topo.ns("cli")
        )
        res = emu.procs.read_json(child, timeout=60)
        child.popen.wait()
        time.sleep(0.5)
        for p in caps:
            p.send_signal(2)
            p.wait()
        emu.stop_relay()
        emu.procs.stop(server, grace=5)
    res["load1"] = float(Path("/proc/loadavg").read_text().split()[0])
    (out / "client.json").write_text(json.dumps(res))


def run(out: Path, rounds: int, per_lock: int = 3, arms: tuple[str, ...] = ARMS) -> None:
    taken = len(list(out.glob(f"{arms[0]}-[0-9][0-9]")))
    k = taken
    while k < taken + rounds:
        n = min(per_lock, taken + rounds - k)
        steps = [
            f"{sys.executable} {__file__} one {arm} {out / f'{arm}-{i:02d}'}" for i in range(k, k + n) for arm in arms
        ]
        subprocess.run(["flock", LOCK, "bash", "-c", " ; ".join(steps)], check=False)
        k += n


def _packets(pcap: Path) -> list[tuple[float, str]]:
    """(time, 'up'|'down') of every QUIC datagram in a capture."""
    txt = subprocess.run(
        ["tcpdump", "-r", str(pcap), "-n", "--nano", "-tt", "udp port 4433"], capture_output=True, text=True, check=True
    ).stdout
    rows = []
    for line in txt.splitlines():
        f = line.split()
        if len(f) > 4 and f[1] == "IP":
            rows.append((float(f[0]), "up" if f[4].rstrip(":").endswith(".4433") else "down"))
    return rows


def phases(run_dir: Path) -> dict[str, float]:
    c, s = _packets(run_dir / "c0.pcap"), _packets(run_dir / "s0.pcap")
    cu = [t for t, d in c if d == "up"]
    cd = [t for t, d in c if d == "down"]
    su = [t for t, d in s if d == "up"]
    sd = [t for t, d in s if d == "down"]
    d1 = cd[0]
    u2 = next(t for t in cu if t > d1)
    c1 = u2 - max(t for t in cd if t < u2)
    s1 = sd[0] - max(t for t in su if t < sd[0])
    n_first = sum(1 for t in cu if t < d1)
    after = [t for t in sd if t > su[n_first]]
    s2 = after[0] - max(t for t in su if t < after[0])
    transit = statistics.fmean([su[0] - cu[0], cd[0] - sd[0]])
    return {"transit": transit * 1e3, "S1": s1 * 1e3, "C1": c1 * 1e3, "S2": s2 * 1e3}


def analyse(out: Path) -> None:
    present = sorted({d.name.rsplit("-", 1)[0] for d in out.glob("*-[0-9][0-9]")})
    arms = [a for a in ARMS if a in present] + [a for a in present if a not in ARMS]
    rows: dict[str, list[dict[str, float]]] = {a: [] for a in arms}
    bad = 0
    for arm in arms:
        for d in sorted(out.glob(f"{arm}-[0-9][0-9]")):
            try:
                r = phases(d)
                cj = json.loads((d / "client.json").read_text())
            except (OSError, ValueError, StopIteration, IndexError, subprocess.CalledProcessError):
                bad += 1
                continue
            load = cj.get("load1")
            if load is None and (d / "load").is_file():  # the first runs (same procedure) kept /proc/loadavg
                load = float((d / "load").read_text().split()[0])
            r.update(page=cj["page_ms"], plt=cj["plt_ms"], load=float("nan") if load is None else load)
            rows[arm].append(r)
    keys = ("transit", "S1", "C1", "S2", "page")
    lines = [
        "| arm | runs | " + " | ".join(f"{k} ms" for k in keys) + " | p (C1 vs udp) | p (page vs udp) |",
        "|---|---:|" + "---:|" * (len(keys) + 2),
    ]
    for arm, rs in rows.items():
        if not rs:
            continue
        cells = [f"{statistics.fmean(r[k] for r in rs):.2f} ({statistics.stdev(r[k] for r in rs):.2f})" for k in keys]
        pc = "" if arm == "udp" else fmt_p(welch_p([r["C1"] for r in rs], [r["C1"] for r in rows["udp"]]))
        pp = "" if arm == "udp" else fmt_p(welch_p([r["page"] for r in rs], [r["page"] for r in rows["udp"]]))
        lines.append(f"| {arm} | {len(rs)} | " + " | ".join(cells) + f" | {pc} | {pp} |")
    loads = [r["load"] for rs in rows.values() for r in rs if r["load"] == r["load"]] or [float("nan")]
    text = f"""# The handshake through the IP relay and the UDP relay, taken apart with packet captures

{__doc__.split(chr(10) + chr(10) + "    sudo")[0]}

quic-go v0.65.0 (reno) server and Go HTTP/3 client, 1 MB page, 50 Mbit/s, 36 ms RTT (18 ms each way),
`tcpdump` in the client's and the server's namespace. Mean (sd) over runs; p: Welch's t-test against
the UDP relay. page = the client's time to the page's HTML. Machine load (1-min average) during the
runs: {min(loads):.1f}-{max(loads):.1f}.{f" {bad} run(s) without a complete capture left out." if bad else ""}

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/iprelay_handshake.py analyse` (repo {git_rev()}).

{chr(10).join(lines)}
"""
    write_report(HERE / "iprelay_handshake.md", text, HERE / "iprelay_handshake.notes.md")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "analyse", "one"))
    ap.add_argument("args", nargs="*")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--arms", default=",".join(ARMS), help="e.g. udp,ip,ip-nort (-nort: relay senders not SCHED_FIFO)")
    a = ap.parse_args()
    if a.what == "one":
        one(a.args[0], Path(a.args[1]))
    elif a.what == "run":
        run(Path(a.out), a.rounds, arms=tuple(a.arms.split(",")))
    else:
        analyse(Path(a.out))


if __name__ == "__main__":
    main()
