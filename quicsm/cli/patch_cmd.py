"""``quicsm patch``: list, detect, check, apply, revert, status and port instrumentation patch sets."""

from __future__ import annotations

import json
from pathlib import Path

import click

from quicsm.instrumentation.appliers import APPLIERS, Applier, default_applier, get_applier

__all__ = ["patch"]

_SRC = click.argument("src", type=click.Path(exists=True, file_okay=True, dir_okay=True, path_type=Path))
_SET = click.option("--set", "set_name", metavar="NAME|DIR", help="Use this patch set (shipped name or directory).")
_ALGO = click.option(
    "--algorithm",
    "-a",
    "algorithms",
    multiple=True,
    type=click.Choice(["cubic", "reno", "bbr", "bbr2", "bbr3"]),
    help="Only these algorithms (default: every one found in SRC).",
)
_APPLIER = click.option(
    "--applier",
    type=click.Choice(sorted(APPLIERS)),
    default=None,
    help="Tool that applies diffs (default: git, else GNU patch).",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


def _applier(name: str | None) -> Applier:
    return get_applier(name) if name else default_applier()


@click.group()
def patch() -> None:
    """Instrument congestion-control senders with the log lines quicsm reads.

    \b
      quicsm patch detect ~/quiche            # era, version, best patch sets
      quicsm patch apply ~/quiche             # all or nothing; `revert` undoes it
      quicsm patch port ~/quiche --from quiche-2024-cubic -o my-set
    """


@patch.command("list")
@click.option("--target", help="Only sets of this target (quiche, chromium, quic-go, ...).")
@_JSON
def list_cmd(target: str | None, as_json: bool) -> None:
    """The shipped patch sets: target, algorithm, era, upstream version and states."""
    from quicsm.instrumentation.patchset import manifest_dict, shipped_patch_sets

    errors: list = []
    sets = shipped_patch_sets(target, errors=errors)
    for err in errors:
        click.echo(f"warning: skipped broken set: {err}", err=True)
    if as_json:
        click.echo(
            json.dumps([{k: v for k, v in manifest_dict(s).items() if k != "placements"} for s in sets], indent=1)
        )
        return
    if not sets:
        click.echo("no patch sets shipped" + (f" for target {target}" if target else ""))
        return
    for s in sets:
        commit = (s.upstream.commit or "-")[:10]
        click.echo(
            f"{s.name:32} {s.target:9} {s.algorithm:6} era {s.era:3} {s.date or '-':10} {commit:10} "
            f"+{s.added_lines} lines in {len(s.files)} files"
        )
        click.echo(f"{'':32} states: {', '.join(s.states)}")


@patch.command()
@_SRC
@click.option("--target", help="Only look for this target's files.")
@_APPLIER
@_JSON
def detect(src: Path, target: str | None, applier: str | None, as_json: bool) -> None:
    """Find the sender files in SRC, tell era and closest known version from their content."""
    from quicsm.instrumentation.engine import detect as run

    det = run(src, applier=_applier(applier), target=target)
    d = det.to_json()
    if as_json:
        click.echo(json.dumps(d, indent=1))
        return
    click.echo(f"target {d['target']} ({d['layout']}), root {d['root']}")
    click.echo(
        f"era {d['era']}, content dates {d['dates'][0]} .. {d['dates'][1]}; algorithms: {', '.join(d['algorithms'])}"
    )
    for rel in d["files"].values():
        click.echo(f"  {rel}")
    for feat, ev in d["features"].items():
        click.echo(f"  feature {feat}: {ev}")
    for note in d["notes"]:
        click.echo(f"  note: {note}")
    if not d["candidates"]:
        click.echo("no patch sets for this target")
    for c in d["candidates"][:12]:
        click.echo(f"  {c['kind']:10} {c['score']:.2f} {c['set']:32} {c['reason']}")


@patch.command()
@_SRC
@_SET
@_ALGO
@_APPLIER
def check(src: Path, set_name: str | None, algorithms: tuple[str, ...], applier: str | None) -> None:
    """Say whether the chosen patch sets apply to SRC (nothing is changed)."""
    from quicsm.errors import PatchError
    from quicsm.instrumentation.engine import check as run

    results = run(src, set_name=set_name, algorithms=algorithms, applier=_applier(applier))
    bad = []
    for sc in results:
        if sc.state == "applies":
            click.echo(f"{sc.plan.name}: applies cleanly to {sc.plan.root}")
        elif sc.state == "applied":
            click.echo(f"{sc.plan.name}: already applied")
        else:
            bad.append(sc.plan.name)
            click.echo(f"{sc.plan.name}: does not apply")
            for rel, why in sc.problems.items():
                click.echo(f"  {rel}: {why.splitlines()[0] if why else ''}")
    if bad:
        raise PatchError(f"{', '.join(bad)} do not apply; try `quicsm patch port {src} --from {bad[0]}`")


@patch.command()
@_SRC
@_SET
@_ALGO
@click.option(
    "--port", "port_missing", is_flag=True, help="For an algorithm no pinned set fits, port the closest one on the fly."
)
@_APPLIER
def apply(
    src: Path, set_name: str | None, algorithms: tuple[str, ...], port_missing: bool, applier: str | None
) -> None:
    """Apply the chosen patch sets to SRC, all or nothing."""
    from quicsm.instrumentation.engine import apply as run

    res = run(src, set_name=set_name, algorithms=algorithms, applier=_applier(applier), port_missing=port_missing)
    for name in res.applied:
        click.echo(f"applied {name}")
    for name in res.already:
        click.echo(f"{name}: already applied")
    for note in res.notes:
        click.echo(f"skipped {note}")
    if res.applied:
        click.echo(f"{len(res.files)} files patched under {res.root}; `quicsm patch revert {src}` undoes it")


@patch.command()
@_SRC
@_SET
@_APPLIER
def revert(src: Path, set_name: str | None, applier: str | None) -> None:
    """Undo applied patch sets; files come back byte-identical (verified by sha256)."""
    from quicsm.instrumentation.engine import revert as run

    res = run(src, set_name=set_name, applier=_applier(applier))
    for name in res.applied:
        click.echo(f"reverted {name}")
    for name in res.already:
        click.echo(f"{name}: not applied, nothing to revert")
    if res.applied:
        click.echo(f"{len(res.files)} files restored under {res.root}")


@patch.command()
@_SRC
@_SET
@_APPLIER
@_JSON
def status(src: Path, set_name: str | None, applier: str | None, as_json: bool) -> None:
    """Per file: pristine, patched, or modified otherwise."""
    from quicsm.instrumentation.engine import status as run

    rows = run(src, set_name=set_name, applier=_applier(applier))
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in rows], indent=1))
        return
    for r in rows:
        click.echo(f"{r.status:18} {r.path}  ({r.set}: {r.detail})")


