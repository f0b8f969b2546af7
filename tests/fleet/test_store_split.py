"""``parse -o x.parquet`` writes the same bytes whoever reads the files: one process, ``local:2``,
``local:3`` (its row groups end where :func:`quicsm.traces.parse.joined` batches end, a function of the
files alone), on the kinds of input users give it: real testbed and foreign-stack qlogs and text logs."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli
from quicsm.traces import parse
from quicsm.traces.inputs import FileBatch
from quicsm.traces.store import read_traces

ROOT = Path(__file__).resolve().parents[2]


def _inputs(tmp_path: Path) -> tuple[Path, int]:
    """20 files or more in 3 host folders: every bundled qlog of tests/data (plain and gzipped, as found; the
    quic-go v0.65 one also unpacked) and the Fig. 13 text logs."""
    qlogs = sorted(p for p in (ROOT / "tests" / "data").rglob("*.*qlog.gz"))
    logs = sorted((ROOT / "traces" / "fig13" / "desktop").rglob("server.log.gz"))
    assert len(qlogs) >= 8 and len(logs) >= 8
    files = [*qlogs, *logs]
    for i, src in enumerate(files):
        host = tmp_path / "in" / f"host{i % 3}"
        host.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, host / f"{i:02d}-{src.name}")
    plain = tmp_path / "in" / "host0" / "99-server.sqlog"
    plain.write_bytes(gzip.decompress((ROOT / "tests" / "data" / "quic-go-v0.65" / "server.sqlog.gz").read_bytes()))
    return tmp_path / "in", len(files)


@pytest.mark.parametrize("floor", [1, parse.STORE_BATCH_BYTES])
def test_a_store_is_the_same_bytes_on_one_process_and_on_local_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, floor: int
) -> None:
    monkeypatch.setattr(parse, "STORE_BATCH_BYTES", floor)  # 1: every batch of file_batches its own row groups
    src, copied = _inputs(tmp_path)
    out = {}
    for dask in ("off", "local:2", "local:3"):
        out[dask] = tmp_path / f"{dask.replace(':', '')}.parquet"
        args = ["parse", str(src), "-o", str(out[dask]), "-q", "--dask", dask]
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0, res.output
    one = out["off"].read_bytes()
    assert one == out["local:2"].read_bytes() == out["local:3"].read_bytes()
    groups = pq.ParquetFile(out["off"]).metadata.num_row_groups
    # cut where the batches end (15 here), else 1.3 MB in all is one batch: its groups end only where the
    # reader changes family (qlogs, logs: 6 here)
    assert groups > 8 if floor == 1 else groups <= 8
    traces = read_traces(str(out["off"]))
    last = f"{copied - 1:02d}"
    assert len(traces) >= 20 and {t.sources[0].rsplit("/", 1)[1][:2] for t in traces} >= {"01", last, "99"}


def test_small_batches_are_joined_up_to_the_floor_and_unknown_sizes_stay_alone() -> None:
    def b(name: str, size: int) -> FileBatch:
        return FileBatch((name,), (name,), size)

    got = parse.joined([b("a", 3), b("b", 3), b("c", 3), b("d", 9), b("e", 0), b("f", 2), b("g", 9)], 8)
    assert [x.files for x in got] == [("a", "b", "c"), ("d",), ("e",), ("f", "g")]
    assert [x.bytes for x in got] == [9, 9, 0, 11] and got[0].scopes == ("a", "b", "c")


def test_parse_defaults_to_auto_workers_in_the_cli_and_the_library_and_jsonl_stays_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One default for the verb (``auto``): the CLI's ``--dask`` is the library's, for the store
    (:func:`~quicsm.traces.parse.write_store`) and for trace objects (:func:`quicsm.parse`); ``auto``
    is asked of :func:`~quicsm.traces.inputs.workers_for` for a store, and objects are read in one process."""
    import inspect

    from quicsm.cli.parse_cmd import parse as parse_cmd
    from quicsm.traces import inputs

    (option,) = [p for p in parse_cmd.params if p.name == "dask"]
    for fn in (parse.write_store, parse.parse_inputs):
        assert inspect.signature(fn).parameters["dask"].default == option.default == "auto"
    asked: list[str | None] = []
    real = inputs.workers_for
    monkeypatch.setattr(inputs, "workers_for", lambda dask, files: asked.append(dask) or real("off", files))
    src, _ = _inputs(tmp_path)
    for out in ("x.parquet", "x.jsonl"):
        res = CliRunner().invoke(cli, ["parse", str(src), "-o", str(tmp_path / out), "-q"])
        assert res.exit_code == 0, res.output
    assert asked == ["auto", None]
