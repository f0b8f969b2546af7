#!/usr/bin/env bash
# Testbed (quicsm/testbed, testbed/relay): iproute2 for namespaces and tc tbf, procps for sysctl,
# Debian's chromium for the browser client, and the Go relay built once (it has no dependencies
# beyond the standard library; Go itself comes from quic-go.sh). Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v tc >/dev/null 2>&1 || missing+=(iproute2)
command -v sysctl >/dev/null 2>&1 || missing+=(procps)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if command -v go >/dev/null 2>&1; then
  python3 -c 'from quicsm.testbed.relay import build_relay; print("relay:", build_relay().relay)'
fi
