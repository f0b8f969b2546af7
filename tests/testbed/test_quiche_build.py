"""Building the quiche server: missing tools give a one-line error saying what to install; patch sets
are looked up by version and controller. (The build itself: tests/testbed/test_quiche_e2e.py, not yet.)"""

from __future__ import annotations

import pytest

from quicsm.errors import TestbedError
from quicsm.testbed import quiche_build


def test_missing_cargo_says_what_to_install(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(TestbedError, match="cargo not found: install Rust") as exc:
        quiche_build.find_cargo()
    assert "\n" not in str(exc.value)


def test_old_rust_says_what_to_install(monkeypatch, tmp_path) -> None:
    cargo = tmp_path / "cargo"
    cargo.write_text("#!/bin/sh\necho 'cargo 1.65.0'\n")
    cargo.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TestbedError, match=r"cargo is 1.65.0, quiche needs Rust >= 1.88: install rustc-web") as exc:
        quiche_build.find_cargo()
    assert "\n" not in str(exc.value)
    cargo.write_text("#!/bin/sh\necho 'cargo 1.96.0 (f2d3ce0bd 2026-03-21)'\n")
    assert quiche_build.find_cargo() == str(cargo)


def test_missing_libclang_says_what_to_install(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LIBCLANG_PATH", str(tmp_path))
    monkeypatch.setattr(quiche_build.glob, "glob", lambda pattern: [])
    with pytest.raises(TestbedError, match="apt-get install -y libclang-dev"):
        quiche_build.find_libclang()


def test_patch_set_lookup() -> None:
    assert quiche_build.quiche_patch_set("0.30.0", "bbr2").name == "cloudflare-quiche-0.30.0-bbr2"
    cubic, reno = quiche_build.quiche_patch_set("0.30.0", "cubic"), quiche_build.quiche_patch_set("0.30.0", "reno")
    assert (cubic.algorithm, reno.algorithm) == ("cubic", "reno")
    assert cubic.diff_text == reno.diff_text  # one change to src/recovery/congestion serves both
    with pytest.raises(TestbedError, match="cloudflare-quiche-0.24.0-bbr2"):
        quiche_build.quiche_patch_set("0.23.0", "bbr2")
