"""The library API: what ``quicsm`` exports stays what it says after every submodule is imported, and
every documented example runs, from any working directory (as httpx's test_exported_members)."""

from __future__ import annotations

import doctest
import importlib
import inspect
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import quicsm

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "traces"
QUIC_GO_VERSION = "v0.65.0"


def _import_everything() -> list[str]:
    """Every module of the package, imported (as a long-running program may have them)."""
    names = []
    for info in pkgutil.walk_packages(quicsm.__path__, "quicsm."):
        if info.name.endswith(".__main__"):  # runs the CLI
            continue
        importlib.import_module(info.name)
        names.append(info.name)
    return names


def test_exported_members_survive_every_submodule_import() -> None:
    imported = _import_everything()
    assert {"quicsm.compare.html", "quicsm.check.gate", "quicsm.cli.main"} <= set(imported)
    for name, target in quicsm._EXPORTS.items():
        module, _, attr = target.partition(":")
        value = getattr(quicsm, name)
        assert value is getattr(importlib.import_module(module), attr), name
        assert inspect.isfunction(value) or inspect.isclass(value), f"quicsm.{name} is {type(value).__name__}"
        assert not set(quicsm.SUBMODULES) & {name}, f"quicsm.{name} is also a submodule's name"
    for sub in quicsm.SUBMODULES:
        assert inspect.ismodule(getattr(quicsm, sub)), sub
    assert set(quicsm.SUBMODULES) == {
        n.name for n in pkgutil.iter_modules(quicsm.__path__) if not n.name.startswith("_")
    }, "a new top-level module or package goes into quicsm.SUBMODULES"


def test_all_and_dir_name_every_export() -> None:
    assert quicsm.__all__ == ["__version__", *quicsm._EXPORTS]
    assert set(quicsm.__all__) | set(quicsm.SUBMODULES) <= set(dir(quicsm))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        quicsm.nope  # noqa: B018


def test_a_submodule_comes_on_first_use_in_a_fresh_process() -> None:
    probe = (
        "import quicsm, inspect; m = quicsm.compare; import quicsm.compare.html; "
        "print(inspect.ismodule(m), callable(quicsm.compare_sets), quicsm.check_patch.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), check=True)
    assert out.stdout.split() == ["True", "True", "quicsm.instrumentation.engine"]


def test_import_stays_light() -> None:
    probe = "import sys, quicsm; print(sorted(m for m in ('numpy', 'pyarrow', 'scipy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), check=True)
    assert out.stdout.strip() == "[]"


def test_package_is_typed() -> None:
    assert (ROOT / "quicsm" / "py.typed").exists()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# -- every documented example ------------------------------------------------------------------------


def _quic_go(tmp: Path) -> Path:
    """A writable quic-go checkout (the module from the Go module cache) for the patch engine's examples."""
    src = Path.home() / f"go/pkg/mod/github.com/quic-go/quic-go@{QUIC_GO_VERSION}"
    if not src.is_dir():
        pytest.fail(f"quic-go@{QUIC_GO_VERSION} is not in the Go module cache (scripts/install.sh puts it there)")
    dst = tmp / f"quic-go@{QUIC_GO_VERSION}"
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    return dst


def _documented() -> list[tuple[str, object]]:
    """The objects whose docstrings are the API reference: the package, and every export."""
    out: list[tuple[str, object]] = [("quicsm", quicsm)]
    for name, target in quicsm._EXPORTS.items():
        module, _, attr = target.partition(":")
        out.append((name, getattr(importlib.import_module(module), attr)))
    return out


@pytest.mark.parametrize("name,obj", _documented(), ids=[n for n, _ in _documented()])
def test_docstring_example_runs_from_any_directory(
    name: str, obj: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # not the repository: examples name their files through TRACES
    doc = inspect.getdoc(obj) or ""
    assert re.search(r"^Examples\n-+\n", doc, re.M), f"{name}: no numpydoc Examples section"
    if name != "quicsm" and (inspect.isfunction(obj)):
        assert re.search(r"^(Returns|Yields)\n-+\n", doc, re.M), f"{name}: no Returns section"
        if inspect.signature(obj).parameters:
            assert re.search(r"^Parameters\n-+\n", doc, re.M), f"{name}: no Parameters section"
    globs = {"TRACES": TRACES}
    if "QUIC_GO" in doc:
        globs["QUIC_GO"] = _quic_go(tmp_path)
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(obj, name, globs=globs)
    assert sum(len(t.examples) for t in tests) > 0, f"{name}: no example"
    for t in tests:
        runner.run(t)
    assert runner.failures == 0, f"{name}: {runner.failures} failing example(s) (output above)"


def _snippets() -> list[tuple[str, str]]:
    """The ``python`` blocks of the docs that use the library (README and docs/*.md)."""
    out = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for i, m in enumerate(re.finditer(r"```python\n(.*?)```", md.read_text(), re.S)):
            if "import quicsm" in m.group(1):
                out.append((f"{md.relative_to(ROOT)}#{i + 1}", m.group(1)))
    return out


@pytest.mark.parametrize("where,code", _snippets(), ids=[w for w, _ in _snippets()])
def test_documented_snippet_runs(where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each snippet runs as written, in a folder holding the bundled traces (``traces/``) and nothing else."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "traces").symlink_to(TRACES)
    exec(compile(code, where, "exec"), {"__name__": "__snippet__"})


def test_there_are_documented_snippets() -> None:
    assert any(w.startswith("docs/architecture.md") for w, _ in _snippets())
