"""Fault injection: SIGKILL ``apply``, ``revert`` and ``port`` at every step and at random moments.

Each run is a real process killed for real: a forked child for the sweep over every step (it kills itself
after its N-th file step, ``QUICSM_FAULT_AFTER=N``), and ``python -m quicsm`` or a two-line driver killed by
a timer at random moments. Afterwards the
tree must be exactly pristine or exactly patched (bytes and modes) once ``status`` has run, ``status``
must say which, and the next ``apply``/``revert`` must finish. ``QUICSM_FAULT_TRIALS`` sets the number of
timed kills (default 12 under CI=true, 4 in the fast lane elsewhere).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from instr_fixtures import cubic_edits, killed_at_step, make_set, one_file_set, write_tree

import quicsm
from quicsm.instrumentation import engine
from quicsm.instrumentation.journal import FAULT_ENV, JOURNAL_DIR
from quicsm.instrumentation.patchset import load_patch_set

REPO = Path(quicsm.__file__).resolve().parent.parent
MODES = {"tcp_cubic_sender_bytes.cc": 0o664, "quic_sent_packet_manager.cc": 0o444, "bbr_sender.cc": 0o755}
DRIVER = """
import sys
from quicsm.instrumentation import engine
from quicsm.instrumentation.patchset import load_patch_set
sets = [load_patch_set(d) for d in sys.argv[3:]]
getattr(engine, sys.argv[1])(sys.argv[2], sets=sets)
"""


def _bytes(p: Path) -> bytes:
    """File bytes; the apply record without its time stamps (a re-apply writes new ones)."""
    if p.name != engine.STATE_FILE:
        return p.read_bytes()
    rec = json.loads(p.read_text())
    for r in rec["applied"]:
        r.pop("at")
    return json.dumps(rec, sort_keys=True).encode()


def state(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` with its bytes and permission bits."""
    return {
        p.relative_to(root).as_posix(): (_bytes(p), p.stat().st_mode & 0o7777)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not _ours(p.relative_to(root))
    }


def _ours(rel: Path) -> bool:
    """Journal, staging and temporary files of the engine (not part of the tree's state)."""
    return any(part.startswith((".quicsm-journal", ".quicsm-tmp-")) for part in rel.parts)


