"""MkDocs hooks: the pages generated from the code, and links that leave docs/.

Generated at every build, so they follow the code: the command line (every verb's ``--help``), the Python API (``quicsm.__all__`` and the subpackages'
``__all__``, rendered by mkdocstrings from the docstrings), the JSON Schemas (``quicsm/schemas/``), the
patch-set catalogue (the shipped manifests, read by :mod:`quicsm.instrumentation`), the stacks (the
testbed's registry) and the gallery (every picture and report committed under ``experiments/``, beside
the write-up that shows it and the command that made it). The tutorials' runnable blocks are run in a
scratch copy of the checkout and the files they write are published beside the tutorial, so a tutorial's
pictures are what its commands draw today.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any

from mkdocs.structure.files import File, Files

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS))
sys.path.insert(0, str(ROOT))

import _blocks  # noqa: E402

log = logging.getLogger("mkdocs.plugins.quicsm")

PICTURES = (".svg", ".png", ".html")
API_PACKAGES = ("check", "compare", "diagrams", "fleet", "inference", "instrumentation", "traces")
"""Subpackages whose ``__all__`` the API page documents after the top-level names."""


# ---- generated pages ---------------------------------------------------------------------------------


def _api_page() -> str:
    import quicsm

    out = [
        "# Python API",
        "",
        "Generated from the docstrings at every build. `import quicsm` gives the pipeline, one call per stage",
        "(each CLI verb maps its options to one of these); the subpackages below hold the rest of the library.",
        "",
        "## `quicsm`",
        "",
    ]
    for name in quicsm.__all__:
        if name.startswith("__"):
            continue
        out += [_directive(getattr(quicsm, name), f"quicsm.{name}"), ""]
    for sub in API_PACKAGES:
        mod = importlib.import_module(f"quicsm.{sub}")
        names = list(getattr(mod, "__all__", []))
        if not names:
            continue
        doc = (mod.__doc__ or "").strip().split("\n\n")[0]
        out += [f"## `quicsm.{sub}`", "", _roles(doc), ""]
        for name in names:
            out += [_directive(getattr(mod, name), f"quicsm.{sub}.{name}"), ""]
    return "\n".join(out)


def _directive(obj: Any, name: str) -> str:
    """``::: path`` for an object, by where it is defined, headed by the name users import it as."""
    module = getattr(obj, "__module__", None)
    qual = getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qual, str) and "<" not in qual and module.startswith("quicsm"):
        home = f"{module}.{qual}"
        if home != name:
            return f'::: {home}\n    options:\n      heading: "{name}"\n      toc_label: "{name.rsplit(".", 1)[-1]}"'
        return f"::: {home}"
    return f"::: {name}"  # a constant or a type alias: documented where it is exported


_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc|obj|const|ref):`~?([^`]+)`")


def _roles(text: str) -> str:
    """Sphinx roles (``:func:`x```) as Markdown code, which is what a reader needs."""
    return _ROLE.sub(r"`\1`", text).replace("``", "`")


def _cli_page() -> str:
    """Every verb's ``--help``, as click formats it, walking the command tree."""
    import click

    from quicsm.cli.main import cli

    out = [
        "# Command line",
        "",
        "Generated from the click commands at every build: what `quicsm VERB --help` prints, for every verb.",
        "",
    ]

    def walk(cmd: click.Command, name: str, parent: click.Context | None, depth: int) -> None:
        ctx = click.Context(cmd, info_name=name, parent=parent, terminal_width=100, max_content_width=100)
        path = ctx.command_path
        first = (cmd.help or "").split("\n\n")[0].replace("\b", "").strip()
        out.extend(
            [f"{'#' * min(depth + 2, 4)} `{path}`", "", _roles(first), "", "```text", cmd.get_help(ctx), "```", ""]
        )
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                child = cmd.get_command(ctx, sub)
                if child is not None and not child.hidden:
                    walk(child, sub, ctx, depth + 1)

    walk(cli, "quicsm", None, 0)
    return "\n".join(out)


