#!/usr/bin/env bash
# Regenerates the pictures of the extension (docs/img/vscode-*.png, shown in docs/vscode.md, docs/base-revision.md
# and the README) from one end-to-end run (run.sh): VS Code for the browser on Triton's CPU interpreter. Run
# client_stub/ci.sh first (it packages the VSIX the run installs).
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
export GEAK_E2E_ARTIFACTS
GEAK_E2E_ARTIFACTS=$(mktemp -d "${TMPDIR:-/tmp}/geak-screenshots-XXXXXX")
./run.sh
mkdir -p "$ROOT/docs/img"
for name in diagnostics hover code-actions optimize-progress refactor-preview missing-geak base-differs; do
  shot=$GEAK_E2E_ARTIFACTS/screenshots/$name.png
  [ -f "$shot" ] || { echo "screenshots: the run made no $name.png (skipped?): see above" >&2; exit 1; }
  cp "$shot" "$ROOT/docs/img/vscode-$name.png"
done
echo "screenshots: docs/img/vscode-*.png updated" >&2
