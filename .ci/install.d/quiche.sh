#!/usr/bin/env bash
# Cloudflare quiche testbed server (quicsm/testbed/quiche_build.py, tests/testbed/test_quiche_e2e.py):
# cargo/rustc >= 1.88, libclang (bindgen, for BoringSSL), cmake, a C/C++ compiler. Idempotent: installs
# only what is missing. Run by scripts/install.sh like every .ci/install.d/*.sh.
# Debian 12's rustc (1.63) is too old for quiche 0.30 (rust-version 1.88); Debian's rustc-web/cargo-web
# (bookworm-security, 1.96 when checked on 2026-11-23) are new enough and come from the apt registry.
# A Rust installed with rustup (~/.cargo/bin) is used when it is new enough.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/checks.sh
export DEBIAN_FRONTEND=noninteractive
CMAKE_MIN=3.12   # BoringSSL's cmake_minimum_required
need=()
libclang_ok || need+=(libclang-dev)   # libclang-cpp (in the base image) is not what bindgen loads
cmake_ok "$CMAKE_MIN" || need+=(cmake)
command -v c++ >/dev/null 2>&1 || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
libclang_ok || { echo "quiche.sh: no libclang bindgen can load after installing libclang-dev" >&2; exit 1; }
cmake_ok "$CMAKE_MIN" || {
  echo "quiche.sh: need cmake >= $CMAKE_MIN as \`cmake\`; $(command -v cmake || echo none) says:" \
    "$(cmake --version 2>&1 | head -1) (a stub ahead of /usr/bin on PATH?)" >&2
  exit 1
}
export PATH="$HOME/.cargo/bin:$PATH"
rust_ok() { command -v rustc >/dev/null 2>&1 && command -v cargo >/dev/null 2>&1 &&
  [ "$(printf '%s\n1.88.0\n' "$(rustc --version | cut -d' ' -f2)" | sort -V | head -1)" = 1.88.0 ]; }
if ! rust_ok; then
  log=$(mktemp)
  if ! { apt-get update -qq && apt-get install -y -qq rustc-web cargo-web; } >"$log" 2>&1; then
    echo "quiche.sh: apt-get install rustc-web cargo-web failed: $(tail -1 "$log")" >&2
  fi
  rm -f "$log"
fi
if ! rust_ok; then
  echo "quiche.sh: need cargo and rustc >= 1.88 (found: $(rustc --version 2>/dev/null || echo none));" \
    "enable bookworm-security for rustc-web/cargo-web, or install Rust with rustup" >&2
  exit 1
fi
rustc --version
cargo --version
