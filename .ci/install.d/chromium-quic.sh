#!/usr/bin/env bash
# Chromium's own QUIC as a testbed stack (quicsm/testbed/chromium_quic_build.py, tests/testbed/test_chromium_quic_e2e.py):
# clang + lld (Debian's 14 build Chromium 62's quic_server/quic_client), ninja, NSS headers (net/ verifies
# certificates with NSS on Linux), ccache (a second patch set or a rebuild compiles only what changed), openssl
# (the server's certificate) and patch. Chromium's 2017 gn and build scripts need Python 2.7, which Debian 12
# does not package: the machine image's pyenv carries 2.7.18, which the build finds by itself; without one this
# says so (`pyenv install 2.7.18` needs python.org, which CI cannot reach). Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
export DEBIAN_FRONTEND=noninteractive
need=()
command -v clang >/dev/null 2>&1 && command -v clang++ >/dev/null 2>&1 || need+=(clang)
command -v ld.lld >/dev/null 2>&1 || need+=(lld)
command -v ninja >/dev/null 2>&1 || need+=(ninja-build)
command -v ccache >/dev/null 2>&1 || need+=(ccache)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v patch >/dev/null 2>&1 || need+=(patch)
ls /usr/include/nss*/cert.h >/dev/null 2>&1 || need+=(libnss3-dev)
if ((${#need[@]})); then
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
PY=${PYTHON:-python3}
"$PY" -c 'from quicsm.testbed.chromium_quic_build import find_toolchain; t = find_toolchain(); print("chromium-quic:", t.python2, t.clang_base, t.ccache or "no ccache")' || {
  echo "chromium-quic.sh: the Chromium QUIC build's toolchain is incomplete (see above)" >&2
  exit 1
}
