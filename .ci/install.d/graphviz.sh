#!/usr/bin/env bash
# Graphviz's `dot` draws quicsm's diagrams (quicsm/diagrams/render.py). Idempotent: installs only if missing.
set -euo pipefail
if ! command -v dot >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq graphviz >/dev/null
fi
dot -V
