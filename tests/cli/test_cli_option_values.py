"""Every verb exits 2 on an unknown option and on a value its option does not take (an unknown --engine,
--cc, --stack, --format, ...), before any work: walked from the click tree, so a new verb is checked too."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from quicsm.cli.main import cli


def _verbs(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        if isinstance(cmd, click.Group):
            yield from _verbs(cmd, (*path, name))
        else:
            yield (*path, name), cmd


VERBS = sorted(_verbs(cli), key=lambda v: v[0])
CHOICES = [
    (path, opt)
    for path, cmd in VERBS
    for p in cmd.params
    if isinstance(p, click.Option) and isinstance(p.type, click.Choice) and not p.is_flag
    for opt in p.opts[:1]
]


def test_the_walk_finds_the_verbs_and_their_choices() -> None:
    paths = {" ".join(p) for p, _ in VERBS}
    assert {"infer", "compare", "check", "baseline save", "testbed run", "testbed matrix"} <= paths
    assert {(("infer",), "--engine"), (("compare",), "--engine"), (("testbed", "run"), "--cc")} <= set(CHOICES)


@pytest.mark.parametrize("path", [p for p, _ in VERBS], ids=" ".join)
def test_an_unknown_option_exits_2(path: tuple[str, ...]) -> None:
    res = CliRunner().invoke(cli, [*path, "--no-such-option"])
    assert res.exit_code == 2, res.output
    assert "No such option" in res.output and "--no-such-option" in res.output


@pytest.mark.parametrize(("path", "opt"), CHOICES, ids=lambda x: " ".join(x) if isinstance(x, tuple) else x)
def test_a_value_the_option_does_not_take_exits_2(path: tuple[str, ...], opt: str) -> None:
    res = CliRunner().invoke(cli, [*path, opt, "no-such-value"])
    assert res.exit_code == 2, res.output
    assert f"Invalid value for '{opt}'" in res.output and "no-such-value" in res.output
