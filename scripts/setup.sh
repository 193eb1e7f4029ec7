#!/usr/bin/env bash
# Create .venv and install GEAK with its test extras, at the versions of constraints.txt (what CI tested; `make lock`
# updates it). Keeps an existing torch (e.g. a CUDA or ROCm build); otherwise installs torch $TORCH_VERSION (the CPU
# wheel on CPU-only machines). Quiet, and a no-op when .venv is already up to date with pyproject.toml and
# constraints.txt (so `make demo` starts at once).
set -euo pipefail
cd "$(dirname "$0")/.."
# bubblewrap sandboxes the evaluator's worker (docs/evaluator.md: "Isolation of the code under test"); jobs are isolated with
# namespaces of their own without it too. Installed only where that needs no prompt: as root with apt.
if ! command -v bwrap >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1; }) \
    || echo "setup: bubblewrap could not be installed; jobs are still isolated by namespaces where the system allows" >&2
fi
PYTHON=${PYTHON:-python3}
TORCH_VERSION=${GEAK_TORCH_VERSION:-2.13.0}
LOCK=constraints.txt
STAMP=.venv/.geak-installed
if [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ] && [ "$STAMP" -nt "$LOCK" ] \
  && .venv/bin/python -c "import geak.server.cli" 2>/dev/null; then
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
  .venv/bin/python -m pip install -q -c "$LOCK" "torch==$TORCH_VERSION"
fi
# The lock leaves torch out (it follows the machine's GPU): pin the one in .venv, so that pip fails rather than swap it.
.venv/bin/python -c "from importlib.metadata import version; print('torch==' + version('torch'))" >.venv/torch-constraint.txt
# The build backend's notes on editable installs are not actionable here: keep them out of the demo's output.
PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -c "$LOCK" -c .venv/torch-constraint.txt -e ".[test]"
touch "$STAMP"
