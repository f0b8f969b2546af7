#!/usr/bin/env bash
# ngtcp2 from Debian (quicsm/testbed/stacks/ngtcp2.py, ngtcp2_server.py): its example HTTP/3 server
# gtlsserver, a stack that logs no congestion state (its qlog's metrics are read), and its client gtlsclient
# (tests/testbed/test_ngtcp2_stack.py fetches a page over loopback with it). Idempotent.
set -euo pipefail
need=()
[ -x /usr/sbin/gtlsserver ] || need+=(ngtcp2-server openssl)
command -v gtlsclient >/dev/null 2>&1 || need+=(ngtcp2-client)  # the loopback test's HTTP/3 client
if ((${#need[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
