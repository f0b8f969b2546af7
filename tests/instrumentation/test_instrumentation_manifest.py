"""Patch-set loading: every manifest problem is an error naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from instr_fixtures import cubic_edits, make_set, write_tree

from quicsm.errors import PatchError
from quicsm.instrumentation.diff import parse_diff, render_file_patch
from quicsm.instrumentation.patchset import find_patch_set, load_patch_set


@pytest.fixture
def good(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    paths = write_tree(root, "E")
    return make_set(tmp_path / "sets", root, cubic_edits(paths))


def _edit(d: Path, fn) -> None:
    m = json.loads((d / "manifest.json").read_text())
    fn(m)
    (d / "manifest.json").write_text(json.dumps(m))


def test_good_set_loads(good: Path) -> None:
    ps = load_patch_set(good)
    assert ps.name == "test-cubic" and ps.algorithm == "cubic" and len(ps.files) == 2
    assert ps.added_lines == 3
    assert find_patch_set(str(good)).name == ps.name


@pytest.mark.parametrize(
    "mutate,field",
    [
        (lambda m: m.pop("runtime"), "runtime: required key missing"),
        (lambda m: m.update(algorithm="vegas"), ": algorithm: invalid enum value 'vegas'"),
        (lambda m: m["files"][0].update(sha256="xyz"), ": files\\[0\\].sha256: expected `str` matching"),
        (lambda m: m["upstream"].update(commit="abc"), ": upstream.commit: expected `str` matching"),
        (lambda m: m["upstream"].update(date="22/11/2026"), ": upstream.date: expected `str` matching"),
        (lambda m: m.update(states=[]), ": states: expected `array` of length >= 1"),
        (lambda m: m.update(name="other-name") or m, None),
        (lambda m: m["files"].pop(), "does not match changes.diff.*not listed"),
        (lambda m: m["files"].append({"path": "quiche/x.cc", "sha256": "c" * 64}), "listed but not in the diff"),
        (lambda m: m["files"][0].update(path="../x.cc"), "leaves the source root"),
    ],
)
def test_bad_manifest_names_file_and_field(good: Path, mutate, field) -> None:
    _edit(good, mutate)
    if field is None:  # a user directory may be named differently from the set
        assert load_patch_set(good).name == "other-name"
        return
    with pytest.raises(PatchError, match=f"manifest.json.*{field}"):
        load_patch_set(good)


def test_invalid_json_names_line(good: Path) -> None:
    (good / "manifest.json").write_text('{\n "name": "x",\n oops\n}')
    with pytest.raises(PatchError, match=r"manifest.json:3: not valid JSON"):
        load_patch_set(good)


def test_missing_diff_is_named(good: Path) -> None:
    (good / "changes.diff").unlink()
    with pytest.raises(PatchError, match="changes.diff: missing"):
        load_patch_set(good)


def test_truncated_hunk_names_diff_line(good: Path) -> None:
    text = (good / "changes.diff").read_text()
    (good / "changes.diff").write_text(text.replace("@@ -", "@@ -1,40 +1,41 @@ x\n@@ -", 1))
    with pytest.raises(PatchError, match=r"changes.diff:\d+: "):
        load_patch_set(good)


def test_unknown_set_name_suggests(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match="no patch set named"):
        find_patch_set("definitely-not-a-set")


def test_diff_round_trip_keeps_no_newline_markers() -> None:
    text = (
        "diff --git a/x.cc b/x.cc\n--- a/x.cc\n+++ b/x.cc\n@@ -1,2 +1,3 @@ void F()\n a\n-b\n"
        "\\ No newline at end of file\n+b\n+c\n\\ No newline at end of file\n"
    )
    fps = parse_diff(text)
    assert fps[0].no_newline_old and fps[0].no_newline_new
    assert "".join(render_file_patch(fp) for fp in fps) == text
    assert fps[0].hunks[0].section == "void F()"
