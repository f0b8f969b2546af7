#!/usr/bin/env bash
# ngtcp2 from Debian (quicsm/testbed/stacks/ngtcp2.py, ngtcp2_server.py): its example HTTP/3 server
# gtlsserver, a stack that logs no congestion state (its qlog's metrics are read). Idempotent.
set -euo pipefail
if [ ! -x /usr/sbin/gtlsserver ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq ngtcp2-server openssl >/dev/null
fi
