"""Building the quiche server: missing tools give a one-line error saying what to install; patch sets
are looked up by version and controller. (The build itself: tests/testbed/test_quiche_e2e.py, not yet.)"""

from __future__ import annotations

import os
from pathlib import Path

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
    with pytest.raises(TestbedError, match="apt-get install -y libclang-dev"):
        quiche_build.find_libclang(dirs=(str(tmp_path),), headers=())


def _headers(include: Path) -> Path:
    include.mkdir(parents=True)
    (include / "stddef.h").write_text("/* clang's resource header */\n")
    return include


def test_libclang_cpp_alone_is_not_libclang(monkeypatch, tmp_path) -> None:
    """Debian's base image ships libclang-cpp14 (libclang-cpp.so.14): bindgen cannot load it, so it must not
    count (issue 17: the check accepted it and libclang-dev was never installed)."""
    monkeypatch.delenv("LIBCLANG_PATH", raising=False)
    llvm = tmp_path / "llvm-14" / "lib"
    llvm.mkdir(parents=True)
    _headers(llvm / "clang" / "14.0.6" / "include")
    (llvm / "libclang-cpp.so.14").write_bytes(b"\x7fELF")
    (tmp_path / "libclang-cpp.so").symlink_to(llvm / "libclang-cpp.so.14")
    dirs = (str(tmp_path / "llvm-*" / "lib"), str(tmp_path))
    with pytest.raises(
        TestbedError, match=r"found only libclang-cpp.so, libclang-cpp.so.14, which bindgen cannot load"
    ):
        quiche_build.find_libclang(dirs=dirs, headers=())
    monkeypatch.setenv("LIBCLANG_PATH", str(llvm))
    with pytest.raises(TestbedError, match="apt-get install -y libclang-dev"):
        quiche_build.find_libclang(dirs=dirs, headers=())
    (llvm / "libclang-14.so.1").write_bytes(b"\x7fELF")  # what libclang1-14 installs
    assert quiche_build.find_libclang(dirs=dirs, headers=()) == str(llvm / "libclang-14.so.1")
    (llvm / "libclang-14.so.1").unlink()
    (llvm / "libclang.so.1").write_bytes(b"\x7fELF")
    monkeypatch.delenv("LIBCLANG_PATH")
    assert quiche_build.find_libclang(dirs=dirs, headers=()) == str(llvm / "libclang.so.1")


def test_libclang_without_its_resource_headers_is_refused(monkeypatch, tmp_path) -> None:
    """libclang1-N alone (no libclang-common-N-dev): bindgen loads the library but boring-sys then fails with
    "'stddef.h' file not found" (measured here, issue 17.3), so the check must want the headers too."""
    monkeypatch.delenv("LIBCLANG_PATH", raising=False)
    lib = tmp_path / "usr-lib"
    lib.mkdir()
    (lib / "libclang-99.so.99.0.1").write_bytes(b"\x7fELF")
    (lib / "libclang-99.so.1").symlink_to("libclang-99.so.99.0.1")
    (lib / "libclang-cpp.so.99").write_bytes(b"\x7fELF")
    llvm = tmp_path / "llvm-{N}" / "lib" / "clang" / "*" / "include"
    headers = (str(llvm),)
    with pytest.raises(TestbedError) as err:
        quiche_build.find_libclang(dirs=(str(lib),), headers=headers)
    msg = str(err.value)
    assert "libclang-99.so" in msg and "stddef.h" in msg and msg.endswith("apt-get install -y libclang-dev")
    assert "/usr/lib/llvm-99/lib/clang/*/include" in msg
    # headers of another LLVM do not count
    _headers(tmp_path / "llvm-98" / "lib" / "clang" / "98.0.1" / "include")
    with pytest.raises(TestbedError, match="stddef.h"):
        quiche_build.find_libclang(dirs=(str(lib),), headers=headers)
    # an include directory without stddef.h does not count either
    (tmp_path / "llvm-99" / "lib" / "clang" / "99.0.1" / "include").mkdir(parents=True)
    with pytest.raises(TestbedError, match="stddef.h"):
        quiche_build.find_libclang(dirs=(str(lib),), headers=headers)
    # what libclang-dev (libclang-common-99-dev) installs
    (tmp_path / "llvm-99" / "lib" / "clang" / "99.0.1" / "include" / "stddef.h").write_text("")
    assert quiche_build.find_libclang(dirs=(str(lib),), headers=headers) in {
        str(lib / "libclang-99.so.1"),
        str(lib / "libclang-99.so.99.0.1"),
    }


