#!/usr/bin/env bash
# Cloudflare quiche testbed server (quicsm/testbed/quiche_build.py): cargo/rustc >= 1.88, libclang (bindgen
# for BoringSSL), cmake, a C/C++ compiler. Idempotent: installs only what is missing.
# Debian 12's rustc (1.63) is too old for quiche 0.30 (rust-version 1.88); rustc-web/cargo-web are used when
# new enough, otherwise the script stops with one line saying to install Rust with rustup.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || need+=(libclang-dev)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v c++ >/dev/null 2>&1 || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
export PATH="$HOME/.cargo/bin:$PATH"
rust_ok() { command -v rustc >/dev/null 2>&1 && command -v cargo >/dev/null 2>&1 &&
  [ "$(printf '%s\n1.88.0\n' "$(rustc --version | cut -d' ' -f2)" | sort -V | head -1)" = 1.88.0 ]; }
if ! rust_ok; then
  apt-get update -qq
  apt-get install -y -qq rustc-web cargo-web >/dev/null 2>&1 || true
fi
if ! rust_ok; then
  echo "quiche.sh: need cargo and rustc >= 1.88 (found: $(rustc --version 2>/dev/null || echo none)); install Rust with rustup" >&2
  exit 1
fi
rustc --version
cargo --version
