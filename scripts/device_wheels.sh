#!/usr/bin/env bash
# Fetch into .whl/ the wheels a GPU machine of the device tool lacks (its image has torch, Triton, pytest, numpy,
# scipy, pyyaml, rich, filelock, matplotlib, watchdog's and httpx's needs...; see the device notes), at the versions
# this checkout's .venv runs, for CPython 3.12 on x86-64; `scripts/gpu_session.sh` installs them there. Also
# pytest_httpserver (the tests' `scripted_llm` plugin, so `pytest` runs there) and py-spy (profiles of a run).
#   bash scripts/device_wheels.sh        (after `make setup`; .whl/ is git-ignored through .git/info/exclude)
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES="annotated-types anyio attrs cattrs certifi h11 httpcore2 httpx2 idna jiter lsprotocol openai pydantic
pydantic_core pygls pytest_httpserver rank-bm25 sniffio truststore typing-extensions typing-inspection watchdog"
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
for name in $PACKAGES; do
  version=$(.venv/bin/python -m pip show "$name" 2>/dev/null | awk '/^Version:/{print $2}')
  [ -n "$version" ] || { echo "device_wheels: $name is not installed in .venv (run make setup)" >&2; exit 2; }
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d .whl "$name==$version" 2>&1 | grep -v WARNING || true
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d .whl py-spy 2>&1 | grep -v WARNING || true
ls .whl | wc -l