def test_libclang_headers_beside_the_library(monkeypatch, tmp_path) -> None:
    """Fedora-style /usr/lib64/libclang.so.N with /usr/lib64/clang/N/include: where libclang itself looks."""
    monkeypatch.delenv("LIBCLANG_PATH", raising=False)
    (tmp_path / "libclang.so.1").write_bytes(b"\x7fELF")
    with pytest.raises(TestbedError, match="clang/\\*/include beside it"):
        quiche_build.find_libclang(dirs=(str(tmp_path),), headers=())
    _headers(tmp_path / "clang" / "17" / "include")
    assert quiche_build.find_libclang(dirs=(str(tmp_path),), headers=()) == str(tmp_path / "libclang.so.1")


def test_libclang_names_bindgen_loads() -> None:
    ok = ("libclang.so", "libclang.so.1", "libclang-14.so.1", "libclang-14.0.6.so", "libclang.so.14.0.6")
    bad = ("libclang-cpp.so.14", "libclang-cpp.so", "libclangBasic.a", "libclang.a", "libclang-14.so.1.bak")
    assert all(quiche_build._LIBCLANG.match(n) for n in ok)
    assert not any(quiche_build._LIBCLANG.match(n) for n in bad)


def test_patch_set_lookup() -> None:
    assert quiche_build.quiche_patch_set("0.30.0", "bbr2").name == "cloudflare-quiche-0.30.0-bbr2"
    cubic, reno = quiche_build.quiche_patch_set("0.30.0", "cubic"), quiche_build.quiche_patch_set("0.30.0", "reno")
    assert (cubic.algorithm, reno.algorithm) == ("cubic", "reno")
    assert cubic.diff_text == reno.diff_text  # one change to src/recovery/congestion serves both
    with pytest.raises(TestbedError, match="cloudflare-quiche-0.24.0-bbr2"):
        quiche_build.quiche_patch_set("0.23.0", "bbr2")


def _fake_cargo(monkeypatch, calls: list[tuple[str, float]], lib_rs: Path):  # type: ignore[no-untyped-def]
    def fake_run(argv, cwd, what, env=None, progress=None):  # type: ignore[no-untyped-def]
        assert f'patch.crates-io.quiche.path="{lib_rs.parent.parent}"' in argv
        calls.append((argv[1], lib_rs.stat().st_mtime))
        if argv[1] == "generate-lockfile":
            (Path(cwd) / "Cargo.lock").write_text('[[package]]\nname = "boring-sys"\nversion = "4.99.0"\n')
            return
        assert "--locked" in argv and (Path(cwd) / "Cargo.lock").is_file()
        out = Path(env["CARGO_TARGET_DIR"]) / "release" / quiche_build.BINARY
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("binary")

    monkeypatch.setattr(quiche_build, "find_cargo", lambda: "cargo")
    monkeypatch.setattr(quiche_build, "find_libclang", lambda: "libclang.so")
    monkeypatch.setattr(quiche_build, "find_cmake", lambda: "/usr/bin/cmake")
    monkeypatch.setattr(quiche_build, "tool_output", lambda argv: "cargo 1.95.0")
    monkeypatch.setattr(quiche_build, "_run", fake_run)