def _schemas_page() -> str:
    out = [
        "# Schemas",
        "",
        "The JSON Schemas quicsm ships in `quicsm/schemas/` (generated from the msgspec Structs that write",
        "each file; `tests/test_schemas.py` keeps them in step and validates real outputs against them).",
        "Each section lists the top-level fields; the full schema is linked.",
        "",
    ]
    for path in sorted((ROOT / "quicsm" / "schemas").glob("*.schema.json")):
        schema = json.loads(path.read_text())
        defs = schema.get("$defs", {})
        top = _resolve(schema, defs)
        title = path.name.removesuffix(".schema.json")
        out += [f"## {title}", "", f"[`{path.name}`](schemas/{path.name})", ""]
        desc = top.get("description") or schema.get("description") or ""
        if desc:
            out += [_roles(desc), ""]
        out += _fields_table(top, defs)
        for name, sub in sorted(defs.items()):
            if sub is top or "properties" not in sub:
                continue
            out += [f"### {name}", ""]
            if sub.get("description"):
                out += [_roles(sub["description"]), ""]
            out += _fields_table(sub, defs)
    return "\n".join(out)


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref", "")
    if ref.startswith("#/$defs/"):
        return defs[ref.split("/")[-1]]
    return node


def _type_of(node: Any) -> str:
    if not isinstance(node, dict):
        return "any"
    if "prefixItems" in node:
        return "[" + ", ".join(_type_of(n) for n in node["prefixItems"]) + "]"
    if "$ref" in node:
        name = node["$ref"].split("/")[-1]
        return f"[{name}](#{name.lower()})"
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    for key in ("anyOf", "oneOf"):
        if key in node:
            return " or ".join(_type_of(n) for n in node[key])
    t = node.get("type", "any")
    if t == "array":
        return f"array of {_type_of(node.get('items', {}))}"
    if t == "object" and "additionalProperties" in node and isinstance(node["additionalProperties"], dict):
        return f"object of {_type_of(node['additionalProperties'])}"
    return " or ".join(t) if isinstance(t, list) else str(t)


