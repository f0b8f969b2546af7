#!/usr/bin/env bash
# Kernel TCP stack (quicsm/testbed/tcp.py, ktrace.py, testbed/tcp): bpftrace from Debian reads the
# kernel's TCP tracepoints and struct tcp_sock / struct bbr through BTF; the Go HTTP/2 server and
# client use the standard library only and are built once. Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
if ! command -v bpftrace >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq bpftrace >/dev/null
fi
if command -v go >/dev/null 2>&1; then
  python3 -c 'from quicsm.testbed.tcp import build_tcp; print("tcp:", build_tcp().server)'
fi