def _patched_copy(tmp_path: Path, version: str, cc: str) -> Path:
    """A stand-in for the patched registry source the build would make (so no download happens)."""
    import hashlib

    ps = quiche_build.quiche_patch_set(version, cc)
    sha = hashlib.sha256(ps.diff_text.encode()).hexdigest()[:12]
    lib_rs = tmp_path / "quiche-src" / f"quiche-{version}-{sha}" / "src" / "lib.rs"
    lib_rs.parent.mkdir(parents=True)
    lib_rs.write_text("// patched copy\n")
    os.utime(lib_rs, (0, 0))
    return lib_rs


def test_build_makes_cargo_recompile_the_patched_crate(monkeypatch, tmp_path) -> None:
    """quiche's libquiche.rlib has no hash in its name, so after a build for another patch set of the same
    version the file on disk is that set's; a cache miss must touch the patched copy so cargo recompiles it."""
    lib_rs = _patched_copy(tmp_path, "0.30.0", "cubic")
    calls: list[tuple[str, float]] = []
    _fake_cargo(monkeypatch, calls, lib_rs)
    first = quiche_build.build_quiche_server("0.30.0", "cubic", cache_dir=tmp_path)
    assert not first.cached and first.binary.read_text() == "binary"
    assert calls == [("build", calls[0][1])] and calls[0][1] > 0  # locked: no resolution; touched before cargo ran
    again = quiche_build.build_quiche_server("0.30.0", "cubic", cache_dir=tmp_path)
    assert again.cached and len(calls) == 1  # a cache hit runs no cargo
    assert again.meta == first.meta


def test_committed_locks_pin_every_shipped_version(monkeypatch, tmp_path) -> None:
    """Each shipped quiche version builds --locked from testbed/quiche-server/locks, and its run metadata names
    the locked crates; all of them lock the same boring-sys, so BoringSSL is compiled once for all."""
    server_src = quiche_build.testbed_root("quiche-server/Cargo.toml") / "quiche-server"
    boring = set()
    for version in ("0.24.0", "0.26.0", "0.30.0"):
        lock = quiche_build.committed_lock(server_src, version)
        assert lock is not None, version
        crates = quiche_build.locked_crates(lock.read_text())
        assert crates["quiche"] == version and {"ring", "rcgen", "boring"} <= set(crates)
        boring.add(crates["boring-sys"])
    assert len(boring) == 1
    lib_rs = _patched_copy(tmp_path, "0.26.0", "bbr2")
    calls: list[tuple[str, float]] = []
    _fake_cargo(monkeypatch, calls, lib_rs)
    built = quiche_build.build_quiche_server("0.26.0", "bbr2", cache_dir=tmp_path)
    assert built.meta["locked"] is True and built.meta["lock"] == "locks/quiche-0.26.0.lock"
    assert built.meta["crates"]["boring-sys"] == boring.pop() and built.meta["crates"]["quiche"] == "0.26.0"
    assert (built.binary.parent / "Cargo.lock").read_text() == quiche_build.committed_lock(
        server_src, "0.26.0"
    ).read_text()  # type: ignore[union-attr]


def test_an_unlocked_version_resolves_and_keeps_its_lock(monkeypatch, tmp_path) -> None:
    import hashlib

    ps = quiche_build.quiche_patch_set("0.26.0", "bbr2")
    lib_rs = tmp_path / "quiche-src" / f"quiche-0.26.9-{hashlib.sha256(ps.diff_text.encode()).hexdigest()[:12]}"
    (lib_rs / "src").mkdir(parents=True)
    (lib_rs / "src" / "lib.rs").write_text("//\n")
    calls: list[tuple[str, float]] = []
    _fake_cargo(monkeypatch, calls, lib_rs / "src" / "lib.rs")
    said: list[str] = []
    built = quiche_build.build_quiche_server("0.26.9", "bbr2", cache_dir=tmp_path, patch_set=ps, progress=said.append)
    assert [c for c, _ in calls] == ["generate-lockfile", "build"]
    assert any("no committed Cargo.lock for quiche 0.26.9" in s for s in said)
    assert built.meta["locked"] is False and built.meta["crates"] == {"boring-sys": "4.99.0"}
    assert (tmp_path / "cargo-target" / "boring-sys-4.99.0" / "release" / quiche_build.BINARY).is_file()
    assert (built.binary.parent / "Cargo.lock").is_file()


