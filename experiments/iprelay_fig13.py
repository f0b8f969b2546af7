"""Fig. 13 through the IP relay against the UDP relay, paired: the scenarios of ``fig13.toml``
(desktop, mobile20, mobile: a CPU-quota client makes the server ApplicationLimited) run in chunks
that alternate the relay (``QUICSM_EMULATOR=udp`` / ``ip``), each chunk one locked stretch, so both
relays see the same machine load. Per scenario: the server's ApplicationLimited share and the
client's time to the page's HTML, mean (sd), Welch's p of the IP relay against the UDP relay, and per
relay the Fig. 13 effect (desktop against each CPU-quota client).

    sudo python3 experiments/iprelay_fig13.py run [--chunks 3] [--runs 2]
    python3 experiments/iprelay_fig13.py analyse

Runs go to /tmp/qsm-exp/iprelay-fig13/<relay>-<chunk>/<scenario>-NN; writes experiments/iprelay_fig13.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_p, git_rev, load_runs, mean_sd, table, welch_p, write_report

HERE = Path(__file__).resolve().parent
OUT = Path("/tmp/qsm-exp/iprelay-fig13")
LOCK = "/tmp/quicsm-testbed.lock"
RELAYS = ("udp", "ip")
SCENARIOS = ("desktop", "mobile20", "mobile")


def run(out: Path, chunks: int, runs: int) -> None:
    text = (HERE / "fig13.toml").read_text().replace("runs = 12", f"runs = {runs}")
    out.mkdir(parents=True, exist_ok=True)
    toml = out / "fig13-paired.toml"
    toml.write_text(text)
    start = len(list(out.glob("udp-*")))
    for k in range(start, start + chunks):
        order = RELAYS if k % 2 == 0 else RELAYS[::-1]
        for relay in order:
            cmd = [sys.executable, "-m", "quicsm", "testbed", "matrix", str(toml), "--out", str(out / f"{relay}-{k}")]
            subprocess.run(["flock", LOCK, *cmd], env={**os.environ, "QUICSM_EMULATOR": relay}, check=False)
            load = Path("/proc/loadavg").read_text().split()[0]
            (out / f"{relay}-{k}" / "load1").write_text(load)


def analyse(out: Path) -> None:
    from quicsm.compare.occupancy import state_share

    data: dict[tuple[str, str], dict[str, list[float]]] = {}
    loads: list[float] = []
    for relay in RELAYS:
        for chunk in sorted(out.glob(f"{relay}-*")):
            for sc in SCENARIOS:
                d = data.setdefault((relay, sc), {"al": [], "page": []})
                for trace, meta in load_runs(chunk, sc + "-"):
                    d["al"].append(state_share(trace, "ApplicationLimited"))
                    d["page"].append(float(meta["result"]["client"]["page_ms"]))
            load = chunk / "load1"
            if load.is_file():
                loads.append(float(load.read_text()))
    rows = []
    for sc in SCENARIOS:
        u, i = data.get(("udp", sc)), data.get(("ip", sc))
        if not u or not i:
            continue
        (ua, us), (ia, is_) = mean_sd(u["al"]), mean_sd(i["al"])
        (up, ups), (ip_, ips) = mean_sd(u["page"]), mean_sd(i["page"])
        rows.append(
            [
                sc,
                f"{len(u['al'])} / {len(i['al'])}",
                f"{ua:.3f} ({us:.3f})",
                f"{ia:.3f} ({is_:.3f})",
                fmt_p(welch_p(i["al"], u["al"])),
                f"{up:.1f} ({ups:.1f})",
                f"{ip_:.1f} ({ips:.1f})",
                fmt_p(welch_p(i["page"], u["page"])),
            ]
        )
    effect = []
    for relay in RELAYS:
        base = data.get((relay, "desktop"), {}).get("al", [])
        for sc in SCENARIOS[1:]:
            other = data.get((relay, sc), {}).get("al", [])
            if base and other:
                effect.append([relay, f"desktop vs {sc}", fmt_p(welch_p(other, base))])
    load_text = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "not recorded in meta.json"
    text = f"""# Fig. 13 through the IP relay and through the UDP relay, paired

{__doc__.split(chr(10) + chr(10) + "    sudo")[0]}

quic-go v0.65.0 reno server, Go client, 50 Mbit/s, 36 ms RTT, 1-BDP queue, one 10 MB object (fig13.toml).
Only runs the testbed counted good (client ok, emulator on time). Machine load (1-min average): {load_text}.

Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `experiments/iprelay_fig13.py analyse` (repo {git_rev()}).

{table(["scenario", "runs udp / ip", "AppLimited udp", "AppLimited ip", "p (AL)", "page ms udp", "page ms ip", "p (page)"], rows)}
The Fig. 13 effect within each relay (Welch, ApplicationLimited share):

{table(["relay", "pair", "p"], effect)}"""
    write_report(HERE / "iprelay_fig13.md", text, HERE / "iprelay_fig13.notes.md")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "analyse"))
    ap.add_argument("--chunks", type=int, default=3)
    ap.add_argument("--runs", type=int, default=2, help="runs per scenario and chunk")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()
    if a.what == "run":
        run(Path(a.out), a.chunks, a.runs)
    else:
        analyse(Path(a.out))


if __name__ == "__main__":
    main()
