#!/usr/bin/env bash
# Create .venv and install GEAK with its `test` and `repos` extras (`repos`: what kernel repositories' own tests
# import, transformers for Liger-Kernel's), at the versions of constraints.txt (what CI tested; `make lock` updates
# it). Keeps an existing torch; otherwise installs torch $TORCH_VERSION built for this machine's GPU
# (scripts/torch_choice.sh: CUDA from PyPI, ROCm or CPU from PyTorch's index; GEAK_TORCH_INDEX_URL overrides), then
# GEAK, with its `triton` extra where that torch brings no Triton of its own (the CPU build), and ends by printing
# the backend torch gives (scripts/torch_backend.py). Quiet, and a no-op when .venv is already up to date with
# pyproject.toml and constraints.txt (so `make demo` starts at once).
#   bash scripts/setup.sh            set up
#   bash scripts/setup.sh --plan     print the machine found and the pip commands setup would run; install nothing
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/torch_choice.sh
. scripts/torch_choice.sh
case "${1:-}" in
  "") PLAN= ;;
  --plan) PLAN=1 ;;
  *) echo "usage: bash scripts/setup.sh [--plan]  (--plan: print what setup would install here, install nothing)" >&2
     exit 2 ;;
esac
PYTHON=${PYTHON:-python3}
TORCH_VERSION=${GEAK_TORCH_VERSION:-2.13.0}
LOCK=constraints.txt
STAMP=.venv/.geak-installed
PIP=".venv/bin/python -m pip install -q"

# The version of distribution $1 installed in .venv; fails where there is no .venv or no such distribution.
installed() {
  [ -x .venv/bin/python ] && .venv/bin/python -c "from importlib.metadata import version; print(version('$1'))" 2>/dev/null
}

# Whether the Python of .venv can import a `triton` (PyPI's, or the pytorch-triton-rocm of a ROCm torch).
has_triton() {
  .venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('triton') is None)" 2>/dev/null
}

# The pip arguments that install the chosen torch.
torch_args() {
  echo "-c $LOCK torch==$TORCH_VERSION${TORCH_INDEX:+ --index-url $TORCH_INDEX}"
}

# Whether PyTorch's default index for this machine answers (a server that answers with an error counts: pip reports
# that better); an index named by GEAK_TORCH_INDEX_URL is left to pip.
index_reachable() {
  [ -n "${GEAK_TORCH_INDEX_URL+set}" ] && return 0
  .venv/bin/python - "$TORCH_INDEX/torch/" <<'EOF'
import ssl, sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=15).close()
except urllib.error.HTTPError:
    pass
except urllib.error.URLError as error:  # pip has its own certificates: only a host that cannot be reached counts
    sys.exit(not isinstance(error.reason, ssl.SSLError))
except TimeoutError:
    sys.exit(1)
EOF
}

if [ -n "$PLAN" ]; then
  torch_choice
  echo "setup: $TORCH_FOUND"
  if existing=$(installed torch); then
    echo "setup: keeps the torch in .venv ($existing)"
    has_triton && extra= || extra=,triton
  else
    echo "$PIP $(torch_args)"
    [ "$TORCH_MACHINE" = cpu ] && extra=,triton || extra=
  fi
  echo "$PIP -c .venv/constraints.txt -e \".[test,repos$extra]\""
  exit 0
fi

if [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ] && [ "$STAMP" -nt "$LOCK" ] \
  && .venv/bin/python -c "import geak.server.cli" 2>/dev/null; then
  exit 0
fi
# bubblewrap sandboxes the evaluator's worker (docs/evaluator.md: "Isolation of the code under test"); jobs are isolated with
# namespaces of their own without it too. Installed only where that needs no prompt: as root with apt.
if ! command -v bwrap >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1; }) \
    || echo "setup: bubblewrap could not be installed; jobs are still isolated by namespaces where the system allows" >&2
fi
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: GEAK needs Python 3.11 or newer; $PYTHON is $("$PYTHON" -V 2>/dev/null || echo "not found") (e.g. PYTHON=python3.12 make test; remove an older .venv first)" >&2
  exit 2
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
torch_choice
.venv/bin/python -m pip install -q --upgrade pip
if ! installed torch >/dev/null; then
  echo "setup: $TORCH_FOUND: torch $TORCH_VERSION from ${TORCH_INDEX:-the index pip is set up with}"
  if [ -n "$TORCH_INDEX" ] && ! index_reachable; then
    if [ "$TORCH_MACHINE" != cpu ]; then
      echo "setup: $TORCH_INDEX cannot be reached; set GEAK_TORCH_INDEX_URL to a mirror of it" >&2
      exit 1
    fi
    echo "setup: $TORCH_INDEX cannot be reached: torch from the index pip is set up with instead (from PyPI: a CUDA build, several GB)" >&2
    TORCH_INDEX=
  fi
  # shellcheck disable=SC2046  # torch_args prints separate arguments
  $PIP $(torch_args) || {
    echo "setup: pip could not install torch==$TORCH_VERSION from ${TORCH_INDEX:-the index pip is set up with}; choose another" \
      "index (GEAK_TORCH_INDEX_URL) or release (GEAK_TORCH_VERSION)" >&2
    exit 1
  }
fi
# The lock leaves torch out and pins PyPI's triton: pin both to what .venv has, so that pip fails rather than swap
# the build chosen for this machine (a ROCm torch's Triton is pytorch-triton-rocm, which the lock does not name).
.venv/bin/python - "$LOCK" >.venv/constraints.txt <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version

kept = {}
for name in ("torch", "triton"):
    try:
        kept[name] = version(name)
    except PackageNotFoundError:
        pass
for line in open(sys.argv[1]):
    if line.split("==")[0].strip() not in kept:
        print(line, end="")
for name, number in kept.items():
    print(f"{name}=={number}")
EOF
has_triton && extra= || extra=,triton
# The build backend's notes on editable installs are not actionable here: keep them out of the demo's output.
PYTHONWARNINGS=ignore $PIP -c .venv/constraints.txt -e ".[test,repos$extra]"
touch "$STAMP"
.venv/bin/python scripts/torch_backend.py "$TORCH_MACHINE"
