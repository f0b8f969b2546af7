#!/usr/bin/env bash
# quic-go testbed (quicsm/testbed/build.py): a Go toolchain new enough for the newest patched quic-go,
# the quic-go versions quicsm patches, the Go 1.20 toolchain quic-go v0.33 needs, and the server and
# client dependencies, all from the Go module proxy. Idempotent: a second run only checks.
# Go goes to /usr/local/go; .ci/run puts /usr/local/go/bin on PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/checks.sh
export PATH="/usr/local/go/bin:$PATH"
GO_WANT="${QUICSM_GO_VERSION:-1.26.8}"   # newest patched quic-go (v0.65) needs go >= 1.26
GO_MIN=1.26                              # testbed/server and testbed/client: `go 1.26.0`

if ! go_ok "$GO_MIN"; then  # none, gccgo's, or one too old (Debian 12's golang-go is 1.19)
  # Bootstrap: Debian's go (1.19) can fetch the official toolchain module from the proxy; the toolchain
  # module zip is a complete GOROOT (exec bits are not kept in module zips, so set them).
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq golang-go >/dev/null
  tmp=$(mktemp -d)
  dir=$(GOMODCACHE="$tmp" GOFLAGS=-modcacherw GO111MODULE=on /usr/bin/go mod download -json \
        "golang.org/toolchain@v0.0.1-go${GO_WANT}.linux-amd64" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  rm -rf /usr/local/go
  cp -a "$dir" /usr/local/go
  chmod -R a+rX /usr/local/go
  chmod a+x /usr/local/go/bin/* /usr/local/go/pkg/tool/*/*
  rm -rf "$tmp"
fi
go_ok "$GO_MIN" || { echo "quic-go.sh: need Go >= $GO_MIN (gc), found: $(go version 2>&1 | head -1)" >&2; exit 1; }
go version

# Module versions and toolchains named by the shipped patch sets (manifest.json "module").
mapfile -t lines < <(python3 - <<'EOF'
import json, pathlib
for m in sorted(pathlib.Path("quicsm/patches/quic-go").glob("*/manifest.json")):
    mod = json.loads(m.read_text()).get("module", {})
    print(mod.get("version", ""), mod.get("toolchain") or "")
EOF
)
declare -A seen=()
for line in "${lines[@]}"; do
  read -r version toolchain <<<"$line"
  [ -n "$version" ] || continue
  if [ -z "${seen[$version]:-}" ]; then
    (cd /tmp && GOTOOLCHAIN=local GOFLAGS= go mod download "github.com/quic-go/quic-go@$version")
    seen[$version]=1
  fi
  if [ -n "$toolchain" ] && [ -z "${seen[$toolchain]:-}" ]; then
    (cd /tmp && GOTOOLCHAIN="$toolchain" go version >/dev/null)   # fetches golang.org/toolchain once
    seen[$toolchain]=1
  fi
done
for m in testbed/server testbed/client; do
  (cd "$m" && GOTOOLCHAIN=local go mod download)
done
echo "quic-go testbed: Go $(go env GOVERSION), quic-go ${!seen[*]}" >&2
