"""Every real qlog we have, through the commands users run, recorded once and held to it.

    python3 -m tests.traces.golden_qlogs record DIR [--code ROOT]   # outputs of the code at ROOT
    python3 -m tests.traces.golden_qlogs check DIR                  # this checkout's outputs == DIR's

The inputs are the bundled and reference qlogs (traces/, ../shared/reference/qlog-samples, the
testbed's and the foreign stacks' in tests/data, and any full-size testbed qlogs under
``$QUICSM_BENCH_QLOGS``), each as written and with its compression flipped (a ``.gz`` gunzipped, a
plain file gzipped), so the plain and the compressed read paths are both held. For each input:
``parse -o x.jsonl``, ``parse -o x.parquet``, ``infer -o m.json``, and ``compare`` of related sets
(``--format json``), with exit status and stderr. Outputs must match byte for byte, but for the
timing fields (``meta.inference_seconds``) and stderr lines that carry a duration.

The issue (30) asked for this before the reader changed: DIR was first recorded from main at
1c83881, whose object reader was then the reference.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
STAGE = Path("/tmp/quicsm-golden-qlogs")
"""Inputs are staged here (the same path in every run: trace ids carry it)."""


def _sources() -> list[Path]:
    found = sorted(REPO.glob("traces/**/*.sqlog.gz")) + sorted(REPO.glob("traces/**/*.qlog*"))
    found += sorted((REPO / "tests/data").glob("**/*.sqlog*")) + sorted((REPO / "tests/data").glob("**/*.qlog*"))
    for base in (SHARED / "reference/qlog-samples", Path("/work/shared/reference/qlog-samples")):
        if base.is_dir():
            found += sorted(base.glob("**/*.qlog"))
            break
    extra = os.environ.get("QUICSM_BENCH_QLOGS")
    if extra:
        found += sorted(p for p in Path(extra).glob("**/*") if p.is_file() and "qlog" in p.name)
    return list(dict.fromkeys(found))


def stage() -> list[tuple[str, list[Path]]]:
    """Copy every input (and its flipped-compression twin, and its meta.json) under STAGE; returns
    groups of related inputs (one per source directory and compression) for compare."""
    if STAGE.exists():
        shutil.rmtree(STAGE)
    groups: dict[str, list[Path]] = {}
    for i, src in enumerate(_sources()):
        rel = src.parent.name or "x"
        for flip in (False, True):
            folder = STAGE / f"{i:03d}-{rel}-{'flip' if flip else 'asis'}"
            folder.mkdir(parents=True)
            side = src.parent / "meta.json"
            if side.exists():
                shutil.copy(side, folder / "meta.json")
            data = src.read_bytes()
            name = src.name
            if flip:
                if name.endswith(".gz"):
                    data, name = gzip.decompress(data), name[:-3]
                else:
                    data, name = gzip.compress(data, mtime=0), name + ".gz"
            out = folder / name
            out.write_bytes(data)
            groups.setdefault(f"{src.parent}|{flip}", []).append(out)
    return [(k, v) for k, v in groups.items()]


def _run(args: list[str], code: Path) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONPATH=str(code), NO_COLOR="1", COLUMNS="100")
    env.pop("CI", None)
    p = subprocess.run(
        [sys.executable, "-m", "quicsm", *args], cwd="/tmp", env=env, capture_output=True, text=True, timeout=3600
    )
    return p.returncode, p.stderr, p.stdout


def _clean_model(path: Path) -> str:
    doc = json.loads(path.read_text())
    if isinstance(doc.get("meta"), dict):
        doc["meta"].pop("inference_seconds", None)
    return json.dumps(doc, indent=1, sort_keys=False)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def outputs(code: Path) -> dict[str, object]:
    """Every command's outputs over the staged inputs, with the code at ``code``."""
    groups = stage()
    out: dict[str, object] = {}
    work = Path("/tmp/quicsm-golden-out")
    work.mkdir(exist_ok=True)
    for _, files in groups:
        for f in files:
            key = str(f.relative_to(STAGE))
            jsonl, parquet, model = work / "x.jsonl", work / "x.parquet", work / "m.json"
            for p in (jsonl, parquet, model):
                p.unlink(missing_ok=True)
            rec: dict[str, object] = {}
            rc, err, _ = _run(["parse", str(f), "-o", str(jsonl), "--no-progress"], code)
            rec["parse_jsonl"] = [rc, err, jsonl.read_text() if jsonl.exists() else None]
            rc, err, _ = _run(["parse", str(f), "-o", str(parquet), "--no-progress"], code)
            rec["parse_parquet"] = [rc, err, _digest(parquet)]
            rc, err, _ = _run(["infer", str(f), "-o", str(model), "--no-progress"], code)
            rec["infer"] = [rc, err, _clean_model(model) if model.exists() else None]
            out[key] = rec
            print(key, rec["parse_jsonl"][0], rec["infer"][0], file=sys.stderr, flush=True)  # type: ignore[index]
    # compare: each set (a source folder) against the next one of the same compression
    for flip in ("|False", "|True"):
        sets = [files for k, files in groups if k.endswith(flip)]
        for fa, fb in zip(sets, sets[1:]):
            args = ["compare", *map(str, fa), *map(str, fb), "--format", "json", "--bootstrap", "200"]
            rc, err, text = _run(args, code)
            out[f"compare {fa[0].relative_to(STAGE)} {fb[0].relative_to(STAGE)}"] = [rc, err, text]
    # the whole corpus at once (one batch across files, stacks and kinds)
    everything = [str(f) for _, files in groups for f in files]
    for p in (work / "all.jsonl", work / "all.parquet"):
        p.unlink(missing_ok=True)
    rc, err, _ = _run(["parse", *everything, "-o", str(work / "all.jsonl"), "--no-progress"], code)
    out["all parse_jsonl"] = [rc, err, _digest(work / "all.jsonl")]
    rc, err, _ = _run(["parse", *everything, "-o", str(work / "all.parquet"), "--no-progress"], code)
    out["all parse_parquet"] = [rc, err, _digest(work / "all.parquet")]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.traces.golden_qlogs")
    ap.add_argument("mode", choices=["record", "check"])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--code", type=Path, default=REPO, help="root of the quicsm checkout to run")
    args = ap.parse_args(argv)
    got = outputs(args.code)
    if args.mode == "record":
        args.dir.mkdir(parents=True, exist_ok=True)
        (args.dir / "outputs.json").write_text(json.dumps(got, indent=1))
        print(f"recorded {len(got)} outputs in {args.dir}")
        return 0
    want = json.loads((args.dir / "outputs.json").read_text())
    bad = 0
    for key in sorted(set(want) | set(got)):
        w, g = want.get(key), got.get(key)
        if json.dumps(w) != json.dumps(g):
            bad += 1
            print(f"DIFFERS: {key}")
            if isinstance(w, dict) and isinstance(g, dict):
                for sub in w:
                    if w[sub] != g.get(sub):
                        print(
                            f"  {sub}: want {str(w[sub])[:300]!r}\n  {' ' * len(sub)}  got  {str(g.get(sub))[:300]!r}"
                        )
            else:
                print(f"  want {str(w)[:300]!r}\n  got  {str(g)[:300]!r}")
    print(f"{len(got)} outputs, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
