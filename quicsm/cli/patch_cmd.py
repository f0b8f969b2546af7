"""``quicsm patch``: list, detect, check, apply, revert, status and port instrumentation patch sets."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from quicsm.instrumentation.appliers import APPLIERS, Applier, default_applier, get_applier

if TYPE_CHECKING:
    from quicsm.instrumentation.engine import ApplyResult
    from quicsm.instrumentation.patchset import PatchSet
    from quicsm.instrumentation.porter import PortResult

__all__ = ["patch"]

_SRC = click.argument("src", type=click.Path(exists=True, file_okay=True, dir_okay=True, path_type=Path))
_SET = click.option(
    "--set",
    "set_names",
    multiple=True,
    metavar="NAME|DIR",
    help="Use this patch set (shipped name or directory); repeat for several (refused if they exclude each other).",
)
_ALGO = click.option(
    "--algorithm",
    "-a",
    "algorithms",
    multiple=True,
    type=click.Choice(["cubic", "reno", "bbr", "bbr2", "bbr3"]),
    help="Only these algorithms (default: every one found in SRC).",
)
_APPLIER = click.option(
    "--applier", type=click.Choice(sorted(APPLIERS)), help="Tool that applies diffs (default: git, else GNU patch)."
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


WIDTH = 100


def wrap(text: str, width: int = WIDTH, *, first: int = 0) -> str:
    """A long message as lines of at most ``width`` columns, continuation lines indented; a command in
    backticks is never split (it may make its line longer). ``first``: columns already taken on the first
    line (click's ``Error: ``)."""
    glue = "\x1f"
    protected = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", glue), text)
    lines = []
    for i, para in enumerate(protected.split("\n")):
        lead = "\x1e" * first if i == 0 else ""
        filled = textwrap.fill(
            para, width, initial_indent=lead, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        )
        lines.append(filled[len(lead) :])
    return "\n".join(lines).replace(glue, " ")


def _echo(text: str, *, err: bool = False) -> None:
    click.echo(wrap(text), err=err)


class _PatchGroup(click.Group):
    """Errors of every patch verb come out wrapped (they name files, sets and commands: often long)."""

    def invoke(self, ctx: click.Context) -> Any:
        from quicsm.errors import PatchError, TestbedError

        try:
            return super().invoke(ctx)
        except (PatchError, TestbedError) as exc:
            raise click.ClickException(wrap(str(exc), first=len("Error: "))) from exc


def _applier(name: str | None) -> Applier:
    return get_applier(name) if name else default_applier()


def _recover(src: Path, *, err: bool = False) -> None:
    """Finish what a killed apply/revert left in its journal, and say so."""
    from quicsm.instrumentation.engine import recover

    for note in recover(src):
        click.echo(f"recovered: {note}", err=err)


def _report(res: ApplyResult, done: str, already: str, summary: str) -> None:
    """What ``apply`` or ``revert`` did: each set (and how a ported one was made), the algorithms left
    out and why, then the files."""
    for line in res.ported:
        _echo(f"ported {line}")
    for name in res.applied:
        click.echo(f"{done} {name}")
    for name in res.already:
        click.echo(f"{name}: {already}")
    for note in res.notes:
        _echo(f"note: {note}")
    if res.applied:
        _echo(f"{len(res.files)} files {summary}")


@click.group(cls=_PatchGroup)
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
    layout = {"checkout": "upstream directory layout", "loose": "files found by name"}.get(d["layout"], d["layout"])
    version = d["features"].get("version")
    click.echo(f"target {d['target']}" + (f" {version}" if version else "") + f", root {d['root']} ({layout})")
    lo, hi = d["dates"]
    dates = f"{lo} or later (the newest era)" if hi.startswith("9999") else f"{lo} .. {hi}"
    click.echo(f"era {d['era']}, content dates {dates}; algorithms: {', '.join(d['algorithms'])}")
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
def check(src: Path, set_names: tuple[str, ...], algorithms: tuple[str, ...], applier: str | None) -> None:
    """Say whether the chosen patch sets apply to SRC (nothing is changed)."""
    from quicsm.errors import PatchError
    from quicsm.instrumentation.engine import check as run
    from quicsm.instrumentation.engine import pending

    for note in pending(src):
        click.echo(f"note: {note}")
    app = _applier(applier)
    results = run(src, set_name=set_names, algorithms=algorithms, applier=app)
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
        from quicsm.instrumentation.engine import detect as run_detect
        from quicsm.instrumentation.engine import port_hint

        det = run_detect(src, applier=app)
        algos = dict.fromkeys(
            sc.plan.patch_set.algorithm for sc in results if sc.state == "fails" and sc.plan.patch_set
        )
        hints = [h for a in algos if (h := port_hint(src, det, a, app))]
        raise PatchError(f"{', '.join(bad)} do not apply" + "".join(f"; {h}" for h in hints))


@patch.command()
@_SRC
@_SET
@_ALGO
@click.option(
    "--port", "port_missing", is_flag=True, help="For an algorithm no pinned set fits, port the closest one on the fly."
)
@_APPLIER
def apply(
    src: Path, set_names: tuple[str, ...], algorithms: tuple[str, ...], port_missing: bool, applier: str | None
) -> None:
    """Apply the chosen patch sets to SRC, all or nothing."""
    from quicsm.instrumentation.engine import apply as run

    _recover(src)
    res = run(src, set_name=set_names, algorithms=algorithms, applier=_applier(applier), port_missing=port_missing)
    _report(res, "applied", "already applied", f"patched under {res.root}; `quicsm patch revert {src}` undoes it")


@patch.command()
@_SRC
@_SET
@_APPLIER
def revert(src: Path, set_names: tuple[str, ...], applier: str | None) -> None:
    """Undo applied patch sets; files come back byte-identical (verified by sha256)."""
    from quicsm.instrumentation.engine import revert as run

    _recover(src)
    res = run(src, set_name=set_names, applier=_applier(applier))
    _report(res, "reverted", "not applied, nothing to revert", f"restored under {res.root}")


@patch.command()
@_SRC
@_SET
@_APPLIER
@_JSON
def status(src: Path, set_names: tuple[str, ...], applier: str | None, as_json: bool) -> None:
    """Per file: pristine, patched, or modified otherwise; then the tree in one word."""
    from quicsm.instrumentation.engine import set_states, tree_state
    from quicsm.instrumentation.engine import status as run

    _recover(src, err=as_json)
    rows = run(src, set_name=set_names, applier=_applier(applier))
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in rows], indent=1))
        return
    for r in rows:
        click.echo(f"{r.status:18} {r.path}  ({r.set}: {r.detail})")
    by_state: dict[str, list[str]] = {}
    for name, st in set_states(rows).items():
        by_state.setdefault(st, []).append(name)
    label = {"pristine": "not applied"}
    parts = [f"{label.get(st, st)}: {', '.join(names)}" for st, names in sorted(by_state.items())]
    sets = ", ".join(dict.fromkeys(r.set for r in rows))
    _echo(
        f"tree {tree_state(rows)}: {len(rows)} files of {sets}" + (f" ({'; '.join(parts)})" if len(parts) > 1 else "")
    )