def test_cmake_must_be_new_enough(monkeypatch, tmp_path) -> None:
    cmake = tmp_path / "cmake"
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TestbedError, match="cmake not found"):
        quiche_build.find_cmake()
    cmake.write_text("#!/bin/sh\necho 'cmake version 3.10.2'\n")
    cmake.chmod(0o755)
    with pytest.raises(TestbedError, match=r"cmake is 3.10; BoringSSL needs cmake >= 3.12"):
        quiche_build.find_cmake()
    cmake.write_text("#!/bin/sh\necho 'not cmake'\n")
    with pytest.raises(TestbedError, match="does not say `cmake version X`"):
        quiche_build.find_cmake()
    cmake.write_text("#!/bin/sh\necho 'cmake version 3.25.1'\n")
    assert quiche_build.find_cmake() == str(cmake)


def test_reno_and_cubic_share_one_build(monkeypatch, tmp_path) -> None:
    """The Reno and Cubic sets of a release are one change (the controller is a flag of the server), so the
    second of them takes the first one's binary instead of a cargo build; another change (BBR2) or --force
    builds; each cache entry still names its own set and controller."""
    from quicsm.instrumentation.patchset import find_patch_set

    monkeypatch.setattr(quiche_build, "find_cargo", lambda: "cargo")
    monkeypatch.setattr(quiche_build, "find_libclang", lambda: "libclang.so")
    monkeypatch.setattr(quiche_build, "find_cmake", lambda: "cmake")
    src = tmp_path / "patched"
    (src / "src").mkdir(parents=True)
    (src / "src/lib.rs").write_text("")
    monkeypatch.setattr(quiche_build, "_patched_source", lambda *a: src)
    builds: list[str] = []

    def cargo(argv: list[str], cwd: Path, what: str, env=None, progress=None) -> None:  # type: ignore[no-untyped-def]
        assert argv[1] == "build", argv  # 0.30.0 has a committed lock: no generate-lockfile
        out = Path(env["CARGO_TARGET_DIR"]) / "release"
        out.mkdir(parents=True, exist_ok=True)
        (out / quiche_build.BINARY).write_text(f"built for {what}")
        builds.append(what)

    monkeypatch.setattr(quiche_build, "_run", cargo)
    said: list[str] = []

    def build(cc: str, **kw):  # type: ignore[no-untyped-def]
        ps = find_patch_set(f"cloudflare-quiche-0.30.0-{cc}")
        return quiche_build.build_quiche_server(
            "0.30.0", cc, cache_dir=tmp_path / "cache", patch_set=ps, progress=said.append, **kw
        )

    cubic = build("cubic")
    reno = build("reno")
    assert len(builds) == 1 and not reno.cached and reno.binary != cubic.binary
    assert reno.binary.read_text() == cubic.binary.read_text() == f"built for {builds[0]}"
    assert reno.meta["same_build_as"] == cubic.binary.parent.name
    assert (reno.meta["cc"], reno.meta["patch_set"]) == ("reno", "cloudflare-quiche-0.30.0-reno")
    assert reno.meta["lock_sha256"] == cubic.meta["lock_sha256"]
    assert any("its binary serves --cc reno too" in line for line in said)
    assert build("reno").cached and len(builds) == 1
    build("bbr2")
    assert len(builds) == 2  # another change
    build("reno", force=True)
    assert len(builds) == 3 and "same_build_as" not in build("reno").meta
