#!/usr/bin/env bash
# Testbed (quicsm/testbed, testbed/relay): iproute2 for namespaces and tc tbf, procps for sysctl,
# Debian's chromium for the browser client, and the Go relay built once (it has no dependencies
# beyond the standard library; Go itself comes from quic-go.sh). Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/checks.sh
export PATH="/usr/local/go/bin:$PATH"
CHROMIUM_MIN=120   # the HTTP/3 flags the testbed passes (quicsm/testbed/chromium.py)
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v tc >/dev/null 2>&1 || missing+=(iproute2)
command -v sysctl >/dev/null 2>&1 || missing+=(procps)
chromium_ok "$CHROMIUM_MIN" || missing+=(chromium)   # not a stub that prints no `Chromium N`
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
chromium_ok "$CHROMIUM_MIN" || {
  echo "testbed.sh: need Chromium >= $CHROMIUM_MIN as \`chromium\`; $(command -v chromium || echo none) says:" \
    "$(timeout 60 chromium --version 2>&1 | head -1) (a stub ahead of /usr/bin on PATH?)" >&2
  exit 1
}
if command -v go >/dev/null 2>&1; then
  python3 -c 'from quicsm.testbed.relay import build_relay; print("relay:", build_relay().relay)'
fi
