#!/usr/bin/env bash
# Installs everything quicsm needs on a fresh Debian machine (run as root): Graphviz, the Python
# package with its test extras, and what each area's .ci/install.d/*.sh asks for (Go modules, Chromium).
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v dot >/dev/null 2>&1 || need_apt+=(graphviz)
command -v gcc >/dev/null 2>&1 || need_apt+=(build-essential)
if ((${#need_apt[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
pip_install() {
  "$PY" -m pip install -q --disable-pip-version-check "$@" 2>/tmp/quicsm-pip.log || {
    if grep -q externally-managed /tmp/quicsm-pip.log; then
      "$PY" -m pip install -q --disable-pip-version-check --break-system-packages "$@"
    else
      cat /tmp/quicsm-pip.log >&2
      return 1
    fi
  }
}
pip_install -e '.[test]'

for script in .ci/install.d/*.sh; do
  [ -e "$script" ] || continue
  bash "$script"
done
echo "quicsm installed: $(command -v quicsm) ($("$PY" -c 'import quicsm; print(quicsm.__version__)'))" >&2
