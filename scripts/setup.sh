#!/usr/bin/env bash
# Create .venv and install GEAK with its test extras. Keeps an existing torch (e.g. a CUDA or ROCm build);
# otherwise installs torch ${GEAK_TORCH_VERSION:-2.13.0} (the CPU wheel on CPU-only machines).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/python -m pip install -q "torch==${GEAK_TORCH_VERSION:-2.13.0}"
fi
.venv/bin/python -m pip install -q -e ".[test]"
