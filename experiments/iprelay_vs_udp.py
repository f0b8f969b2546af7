"""The IP-layer relay against the UDP relay on the same QUIC runs: rate (page load time of a 10 MB
object), RTT (time to the page's HTML: handshake plus one request), loss and reordering as the
relays counted them, and send lateness. Runs alternate between the relays, so load on the machine
hits both alike.

    sudo python3 experiments/iprelay_vs_udp.py run [--runs 8]
    python3 experiments/iprelay_vs_udp.py analyse

Writes experiments/iprelay_vs_udp.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, welch_p, write_report

HERE = Path(__file__).resolve().parent
OUT = Path("/tmp/qsm-exp/iprelay")
CASES = {
    # name: quicsm testbed run options
    "50mbit-36ms": ["--rate", "50", "--delay", "36", "--queue", "1bdp", "--size", "10MB"],
    "10mbit-36ms-loss1": ["--rate", "10", "--delay", "36", "--queue", "1bdp", "--size", "3MB", "--loss", "1%"],
    "10mbit-112ms-jitter10": ["--rate", "10", "--delay", "112", "--jitter", "10", "--queue", "1bdp", "--size", "3MB"],
}
MODES = ("udp", "ip")


def run(out: Path, runs: int, per_lock: int = 3) -> None:
    """``runs`` pairs per case; each locked stretch runs ``per_lock`` udp/ip pairs of one case."""
    for name, opts in CASES.items():
        done = 0
        while done < runs:
            n = min(per_lock, runs - done)
            steps = []
            for _ in range(n):
                for mode in MODES:
                    cmd = [sys.executable, "-m", "quicsm", "testbed", "run", *opts, "--name", f"{name}-{mode}"]
                    cmd += ["--runs", "1", "--retries", "1", "--out", str(out)]
                    steps.append(f"QUICSM_EMULATOR={mode} " + " ".join(cmd))
            subprocess.run(["flock", "/tmp/quicsm-testbed.lock", "bash", "-c", " ; ".join(steps)], check=False)
            done += n


def probes(out: Path, repeats: int = 2) -> None:
    """``quicsm testbed accuracy`` through each relay, alternating, ``repeats`` times each (locked)."""
    for k in range(repeats):
        for mode in MODES:
            cmd = [sys.executable, "-m", "quicsm", "testbed", "accuracy", "--json", "--seconds", "3"]
            cmd += ["--out", str(out / f"accuracy-{mode}-{k}")]
            proc = subprocess.run(
                ["flock", "/tmp/quicsm-testbed.lock", *cmd],
                env={**os.environ, "QUICSM_EMULATOR": mode},
                capture_output=True,
                text=True,
                check=True,
            )
            (out / f"accuracy-{mode}-{k}.json").write_text(proc.stdout)


def _probe_tables(out: Path) -> str:
    """Side by side: each probe figure through the UDP relay and the IP relay (every repeat)."""
    reps = {m: [json.loads(p.read_text()) for p in sorted(out.glob(f"accuracy-{m}-*.json"))] for m in MODES}
    if not all(reps.values()):
        return "(no probe measurements)\n"
    lines = ["| measurement | UDP relay | IP relay |", "|---|---|---|"]

    def col(mode: str, pick) -> str:  # type: ignore[no-untyped-def]
        return " / ".join(pick(r) for r in reps[mode])

    first = reps["udp"][0]
    for i, row in enumerate(first["rates"]):
        lines.append(
            f"| rate {row['configured_mbps']:g} Mbit/s: achieved incl. Ethernet hdr / configured | "
            + " | ".join(col(m, lambda r, i=i: f"{r['rates'][i]['eth_ratio']:.3f}") for m in MODES)
            + " |"
        )
    for i, row in enumerate(first["delays"]):
        lines.append(
            f"| delay {row['delay_ms']:g} ms: error p50 / p99 (us) | "
            + " | ".join(col(m, lambda r, i=i: f"{r['delays'][i]['p50_us']}/{r['delays'][i]['p99_us']}") for m in MODES)
            + " |"
        )
        lines.append(
            f"| delay {row['delay_ms']:g} ms: relay send lateness p99 (us) | "
            + " | ".join(col(m, lambda r, i=i: str(r["delays"][i]["relay_late_p99_us"])) for m in MODES)
            + " |"
        )
    for i, row in enumerate(first["reorder"]):
        lines.append(
            f"| jitter +-{row['jitter_ms']:g} ms at {row['rate_mbps']:g} Mbit/s: reordered / displaced >= 3 | "
            + " | ".join(
                col(
                    m,
                    lambda r, i=i: (
                        f"{r['reorder'][i]['reordered_share']:.1%}/{r['reorder'][i]['displaced_ge3_share']:.1%}"
                    ),
                )
                for m in MODES
            )
            + " |"
        )
    for i, row in enumerate(first.get("losses", [])):
        lines.append(
            f"| loss {row['configured']:.0%}: measured | "
            + " | ".join(col(m, lambda r, i=i: f"{r['losses'][i]['measured']:.2%}") for m in MODES)
            + " |"
        )
    loads = " / ".join(f"{r['load_avg'][0]:.1f}" for m in MODES for r in reps[m])
    return "\n".join(lines) + f"\n\nMachine load (1-min average) at the start of each: {loads}.\n"


def _metas(out: Path, name: str) -> list[dict]:
    metas = []
    for p in sorted(out.glob(f"{name}-[0-9][0-9]")):
        m = json.loads((p / "meta.json").read_text())
        if m["result"]["ok"] and m["emulator"]["ok"]:
            metas.append(m)
    return metas


def _ms(xs: list[float]) -> str:
    if not xs:
        return "-"
    return f"{statistics.fmean(xs):.1f} ({statistics.stdev(xs) if len(xs) > 1 else 0:.1f})"


def analyse(out: Path) -> None:
    rows = [
        "| case | relay | runs | PLT ms | time to HTML ms | down loss | up loss | down reordered | late p99 us (mean of runs) | TUN queue drops | p (PLT) | p (HTML) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rejected = len(list((out / "_rejected").glob("*"))) if (out / "_rejected").is_dir() else 0
    for name in CASES:
        got = {m: _metas(out, f"{name}-{m}") for m in MODES}
        plt = {m: [x["result"]["plt_ms"] for x in got[m]] for m in MODES}
        html = {m: [x["result"]["client"].get("page_ms", 0.0) for x in got[m]] for m in MODES}
        for mode in MODES:
            ms = got[mode]
            if not ms:
                continue

            def share(d: str, key: str, ms: list[dict] = ms) -> float:
                num = sum(x["emulator"]["relay"][d][key] for x in ms)
                den = sum(x["emulator"]["relay"][d]["received"] for x in ms)
                return num / den if den else 0.0

            late = statistics.fmean(x["emulator"]["late_p99_us"] for x in ms)
            tun = [x["emulator"]["relay"].get("tun_tx_dropped") for x in ms]
            tun_s = "-" if mode == "udp" else str(sum(t for t in tun if t is not None))
            p_plt = fmt_p(welch_p(plt["ip"], plt["udp"])) if mode == "ip" else ""
            p_html = fmt_p(welch_p(html["ip"], html["udp"])) if mode == "ip" else ""
            rows.append(
                f"| {name} | {mode} | {len(ms)} | {_ms(plt[mode])} | {_ms(html[mode])} | {share('down', 'dropped'):.2%} | "
                f"{share('up', 'dropped'):.2%} | {share('down', 'reordered'):.1%} | {late:.0f} | {tun_s} | {p_plt} | {p_html} |"
            )
    text = f"""# The IP-layer relay against the UDP relay, on the same QUIC runs

