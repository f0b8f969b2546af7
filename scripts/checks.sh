# Checks that a tool the build needs is really there, not a look-alike: sourced by scripts/install.sh and
# .ci/install.d/*.sh (and by tests/test_install_checks.py, which runs each against look-alikes). Each
# function prints nothing and returns 0 when the tool works, 1 otherwise.

# version_at_least HAVE WANT: dotted versions compared part by part (1.26.8 >= 1.26).
version_at_least() {
  [ -n "$1" ] && [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]
}

# go_ok MIN [GO]: a gc Go toolchain (not gccgo's go) at least MIN. Debian 12's golang-go is 1.19.
go_ok() {
  local v
  v=$("${2:-go}" version 2>/dev/null) || return 1
  case $v in *gccgo*) return 1 ;; esac
  v=$(printf '%s\n' "$v" | sed -n 's/^go version go\([0-9][0-9.]*\) .*/\1/p')
  version_at_least "$v" "$1"
}

# cmake_ok MIN [CMAKE]: a cmake that runs and says `cmake version X` with X at least MIN.
cmake_ok() {
  local v
  v=$("${2:-cmake}" --version 2>/dev/null | sed -n 's/^cmake version \([0-9][0-9.]*\).*/\1/p' | head -1)
  version_at_least "$v" "$1"
}

# chromium_ok MIN [CHROMIUM]: a Chromium that starts and says `Chromium N...` with N at least MIN
# (Debian's transitional or snap stubs print something else or nothing).
chromium_ok() {
  local v
  v=$(timeout 60 "${2:-chromium}" --version 2>/dev/null | sed -n 's/^Chromium \([0-9][0-9.]*\).*/\1/p' | head -1)
  version_at_least "$v" "$1"
}

# libclang_ok: a libclang bindgen can load (libclang.so*, libclang-N.so*; not libclang-cpp, which the
# base image ships and which lacks the C API). The rule is quicsm's own, so the build and this agree.
libclang_ok() {
  "${PYTHON:-python3}" -c 'from quicsm.testbed.quiche_build import find_libclang; find_libclang()' >/dev/null 2>&1
}