def classify(now: dict, pristine: dict, patched: dict) -> str:
    return "pristine" if now == pristine else "patched" if now == patched else "mixed"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tree with two sets over three files of modes 664, 444 and 755, and its pristine and patched states."""
    base = tmp_path_factory.mktemp("faults")
    tmpl = base / "template"
    paths = write_tree(tmpl, "E")
    cubic = make_set(base / "sets", tmpl, cubic_edits(paths))
    bbr_rel = paths["bbr_sender.cc"]
    old = (tmpl / bbr_rel).read_text()
    bbr = one_file_set(
        base / "sets", bbr_rel, old, old.replace("    mode_ = DRAIN;\n", "    mode_ = DRAIN;\n    LOG();\n")
    )
    for name, rel in paths.items():
        os.chmod(tmpl / rel, MODES[name])
    sets = [load_patch_set(cubic), load_patch_set(bbr)]
    pristine = state(tmpl)
    patched_tree = base / "patched"
    shutil.copytree(tmpl, patched_tree)
    engine.apply(patched_tree, sets=sets)
    patched = state(patched_tree)
    assert {m for _, m in patched.values()} >= set(MODES.values())
    return {
        "base": base,
        "template": tmpl,
        "patched_tree": patched_tree,
        "dirs": [cubic, bbr],
        "sets": sets,
        "pristine": pristine,
        "patched": patched,
    }


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop(FAULT_ENV, None)
    env.update(extra)
    return env


def _driver(op: str, root: Path, dirs: list[Path], **env: str) -> subprocess.Popen:
    cmd = [sys.executable, "-c", DRIVER, op, str(root), *map(str, dirs)]
    return subprocess.Popen(cmd, env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _after_kill(world, root: Path, killed: bool) -> str:
    """Physical state right after the kill; then status must settle and name it, and apply/revert finish."""
    physical = classify(state(root), world["pristine"], world["patched"])
    rows = engine.status(root, sets=world["sets"])
    settled = classify(state(root), world["pristine"], world["patched"])
    assert settled in ("pristine", "patched"), f"mixed tree after status (killed={killed})"
    assert not (root / JOURNAL_DIR).exists()
    assert {r.status for r in rows} == {settled}, rows
    engine.apply(root, sets=world["sets"])
    assert state(root) == world["patched"]
    engine.revert(root, sets=world["sets"])
    assert state(root) == world["pristine"]
    return f"{physical}->{settled}"


def _sweep(world, op: str, start: str, tag: str) -> Counter:
    outcomes: Counter = Counter()
    n = 0
    while True:  # kill after step 1, 2, ... until a run finishes
        n += 1
        root = world["base"] / f"{tag}{n}"
        shutil.copytree(world[start], root)
        code, err = killed_at_step(op, root, world["sets"], n)
        if code == 0:
            want = "patched" if op == "apply" else "pristine"
            assert classify(state(root), world["pristine"], world["patched"]) == want
            assert not any(p.name.startswith((".quicsm-journal", ".quicsm-tmp-")) for p in root.rglob("*"))
            break
        assert code == -signal.SIGKILL, err
        outcomes[_after_kill(world, root, True)] += 1
        shutil.rmtree(root)
    assert n > 10  # every step was reached: staging, the journal, each replace, the clean-up
    print(op, n - 1, "kill points:", dict(outcomes))
    return outcomes


def test_kill_apply_at_every_step(world):
    out = _sweep(world, "apply", "template", "apply")
    # before the journal is in place nothing changed; after it, status completes the apply
    assert out["pristine->pristine"] >= 6 and out["mixed->patched"] >= 2
    assert set(out) <= {"pristine->pristine", "pristine->patched", "mixed->patched", "patched->patched"}


def test_kill_revert_at_every_step(world):
    out = _sweep(world, "revert", "patched_tree", "revert")
    assert out["patched->patched"] >= 6 and out["mixed->pristine"] >= 2
    assert set(out) <= {"patched->patched", "patched->pristine", "mixed->pristine", "pristine->pristine"}


def test_kill_cli_apply_and_revert_at_random_moments(world):
    trials = int(os.environ.get("QUICSM_FAULT_TRIALS", "12" if os.environ.get("CI") == "true" else "4"))
    rng = random.Random(11)
    outcomes: Counter = Counter()
    span = {}
    for op in ("apply", "revert"):  # how long an undisturbed run takes: kills are spread over it
        root = world["base"] / f"untimed-{op}"
        shutil.copytree(world["template" if op == "apply" else "patched_tree"], root)
        t0 = time.perf_counter()
        assert _driver(op, root, world["dirs"]).wait(timeout=120) == 0
        span[op] = time.perf_counter() - t0
    for i in range(trials):
        op = ("apply", "revert")[i % 2]
        root = world["base"] / f"timed{i}"
        shutil.copytree(world["template" if op == "apply" else "patched_tree"], root)
        proc = _driver(op, root, world["dirs"])
        time.sleep(rng.uniform(0.5, 1.0) * span[op])
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=120)
        outcomes[f"{op}:{_after_kill(world, root, proc.returncode != 0)}"] += 1
        shutil.rmtree(root)
    assert sum(outcomes.values()) == trials
    print(dict(outcomes))


def test_kill_cli_port_keeps_the_output_whole(world, tmp_path):
    """``port --force`` over an existing set: the output is the old set or the new one, never a mix."""
    new = tmp_path / "new"
    write_tree(new, "D")
    p = new / "quic/core/congestion_control/tcp_cubic_sender_bytes.cc"
    p.write_text(p.read_text().replace("  if (!IsCwndLimited", "  UpdateStats();\n  if (!IsCwndLimited"))
    out = tmp_path / "ported"
    cmd = [sys.executable, "-m", "quicsm", "patch", "port", str(new), "--from", str(world["dirs"][0]), "-o", str(out)]
    first = subprocess.run([*cmd, "--name", "first"], env=_env(), capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    seen: Counter = Counter()
    n = 0
    while True:
        n += 1
        proc = subprocess.run([*cmd, "--name", f"second{n}", "--force"], env=_env(**{FAULT_ENV: str(n)}))
        name = load_patch_set(out).name  # loads: the directory is complete
        if proc.returncode == 0:
            assert name == f"second{n}"
            break
        assert proc.returncode == -signal.SIGKILL
        assert name in ("first", f"second{n}")
        seen["old" if name == "first" else "new"] += 1
        subprocess.run([*cmd, "--name", "first", "--force"], env=_env(), check=True)
    assert not [x for x in os.listdir(tmp_path) if x.startswith(".ported.")]
    assert n >= 3 and seen["old"] >= 2
    print("port", n - 1, "kill points:", dict(seen))