quic-go v0.65.0 (reno) server and Go HTTP/3 client, `quicsm testbed run` with `QUICSM_EMULATOR=udp`
(the UDP relay: the client dials the relay) or `ip` (quicsm-iprelay: the relay namespace routes every
packet through a TUN device; the client dials the server). Same tbf bottleneck, same impairment code
(testbed/relay/internal/lane), runs alternating between the two. Time to HTML = the client's time to
the page's HTML (QUIC handshake + one request: two RTTs plus serving), a direct reading of the RTT
the emulator gives. Loss and reordering are the relays' own counts (dropped / received). Runs whose
relay sent 1 % of packets more than 2 ms late were redone ({rejected} redone in all).
p: Welch's t-test, ip against udp.

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/iprelay_vs_udp.py analyse` (repo {git_rev()}).

{chr(10).join(rows)}

## UDP probes through each relay (`quicsm testbed accuracy`, alternating, each repeat shown)

{_probe_tables(out)}"""
    write_report(HERE / "iprelay_vs_udp.md", text, HERE / "iprelay_vs_udp.notes.md")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "probe", "analyse"))
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    if args.what == "run":
        run(Path(args.out), args.runs)
    if args.what == "probe":
        probes(Path(args.out))
    analyse(Path(args.out))


if __name__ == "__main__":
    main()
