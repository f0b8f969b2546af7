#!/bin/bash
# Instrumentation (quicsm patch): the engine applies diffs with git apply, GNU patch as the alternative;
# tests run both. Idempotent: installs only what is missing.
set -euo pipefail
missing=()
command -v git >/dev/null 2>&1 || missing+=(git)
command -v patch >/dev/null 2>&1 || missing+=(patch)
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}"
fi