def _echo_placements(res: PortResult) -> None:
    for p in res.placements:
        click.echo(
            f"placed {p.file} hunk {p.hunk} at line {p.line} score {p.score:.2f}"
            + (f" in {p.function}" if p.function else "")
        )


def _first_reason(res: PortResult) -> str:
    f = res.failures[0]
    more = f" (and {len(res.failures) - 1} more)" if len(res.failures) > 1 else ""
    return f"cannot place {f.file}{f' hunk {f.hunk}' if f.hunk else ''}: {f.reason}{more}"


def _echo_failures(res: PortResult, *, err: bool = False) -> None:
    for f in res.failures:
        hunk = f" hunk {f.hunk}" if f.hunk else ""
        _echo(f"cannot place {f.file}{hunk} (from {res.source.name}): {f.reason}", err=err)


@patch.command()
@_SRC
@click.option(
    "--from",
    "from_set",
    metavar="NAME|DIR",
    help="Patch set to port (default: for each algorithm, the shipped sets of it, best match first).",
)
@_ALGO
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="New set directory (default ./<name>); with several algorithms, the directory that holds the sets.",
)
@click.option("--name", help="Name of the new set (default <from>-port-<date or hash>); one algorithm only.")
@click.option("--force", is_flag=True, help="Replace an output directory that exists.")
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
    """Port patch sets to the version in SRC and write them as new sets (all or nothing).

    Without --from, every algorithm of SRC (or each -a) is ported from its shipped sets, best match first;
    nothing is written unless every one of them ports.
    """
    from quicsm.errors import PatchError
    from quicsm.instrumentation.detection import detect as run_detect
    from quicsm.instrumentation.patchset import find_patch_set
    from quicsm.instrumentation.porter import default_name, port_first, write_port

    app = _applier(applier)
    jobs: list[tuple[str, list[PatchSet]]] = []
    if from_set:
        ps = find_patch_set(from_set)
        jobs.append((ps.algorithm, [ps]))
    else:
        det = run_detect(src, applier=app)
        wanted = list(dict.fromkeys(algorithms)) or list(det.identity.algorithms)
        for algo in wanted:
            sets = [c.patch_set for c in det.candidates if c.patch_set.algorithm == algo and c.kind != "incomplete"]
            if sets:
                jobs.append((algo, sets))
            elif algorithms:
                raise PatchError(f"{src}: no {algo} patch set of target {det.target.name} to port from")
            else:
                click.echo(f"{algo}: no {det.target.name} set of it to port from, skipped")
        if not jobs:
            raise PatchError(f"{src}: no patch set of target {det.target.name} to port from")
    if name and len(jobs) > 1:
        raise PatchError("--name names one set: give one -a or --from")
    plans: list[tuple[PortResult, list[PortResult]]] = []
    for _, sets in jobs:  # each algorithm's first set that ports (else its first), and the sets that did not
        res, tried = port_first(sets, src, applier=app)
        plans.append((res or tried[0], tried))
    failed = [algo for (algo, _), (res, _) in zip(jobs, plans, strict=True) if not res.ok]
    for res, tried in plans:  # the sets tried before the one used, each with its first reason
        if res.ok:
            for r in tried:
                _echo(f"skipped {r.source.name}: {_first_reason(r)}")
    if dry_run:
        for res, _ in plans:
            _echo_placements(res)
            _echo_failures(res)
            click.echo(res.diff, nl=False)
        if failed:
            raise PatchError(f"{', '.join(failed)}: some changes cannot be placed")
        return
    if failed:
        for res, tried in plans:
            if not res.ok:
                for r in tried:
                    _echo_failures(r, err=True)
        raise PatchError(f"cannot port {', '.join(failed)} to {src}; nothing was written")
    outs = [output if len(plans) == 1 else (output or Path.cwd()) / default_name(res) for res, _ in plans]
    taken = [str(o) for o in outs if o is not None and o.exists()]
    if taken and not force:
        raise PatchError(f"{', '.join(taken)}: already exists (choose another -o or pass --force); nothing was written")
    for (res, _), out in zip(plans, outs, strict=True):
        written = write_port(res, out, name=name, applier=app, force=force)
        _echo_placements(res)
        click.echo(
            f"wrote {written} from {res.source.name} (era {res.detection.identity.era}, "
            f"{len(res.placements)} changes placed)"
        )


