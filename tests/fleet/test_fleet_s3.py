"""``s3://`` inputs against a real S3 endpoint (moto's server on 127.0.0.1), read by s3fs as in production."""

from __future__ import annotations

import gzip
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fleet_fixtures import make_fleet_dir

from quicsm.cli.main import cli

fleet_dir = pytest.fixture(name="fleet_dir")(make_fleet_dir)

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SERVERS: dict[str, object] = {}
"""The moto server behind each endpoint URL (a test stops it to lose the store)."""


@pytest.fixture
def s3_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    url = f"http://127.0.0.1:{port}"
    SERVERS[url] = server
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": url,
        "FSSPEC_S3_ENDPOINT_URL": url,
    }.items():
        monkeypatch.setenv(key, value)
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # a cached filesystem would still point at an earlier port
    try:
        yield url
    finally:
        server.stop()
        s3fs.S3FileSystem.clear_instance_cache()


def _upload(url: str, fleet_dir: Path) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=url)
    s3.create_bucket(Bucket="logs")
    for p in sorted(fleet_dir.iterdir()):
        s3.put_object(Bucket="logs", Key=f"fleet/{p.name}", Body=p.read_bytes())


def _model(path: Path) -> dict:
    d = json.loads(path.read_text())
    d["meta"].pop("inference_seconds")
    return d


def test_s3_glob_equals_local_directory(s3_endpoint: str, fleet_dir: Path, tmp_path: Path) -> None:
    _upload(s3_endpoint, fleet_dir)
    local, remote = tmp_path / "local.json", tmp_path / "s3.json"
    res = CliRunner().invoke(cli, ["infer", str(fleet_dir), "-o", str(local), "-q"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["infer", "s3://logs/fleet/server*", "-o", str(remote)])
    assert res.exit_code == 0, res.output
    assert "read 6 file(s)" in res.output
    a, b = _model(local), _model(remote)
    assert a["traces"] == b["traces"] == 240
    assert a == b


def test_s3_missing_and_corrupt_objects(s3_endpoint: str, fleet_dir: Path, tmp_path: Path) -> None:
    _upload(s3_endpoint, fleet_dir)
    res = CliRunner().invoke(cli, ["infer", "s3://logs/fleet/nope.log", "-o", str(tmp_path / "m.json")])
    assert res.exit_code != 0 and "s3://logs/fleet/nope.log" in res.output and "Traceback" not in res.output
    import boto3

    body = gzip.compress(b"QUICSM v=1 conn=0x1 t_us=1 cc=cubic to=SlowStart\n" * 3000)[:400]
    boto3.client("s3", endpoint_url=s3_endpoint).put_object(Bucket="logs", Key="fleet/cut.log.gz", Body=body)
    out = tmp_path / "strict.json"
    res = CliRunner().invoke(cli, ["infer", "s3://logs/fleet/*.log.gz", "--strict", "-o", str(out)])
    assert res.exit_code != 0 and "s3://logs/fleet/cut.log.gz:" in res.output and not out.exists()


def test_s3_parse_to_a_store_locally_and_on_dask(s3_endpoint: str, fleet_dir: Path, tmp_path: Path) -> None:
    """``parse s3://...``: the objects are streamed into a store, in this process and on Dask workers
    alike, and into JSON Lines, with the traces a local directory gives (ids scoped by file name)."""
    from quicsm.traces.store import read_traces

    _upload(s3_endpoint, fleet_dir)
    want = tmp_path / "local.parquet"
    res = CliRunner().invoke(cli, ["parse", str(fleet_dir), "-o", str(want), "-q"])
    assert res.exit_code == 0, res.output

    def rows(path: Path) -> list[tuple[object, ...]]:
        return [(t.id, t.cc, tuple(t.events)) for t in read_traces(str(path))]

    expected = rows(want)
    assert len(expected) == 240
    for extra in ([], ["--dask", "local:2"]):
        got = tmp_path / f"s3{len(extra)}.parquet"
        res = CliRunner().invoke(cli, ["parse", "s3://logs/fleet/server*", "-o", str(got), "-q", *extra])
        assert res.exit_code == 0, res.output
        assert rows(got) == expected
        assert {s for t in read_traces(str(got)) for s in t.sources} <= {
            f"s3://logs/fleet/{p.name}" for p in fleet_dir.iterdir()
        }
    jsonl = tmp_path / "s3.jsonl"  # the object path, also without Dask
    res = CliRunner().invoke(cli, ["parse", "s3://logs/fleet/server*", "-o", str(jsonl), "-q"])
    assert res.exit_code == 0, res.output
    assert rows(jsonl) == expected


def test_s3_compare_without_dask_equals_local_sets(s3_endpoint: str, fleet_dir: Path, tmp_path: Path) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="logs")
    files = sorted(p for p in fleet_dir.iterdir() if p.is_file())
    halves = {"a": files[: len(files) // 2], "b": files[len(files) // 2 :]}
    for name, part in halves.items():
        (tmp_path / name).mkdir()
        for p in part:
            (tmp_path / name / p.name).write_bytes(p.read_bytes())
            s3.put_object(Bucket="logs", Key=f"{name}/{p.name}", Body=p.read_bytes())
    local, remote = tmp_path / "local.json", tmp_path / "s3.json"
    names = ["--name", "a", "--name", "b"]
    res = CliRunner().invoke(
        cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), *names, "--format", "json", "-o", str(local)]
    )
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        cli, ["compare", "s3://logs/a/*", "s3://logs/b/*", *names, "--format", "json", "-o", str(remote)]
    )
    assert res.exit_code == 0, res.output

    def report(path: Path) -> dict:
        d = json.loads(path.read_text())
        for s in d["sets"]:  # where the files were, and so the traces' ids' scopes
            s.pop("origin")
            s.pop("sources")
        return d

    assert report(local)["sets"][0]["connections"] > 0 and report(local) == report(remote)


