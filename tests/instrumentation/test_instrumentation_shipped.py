"""Every patch set shipped in quicsm/patches loads, validates, and fits its target."""

from __future__ import annotations

import pytest

from quicsm.instrumentation.patchset import load_shipped, shipped_set_dirs
from quicsm.instrumentation.targets import get_target
from quicsm.traces.states import canonical_state

DIRS = shipped_set_dirs()
IDS = [f"{t}/{n}" for t, n, _ in DIRS]


def test_shipped_set_names_are_unique():
    if not DIRS:
        pytest.skip("no patch sets shipped yet")
    names = [n for _, n, _ in DIRS]
    assert len(names) == len(set(names)), "patch set names must be unique across targets"


@pytest.mark.parametrize("target,name,sdir", DIRS, ids=IDS)
def test_shipped_set_is_valid_and_fits_its_target(target, name, sdir):
    ps = load_shipped(target, name, sdir)  # raises PatchError naming file and field
    tgt = get_target(ps.target)  # a module in quicsm/instrumentation/targets/ must exist
    if tgt.eras:
        assert ps.era in tgt.eras, f"{ps.origin}: era {ps.era!r} not one of {tgt.eras}"
    assert ps.added_lines > 0
    known = tgt.known_names()
    assert any(f.basename in known for f in ps.files), f"{ps.origin}: no sender file of target {ps.target}"
    for fp in ps.file_patches:
        assert not tgt.dirs or any(fp.path.startswith(d + "/") for d in tgt.dirs), (
            f"{ps.origin}: {fp.path} is not under any of {tgt.dirs}"
        )
    for s in ps.states:
        assert canonical_state(s) == s, f"{ps.origin}: state {s!r} is not canonical ({canonical_state(s)!r})"
