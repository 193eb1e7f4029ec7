#!/usr/bin/env bash
# The VS Code extension's CI: clean install from the lockfile, type-check + compile, lint, unit tests, .vsix.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --ignore-scripts --no-audit --no-fund
npm run compile   # tsc: type-checks, then emits out/
npm run lint
npm test
npm run package