def _listed(endpoint: str, fleet_dir: Path, monkeypatch: pytest.MonkeyPatch, n: int, folders: int, page: int) -> None:
    """``n`` objects in ``folders`` folders, listed by a URL glob with the endpoint given only as a
    storage option (not in the environment), the server paging its listing ``page`` keys at a time."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    from quicsm.traces.inputs import expand_inputs

    _upload(endpoint, fleet_dir)
    # written into the server's own store (it runs in this process: 10,000 PUTs over HTTP take minutes;
    # the store outlives one test's server, so each size has a prefix of its own); the listing goes
    # through the S3 API, whose answers moto builds at a few ms a key
    store = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    line = (fleet_dir / "server0.log").read_bytes().splitlines(keepends=True)[0]
    for i in range(n):
        store.put_object("logs", f"many{n}/h{i % folders:02d}/c{i:05d}.log", line)
    for key in ("AWS_ENDPOINT_URL", "FSSPEC_S3_ENDPOINT_URL"):
        monkeypatch.delenv(key)
    monkeypatch.setenv("MOTO_S3_DEFAULT_MAX_KEYS", str(page))  # s3fs asks for no page size: the server's
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    listed = expand_inputs([f"s3://logs/many{n}/*/*.log"], {"endpoint_url": endpoint})
    assert len(listed) == n and listed[0] == f"s3://logs/many{n}/h00/c00000.log" and listed == sorted(listed)
    assert len(set(listed)) == n


def test_storage_option_sets_the_endpoint_and_a_paged_listing_is_followed(
    s3_endpoint: str, fleet_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 objects in two folders, five pages of 100 keys each: every page is followed; the endpoint
    given as --storage-option reaches the reader too."""
    _listed(s3_endpoint, fleet_dir, monkeypatch, 1000, 2, 100)
    out = tmp_path / "s3.json"
    opt = ["--storage-option", f"endpoint_url={s3_endpoint}"]
    res = CliRunner().invoke(cli, ["infer", "s3://logs/fleet/server*", "-o", str(out), *opt])
    assert res.exit_code == 0, res.output
    assert "read 6 file(s)" in res.output and json.loads(out.read_text())["traces"] == 240


