#!/usr/bin/env bash
# Create .venv and install GEAK with its test extras. Keeps an existing torch (e.g. a CUDA or ROCm build);
# otherwise installs torch ${GEAK_TORCH_VERSION:-2.13.0} (the CPU wheel on CPU-only machines).
# Quiet, and a no-op when .venv is already up to date with pyproject.toml (so `make demo` starts at once).
set -euo pipefail
cd "$(dirname "$0")/.."
# bubblewrap sandboxes the evaluator's worker (docs/evaluator.md: "Isolation of the code under test"); jobs are isolated with
# namespaces of their own without it too. Installed only where that needs no prompt: as root with apt.
if ! command -v bwrap >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1; }) \
    || echo "setup: bubblewrap could not be installed; jobs are still isolated by namespaces where the system allows" >&2
fi
PYTHON=${PYTHON:-python3}
STAMP=.venv/.geak-installed
if [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ] && .venv/bin/python -c "import geak.server.cli" 2>/dev/null; then
  exit 0
fi
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: GEAK needs Python 3.11 or newer; $PYTHON is $("$PYTHON" -V 2>/dev/null || echo "not found") (e.g. PYTHON=python3.12 make test; remove an older .venv first)" >&2
  exit 2
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/python -m pip install -q "torch==${GEAK_TORCH_VERSION:-2.13.0}"
fi
# The build backend's notes on editable installs are not actionable here: keep them out of the demo's output.
PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e ".[test]"
touch "$STAMP"