@patch.command()
@click.argument("stack")
@click.argument("version")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
def fetch(stack: str, version: str, dest: Path) -> None:
    """A writable source tree of STACK (quic-go, quiche) at VERSION from its registry, in DEST.

    \b
    The tree gets a .quicsm-source.json saying which release it is, so `detect`, `port` and `save`
    name sets after it:
      quicsm patch fetch quic-go v0.64.1 ~/src/quic-go-v0.64.1
      quicsm patch apply ~/src/quic-go-v0.64.1 --port -a cubic
    """
    from quicsm.testbed import stacks

    names = {s.target: s for s in stacks.all_stacks() if s.target}
    st = names.get(stack) or stacks.get(stack)
    src = st.fetch(version, dest, progress=lambda line: click.echo(line, err=True))
    click.echo(f"fetched {st.name} {src.version} from {src.origin} into {dest}")


@patch.command()
@click.argument("source", metavar="SRC|NAME")
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    help="Set directory (default ./<name>); with several sets, the directory that holds them.",
)
@click.option("--force", is_flag=True, help="Replace an output directory that exists.")
def save(source: str, output: Path | None, force: bool) -> None:
    """Keep a ported set as a set directory that `--set` and matrix files take.

    \b
    SRC: a tree where `quicsm patch apply --port` ported a set (it lives in the tree's apply record);
    NAME: a set the testbed ported for a version with no shipped set (~/.cache/quicsm/sets).
      quicsm patch save ~/src/quic-go-v0.64.1 -o my-sets/
      quicsm patch save quic-go-v0.64.1-cubic-port -o my-sets/quic-go-v0.64.1-cubic
    """
    from quicsm.errors import PatchError
    from quicsm.instrumentation.engine import saved_sets
    from quicsm.instrumentation.patchset import load_patch_set, manifest_dict
    from quicsm.instrumentation.porter import write_patch_set
    from quicsm.testbed.sets import made_sets_root

    if Path(source).is_dir():
        found = saved_sets(Path(source))
    else:
        made = sorted(made_sets_root().glob(f"*/{source}"))
        if not made:
            have = sorted(p.name for p in made_sets_root().glob("*/*") if p.is_dir())
            raise PatchError(
                f"{source}: neither a source tree nor a set the testbed ported"
                + (f" (it has: {', '.join(have)})" if have else " (it has ported none yet)")
            )
        found = [(ps.name, manifest_dict(ps), ps.diff_text) for ps in [load_patch_set(made[0])]]
    if not found:
        raise PatchError(f"{source}: its apply record holds no ported set (shipped sets need no saving)")
    for name, manifest, diff in found:
        out = output if output is not None and len(found) == 1 else (output or Path.cwd()) / name
        written = write_patch_set(out, manifest, diff, force=force)
        click.echo(f"saved {name} to {written}; use it with --set {written}")