@patch.command()
@_SRC
@click.option(
    "--from",
    "from_set",
    metavar="NAME|DIR",
    help="Patch set to port (default: try the sets of --algorithm, best match first).",
)
@_ALGO
@click.option("-o", "--output", type=click.Path(path_type=Path), help="New set directory (default ./<name>).")
@click.option("--name", help="Name of the new set (default <from>-port-<date or hash>).")
@click.option("--force", is_flag=True, help="Replace the output directory if it exists.")
@click.option("--dry-run", is_flag=True, help="Place and verify, print the diff, write nothing.")
@_APPLIER
def port(
    src: Path,
    from_set: str | None,
    algorithms: tuple[str, ...],
    output: Path | None,
    name: str | None,
    force: bool,
    dry_run: bool,
    applier: str | None,
) -> None:
    """Port a patch set to the version in SRC and write it as a new set (all or nothing)."""
    from quicsm.errors import PatchError
    from quicsm.instrumentation.patchset import find_patch_set
    from quicsm.instrumentation.porter import plan_port, sources_for
    from quicsm.instrumentation.porter import port as run

    app = _applier(applier)
    if from_set:
        sources = [find_patch_set(from_set)]
    elif len(algorithms) == 1:
        sources = sources_for(src, algorithms[0], applier=app)
    else:
        raise PatchError("say what to port: --from SET, or one --algorithm to try the shipped sets of it")
    if dry_run:
        res = plan_port(sources[0], src, applier=app)
        for p in res.placements:
            click.echo(
                f"placed {p.file} hunk {p.hunk} at line {p.line} score {p.score:.2f}"
                + (f" in {p.function}" if p.function else "")
            )
        for f in res.failures:
            click.echo(f"cannot place {f.file}{f' hunk {f.hunk}' if f.hunk else ''}: {f.reason}")
        click.echo(res.diff, nl=False)
        if not res.ok:
            raise PatchError(f"{len(res.failures)} changes of {sources[0].name} cannot be placed")
        return
    try:
        res, out = run(sources, src, output, name=name, applier=app, force=force)
    except PatchError:
        for ps in sources:
            for f in plan_port(ps, src, applier=app).failures:
                click.echo(
                    f"cannot place {f.file}{f' hunk {f.hunk}' if f.hunk else ''} (from {ps.name}): {f.reason}", err=True
                )
        raise
    for p in res.placements:
        click.echo(
            f"placed {p.file} hunk {p.hunk} at line {p.line} score {p.score:.2f}"
            + (f" in {p.function}" if p.function else "")
        )
    click.echo(
        f"wrote {out} from {res.source.name} (era {res.detection.identity.era}, {len(res.placements)} changes placed)"
    )