def _fields_table(node: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    props = node.get("properties", {})
    if not props:
        return []
    required = set(node.get("required", []))
    rows = ["| field | type | required | meaning |", "|---|---|---|---|"]
    for name, sub in props.items():
        desc = _roles(sub.get("description", "")).replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{name}` | {_type_of(sub)} | {'yes' if name in required else ''} | {desc} |")
    return [*rows, ""]


def _catalogue_page() -> str:
    from quicsm.instrumentation import shipped_patch_sets
    from quicsm.instrumentation.targets import all_targets

    sets = shipped_patch_sets()
    out = [
        "# Patch-set catalogue",
        "",
        f"Every patch set quicsm ships ({len(sets)}), read from its manifest at build time; `quicsm patch list`",
        "prints the same. A set instruments one release (or one snapshot) of one target; for a release no set",
        "was made for, the porter carries the nearest one over ([Instrument a QUIC stack](../patching.md)).",
        "",
    ]
    for target in all_targets():
        mine = [s for s in sets if s.target == target.name]
        if not mine:
            continue
        out += [f"## `{target.name}`", "", _roles(target.description), ""]
        out += ["| set | algorithm | release | upstream | states |", "|---|---|---|---|---|"]
        for s in mine:
            up = s.upstream
            where = up.repository + (f"@{up.commit[:12]}" if up.commit else "") + (f" ({up.date})" if up.date else "")
            states = ", ".join(x for x in s.states if x != "Init")
            out.append(f"| `{s.name}` | {s.algorithm} | {_release(s)} | {where} | {states} |")
        out.append("")
    return "\n".join(out)


def _release(s: Any) -> str:
    extra = s.extra or {}
    for key in ("module", "crate"):
        v = extra.get(key)
        if isinstance(v, dict) and v.get("version"):
            return str(v["version"])
    v = extra.get("version")
    return str(v).split(" ")[0] if v else "-"


def _stacks_page() -> str:
    from quicsm.testbed import stacks

    out = [
        "# Stacks",
        "",
        "The server stacks `quicsm testbed` can build and run, read from its registry",
        "(`quicsm.testbed.stacks`) at build time. How to add one: [Add a testbed stack](../stacks.md).",
        "",
        "| stack | implementation | controllers | clients | versions with a shipped set | patch target |",
        "|---|---|---|---|---|---|",
    ]
    descs = []
    for s in stacks.all_stacks():
        versions = ", ".join(s.versions()) or "-"
        default = f" (default {s.default_version})" if s.default_version else ""
        out.append(
            f"| `{s.name}` | {s.implementation or '-'} | {', '.join(s.ccs)} | {', '.join(s.clients)} "
            f"| {versions}{default} | {('`' + s.target + '`') if s.target else '-'} |"
        )
        if s.description:
            descs += [f"## `{s.name}`", "", _roles(s.description), ""]
    return "\n".join([*out, "", *descs])


# ---- the gallery ---------------------------------------------------------------------------------------

_CODE = re.compile(r"`([^`]+)`")


def _gallery(files: Files, config: Any) -> str:
    exp = ROOT / "experiments"
    writeups = sorted(p for p in exp.glob("*.md") if not p.name.endswith(".notes.md"))
    texts = {p: p.read_text(encoding="utf-8") for p in writeups}
    pictures = sorted(p for p in exp.iterdir() if p.suffix in PICTURES and p.is_file())
    out = [
        "# Gallery",
        "",
        "Every diagram and report committed under `experiments/`, with the write-up that reads it and the",
        "command that made it. Generated from the files at build time: a new picture appears here when it",
        "is committed, and the build fails if its write-up does not name the command that made it.",
        "",
    ]
    for p in sorted(exp.glob("*.md")):  # write-ups and their lab notes, so links to either work
        _publish(files, config, f"experiments/{p.name}", p)
    for pic in pictures:
        _publish(files, config, f"experiments/{pic.name}", pic)
    by_writeup: dict[Path | None, list[Path]] = {}
    for pic in pictures:
        owner = next((w for w in writeups if pic.name in texts[w]), None)
        by_writeup.setdefault(owner, []).append(pic)
    for w, pics in sorted(by_writeup.items(), key=lambda kv: (kv[0] is None, str(kv[0]))):
        title = _title(texts[w]) if w else "Pictures no write-up names"
        out += [f"## {title}", ""]
        if w:
            out += [f"Write-up: [{w.name}](experiments/{w.name})", ""]
        for pic in pics:
            named = (_command_for(pic, texts[x], None, named_only=True) for x in writeups)
            cmd = next((c for c in named if c), None) or _command_for(pic, texts.get(w, "") if w else "", w)
            if cmd is None:
                log.warning(f"gallery: experiments/{pic.name}: no write-up names the command that made it")
                cmd = "(not recorded)"
            out += [f"### {pic.name}", "", f"Made by: `{cmd}`", ""]
            if pic.suffix == ".html":
                out += [f"[Open the report](experiments/{pic.name})", ""]
            else:  # a thumbnail; the picture at full size is one click away
                out += [f"[![{pic.stem}](experiments/{pic.name}){{ .thumb loading=lazy }}](experiments/{pic.name})", ""]
    return "\n".join(out)


def _title(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return "experiment"


def _command_for(pic: Path, text: str, writeup: Path | None, *, named_only: bool = False) -> str | None:
    """The command that made a picture: a ``quicsm``/``python3`` code span that names it (or a
    ``{a,b}`` pattern that covers it), else one in the paragraph that names it, else the write-up's own
    script ("Generated ... by `experiments/X.py`", or ``experiments/X.py`` beside it)."""
    paragraphs = [p.replace("\n", " ") for p in re.split(r"\n\s*\n", text)]
    commands = [
        (para, span)
        for para in paragraphs
        for span in _CODE.findall(para)
        if re.match(r"(sudo )?(quicsm|python3?) \S+ \S", span)
    ]
    for _, span in commands:
        if pic.name in span or _pattern_names(f"`{span}`", pic.name):
            return span
    if named_only:
        return None
    for para, span in commands:
        if pic.name in para:
            return span
    if writeup is not None:
        m = re.search(r"by `((?:sudo )?(?:python3 )?experiments/[\w.-]+\.py[^`]*)`", text)
        if m:
            return m.group(1) if m.group(1).startswith(("python3", "sudo")) else f"python3 {m.group(1)}"
        script = writeup.with_suffix(".py")
        if script.is_file():
            return f"python3 experiments/{script.name}"
    return None


def _pattern_names(para: str, name: str) -> bool:
    for span in _CODE.findall(para.replace("\n", " ")):
        for tok in span.split():
            if "{" in tok and tok.endswith(Path(name).suffix):
                m = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", tok)
                if m and any(f"{m[1]}{alt}{m[3]}".endswith(name) for alt in [*m[2].split(","), ".*"]):
                    return True
                if m and re.fullmatch(re.escape(m[1]) + r"\w+" + re.escape(m[3]), name):
                    return True
    return False


# ---- tutorials' outputs --------------------------------------------------------------------------------


def _run_tutorials(files: Files, config: Any) -> None:
    """Run each tutorial's blocks (those needing root: their bundled runs instead; S3: a local server) and
    publish the files the page shows or links."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="quicsm-docs-"))
    try:
        for page in sorted((DOCS / "tutorials").glob("*.md")):
            shell = [b for b in _blocks.blocks(page) if b.lang in _blocks.SHELLS and b.run]
            if not shell:
                continue
            work = _blocks.workdir(base / page.stem)
            needs = set().union(*(b.needs for b in shell))
            started = time.monotonic()
            with _blocks.services(needs) as extra:
                _run_page(page, shell, work, _blocks.environment(work, extra))
            log.info(f"tutorials/{page.name}: blocks ran in {time.monotonic() - started:.1f} s")
            shown = set(re.findall(rf"\]\({re.escape(page.stem)}/([^)#\s]+)", page.read_text(encoding="utf-8")))
            for rel in sorted(shown):  # what the page shows or links, not every file the blocks wrote
                path = work / rel
                if not path.is_file():
                    continue  # the strict build reports the link to a missing file
                keep = base / "_published" / page.stem / rel
                keep.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, keep)
                _publish(files, config, f"tutorials/{page.stem}/{rel}", keep)
    finally:
        _CLEANUP.append(base)


def _run_page(page: Path, shell: list[_blocks.Block], work: Path, env: dict[str, str]) -> None:
    for b in shell:
        if b.root:  # the slow lane runs these; the blocks after it read the runs bundled for it
            _blocks.stand_in(b, work)
            continue
        ran = _blocks.run(b, work, env)
        _OUTPUTS[(page.name, b.line)] = _scrub(ran.output, work)
        if ran.returncode != 0:
            tail = "\n".join(ran.output.splitlines()[-15:])
            log.warning(f"{b.where}: the block failed (exit {ran.returncode}):\n{tail}")
            return
        for path in ran.written:
            why = _blocks.check_output(path)
            if why:
                log.warning(f"{b.where}: {why}")


_CLEANUP: list[Path] = []
_OUTPUTS: dict[tuple[str, int], str] = {}
"""(tutorial file name, line of the block) -> what the block printed, for ``<!-- output -->``."""
_OUTPUT_MARK = re.compile(r"^<!--\s*output(?::\s*(\d+))?\s*-->\s*$")


def _scrub(text: str, work: Path) -> str:
    """A block's output as a reader's terminal shows it: paths relative to the checkout."""
    return text.replace(str(work) + "/", "").replace(str(work), ".").replace(str(ROOT) + "/", "")


def _insert_outputs(markdown: str, page_name: str) -> str:
    """Replace each ``<!-- output -->`` (``<!-- output: N -->``: first N lines) with what the shell block
    above it printed when the build ran it."""
    lines = markdown.splitlines()
    starts = [b.line for b in _blocks.blocks_of_text(markdown)]
    out: list[str] = []
    for i, line in enumerate(lines):
        m = _OUTPUT_MARK.match(line)
        if not m:
            out.append(line)
            continue
        above = [n for n in starts if n <= i]
        text = _OUTPUTS.get((page_name, above[-1])) if above else None
        if text is None:
            log.warning(f"tutorials/{page_name}:{i + 1}: <!-- output --> but no block above it ran")
            continue
        shown = text.rstrip("\n").splitlines()
        limit = int(m.group(1)) if m.group(1) else 60
        if len(shown) > limit:
            shown = [*shown[:limit], f"... ({len(shown) - limit} more lines)"]
        out += ["```text", *shown, "```"]
    return "\n".join(out)


def _publish(files: Files, config: Any, uri: str, src: Path) -> None:
    """Put a file of the checkout into the site at ``uri`` (once)."""
    if files.get_file_from_path(uri) is None:
        files.append(File.generated(config, uri, abs_src_path=str(src)))


# ---- hooks ---------------------------------------------------------------------------------------------


def on_files(files: Files, config: Any) -> Files:
    for uri, make in (
        ("reference/cli.md", _cli_page),
        ("reference/api.md", _api_page),
        ("reference/schemas.md", _schemas_page),
        ("reference/patch-sets.md", _catalogue_page),
        ("reference/stacks.md", _stacks_page),
    ):
        files.append(File.generated(config, uri, content=make()))
    for schema in sorted((ROOT / "quicsm" / "schemas").glob("*.json")):
        _publish(files, config, f"reference/schemas/{schema.name}", schema)
    files.append(File.generated(config, "gallery.md", content=_gallery(files, config)))
    if os.environ.get("QUICSM_DOCS_RUN", "1") != "0":
        _run_tutorials(files, config)
    return files


_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Links that leave docs/: to the published copy (experiments/), else the repository path they name,
    as code (the site does not carry it); a link to a path that does not exist is a warning, which fails
    the strict build."""
    if page.file.src_uri == "reference/api.md" or not page.file.abs_src_path:
        return markdown
    if page.file.src_uri.startswith("tutorials/"):
        markdown = _insert_outputs(markdown, Path(page.file.src_uri).name)
    src = Path(page.file.abs_src_path)
    here = PurePosixPath(page.file.src_uri).parent

    def fix(m: re.Match[str]) -> str:
        bang, text, target = m.group(1), m.group(2), m.group(3)
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            return m.group(0)
        path, _, anchor = target.partition("#")
        repo_path = (src.parent / path).resolve()
        try:
            rel = repo_path.relative_to(ROOT).as_posix()
        except ValueError:
            log.warning(f"{page.file.src_uri}: link to {target} leaves the checkout")
            return m.group(0)
        uri = rel[len("docs/") :] if rel.startswith("docs/") else rel  # where the site has it, if it does
        if rel.startswith("docs/") and os.path.normpath(os.path.join(str(here), path)) == uri:
            return m.group(0)  # an ordinary link inside docs/: mkdocs checks it, anchors too
        if files.get_file_from_path(uri) is not None:
            up = os.path.relpath(uri, str(here))
            return f"{bang}[{text}]({up}{'#' + anchor if anchor else ''})"
        if repo_path.exists() and not bang:
            return f"`{rel}`" if text.strip("`") in (rel, path, repo_path.name) else f"{text} (`{rel}`)"
        log.warning(f"{page.file.src_uri}: link to {target}, which does not exist")
        return m.group(0)

    return _LINK.sub(fix, markdown)


def on_page_content(html_text: str, page: Any, config: Any, files: Files) -> str:
    if page.file.src_uri == "reference/api.md":
        html_text = re.sub(r":(?:func|class|mod|meth|data|attr|exc|obj|const|ref):(<code>)~?", r"\1", html_text)
    return html_text


def on_post_build(config: Any) -> None:
    import shutil

    for base in _CLEANUP:
        shutil.rmtree(base, ignore_errors=True)
    _CLEANUP.clear()