@pytest.mark.slow
def test_10000_objects_are_listed(s3_endpoint: str, fleet_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 18's scale: 10,000 objects in ten folders, pages of 500 keys (slow: moto renders each key
    of a listing in a few ms, so this listing alone is tens of seconds on a quiet machine)."""
    _listed(s3_endpoint, fleet_dir, monkeypatch, 10_000, 10, 500)


# ---- a store lost or damaged (issue 36 item 16): one line, and what a local read keeps ---------------


def _put(url: str, key: str, body: bytes) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=url)
    if "logs" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket="logs")
    s3.put_object(Bucket="logs", Key=key, Body=body)


def test_a_truncated_gzip_object_gives_what_the_local_file_gives(
    s3_endpoint: str, fleet_dir: Path, tmp_path: Path
) -> None:
    whole = gzip.compress((fleet_dir / "server0.log").read_bytes())
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    _put(s3_endpoint, "t/cut.log.gz", cut.read_bytes())
    local, remote = tmp_path / "local.jsonl", tmp_path / "s3.jsonl"
    for src, out in ((str(cut), local), ("s3://logs/t/cut.log.gz", remote)):
        res = CliRunner().invoke(cli, ["parse", src, "-o", str(out)])
        assert res.exit_code == 0 and "truncated or corrupt" in res.output, res.output
    rows = [json.loads(line) for line in local.read_text().splitlines()]
    assert len(rows) > 0
    assert [r["events"] for r in rows] == [json.loads(line)["events"] for line in remote.read_text().splitlines()]


def test_a_store_down_while_listing_is_one_line(s3_endpoint: str, fleet_dir: Path) -> None:
    _upload(s3_endpoint, fleet_dir)
    SERVERS[s3_endpoint].stop()  # type: ignore[attr-defined]
    res = CliRunner().invoke(cli, ["parse", "s3://logs/fleet/server*", "-o", "/dev/null"])
    assert res.exit_code == 1 and len(res.output.splitlines()) == 1, res.output
    assert res.output.startswith("Error: s3://logs/fleet/server*: cannot list (Could not connect")


def test_a_store_down_when_an_object_is_opened_is_one_line(s3_endpoint: str, fleet_dir: Path) -> None:
    """Opening is said as reading is (errors.reading): botocore's exception is not an OSError."""
    _upload(s3_endpoint, fleet_dir)
    name = sorted(p.name for p in fleet_dir.iterdir())[0]
    SERVERS[s3_endpoint].stop()  # type: ignore[attr-defined]
    res = CliRunner().invoke(cli, ["parse", f"s3://logs/fleet/{name}", "-o", "/dev/null"])
    assert res.exit_code == 1 and len(res.output.splitlines()) == 1, res.output
    assert res.output.startswith(f"Error: s3://logs/fleet/{name}: cannot read (Could not connect to the endpoint")


def test_a_store_lost_mid_read_is_one_line(s3_endpoint: str, fleet_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store goes once an object is open: s3fs's range request fails with botocore's own exception
    (what a real lost endpoint raised: a 180-line traceback before)."""
    import s3fs
    from botocore.exceptions import EndpointConnectionError

    for i in range(3):
        _put(s3_endpoint, f"big/s{i}.log", (fleet_dir / "server0.log").read_bytes())
    fetched: list[str] = []
    fetch = s3fs.core.S3File._fetch_range

    def lost_once_open(self, start: int, end: int) -> bytes:
        fetched.append(self.path)
        if self.path.endswith("s1.log"):
            raise EndpointConnectionError(endpoint_url=f"{s3_endpoint}/logs/big/s1.log")
        return fetch(self, start, end)

    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", lost_once_open)
    res = CliRunner().invoke(cli, ["parse", "s3://logs/big/*", "-o", "/dev/null", "-q"])
    assert res.exit_code == 1 and len(res.output.splitlines()) == 1, (res.output, fetched)
    assert res.output.startswith("Error: s3://logs/big/s1.log: cannot read (Could not connect to the endpoint URL")
