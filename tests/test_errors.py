"""One error map (errors.as_quicsm_error) and one wording per condition, whichever layer meets it."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from quicsm.errors import InputError, OptionError, as_quicsm_error, reading, truncated

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "exc,text",
    [
        (EOFError("Compressed file ended before the end-of-stream marker was reached"), "truncated or corrupt gzip"),
        (gzip.BadGzipFile("CRC check failed"), "truncated or corrupt gzip data (CRC check failed)"),
        (zlib.error("invalid stored block lengths"), "truncated or corrupt gzip data (invalid stored"),
        (FileNotFoundError(2, "No such file or directory"), "no such file"),
        (IsADirectoryError(21, "Is a directory"), "is a directory"),
        (PermissionError(13, "Permission denied"), "cannot read (Permission denied)"),
    ],
)
def test_each_condition_has_one_wording_naming_the_input(exc: BaseException, text: str) -> None:
    err = as_quicsm_error(exc, "runs/a.log.gz")
    assert isinstance(err, InputError) and not err.unexpected
    assert str(err).startswith(f"runs/a.log.gz: {text}")


def test_a_readers_unforeseen_failure_is_one_line_marked_unexpected() -> None:
    err = as_quicsm_error(KeyError("events"), "x.qlog")
    assert isinstance(err, InputError) and err.unexpected
    assert str(err) == "x.qlog: cannot read (KeyError: 'events')"
    assert as_quicsm_error(RuntimeError("bug"), "x.qlog") is None


def test_the_cli_maps_gzip_but_keeps_a_bug_or_a_write_failure_as_it_is() -> None:
    assert str(as_quicsm_error(EOFError("cut"), readers=False)) == truncated("cut")
    assert as_quicsm_error(ValueError("bug"), readers=False) is None
    assert as_quicsm_error(BrokenPipeError(32, "Broken pipe"), readers=False) is None
    err = OptionError("unknown engine 'foo'")
    assert as_quicsm_error(err, readers=False) is err


def test_reading_translates_inside_the_block_only() -> None:
    with pytest.raises(InputError, match=r"^a\.gz: truncated or corrupt gzip data \(cut\)$"):
        with reading("a.gz"):
            raise EOFError("cut")
    with pytest.raises(RuntimeError):
        with reading("a.gz"):
            raise RuntimeError("a bug stays a bug")


def test_no_module_words_a_cut_gzip_its_own_way() -> None:
    """The gzip condition is worded by errors.truncated only (it had six spellings)."""
    own = re.compile(r"(corrupt|truncated) or (cut|truncated|corrupt)")
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in (ROOT / "quicsm").rglob("*.py")
        if p.name != "errors.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if ('"' in line or "'" in line) and own.search(line) and not line.lstrip().startswith("#")
    ]
    allowed = {  # moving to errors.truncated / errors.reading with their owners' work (qlog, hardening)
        "quicsm/traces/qlog.py",
        "quicsm/check/bundle.py",
    }
    assert [f for f in found if f.split(":")[0] not in allowed] == []


def test_a_cut_gzip_input_is_one_line_at_the_cli(tmp_path: Path) -> None:
    log = tmp_path / "server.log.gz"
    data = gzip.compress(b"QUICSM v=1 conn=1 t_us=1 cc=reno from=Init to=SlowStart\n" * 2000)
    log.write_bytes(data[: len(data) // 2])
    out = subprocess.run(
        [sys.executable, "-m", "quicsm", "infer", str(log), "--strict", "-o", str(tmp_path / "m.json")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "truncated or corrupt gzip data" in out.stderr and str(log) in out.stderr


def _quicsm(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "quicsm", *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize(
    "args",
    [
        ("infer", "traces/fig13/desktop", "--engine", "foo"),
        ("diagram", "traces/fig13/desktop", "--engine", "foo", "-o", "x.svg"),
        ("compare", "traces/fig13/desktop", "traces/fig13/mobile", "--engine", "foo"),
        ("baseline", "save", "traces/fig13/desktop", "--engine", "foo", "-o", "x.qsb"),
        ("infer", "traces/fig13/desktop", "--engine", "dfg", "-k", "2"),  # refused by the engine (library)
        ("compare", "traces/fig13/desktop", "traces/fig13/mobile", "--nope"),
    ],
)
def test_an_unknown_engine_or_option_exits_2_on_every_verb(args: tuple[str, ...], tmp_path: Path) -> None:
    out = _quicsm(*[str(ROOT / a) if a.startswith("traces/") else str(tmp_path / a) if "." in a else a for a in args])
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and not list(tmp_path.iterdir())


def test_the_library_refuses_an_unknown_engine_before_any_work() -> None:
    from quicsm.compare.comparison import CompareOptions, compare

    with pytest.raises(OptionError, match="unknown engine 'foo'; choose one of dfg, ktails"):
        compare([], CompareOptions(engine="foo"))


def test_run_metadata_is_worded_as_every_input(tmp_path: Path) -> None:
    """``meta.json`` is opened through errors.reading and decoded through formats.checked: no wording of its own."""
    from quicsm.traces.runmeta import read_meta

    with pytest.raises(InputError, match=f"^{re.escape(str(tmp_path))}/meta.json: no such file$"):
        read_meta(str(tmp_path / "meta.json"))
    with pytest.raises(InputError, match=f"^{re.escape(str(tmp_path))}: is a directory$"):
        read_meta(str(tmp_path))
    (tmp_path / "meta.json").write_text('{"cc": 5}')
    with pytest.raises(InputError) as err:
        read_meta(str(tmp_path / "meta.json"))
    assert str(err.value) == f"{tmp_path}/meta.json: run metadata: cc: expected `str | null`, got `int`"
