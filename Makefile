# `make demo`: set everything up and optimize a corpus kernel with the built-in defaults (no API key, any machine).
# `make test`: set everything up and run the checks CI runs.
# `make lock`: update constraints.txt, the versions scripts/setup.sh installs (run it after changing pyproject.toml's
#   dependencies, or to move to newer releases, and commit the file). It resolves pyproject's dependencies and the
#   `test`, `repos` and `triton` extras for Python 3.11 on Linux x86-64 with uv (installed into .venv where missing),
#   beside the torch that setup.sh installs (PyPI's), and leaves out torch and the NVIDIA runtime wheels, which follow
#   the machine's GPU. triton stays, for setup to install beside a CPU-only torch (which brings none; setup pins a
#   torch's own Triton instead): resolved as for that torch, the newest release, not the one PyPI's CUDA torch pins.
DEMO_KERNEL ?= snippets/kernels/vector_add.py
LOCK_TORCH = $(shell sed -n 's/^TORCH_VERSION=$${GEAK_TORCH_VERSION:-\(.*\)}$$/\1/p' scripts/setup.sh)
LOCK_LEFT_OUT = ^(torch|nvidia-[a-z0-9-]+|cuda-[a-z0-9-]+)==

.PHONY: setup demo test lint lock
setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/geak optimize $(DEMO_KERNEL)

lint: setup
	.venv/bin/ruff check .

test: lint
	.venv/bin/python -m pytest -q -n 2 --dist loadfile

lock:
	@[ -x .venv/bin/uv ] || { [ -x .venv/bin/python ] || python3 -m venv .venv; .venv/bin/python -m pip install -q uv; }
	@echo triton >.venv/lock-overrides.txt
	@{ echo "# The versions CI tested: scripts/setup.sh installs with -c constraints.txt. Update: make lock (Makefile)."; \
	  echo "# Python 3.11, Linux x86-64; torch and the NVIDIA runtime wheels follow the machine's GPU: not here. triton:"; \
	  echo "# for a CPU-only torch, which brings none (setup.sh pins the Triton of a torch that brings its own instead)."; \
	  echo "torch==$(LOCK_TORCH)" | .venv/bin/uv pip compile --no-config --quiet --no-header --annotation-style line \
	    --python-version 3.11 --python-platform x86_64-manylinux_2_28 --extra test --extra repos --extra triton \
	    --overrides .venv/lock-overrides.txt pyproject.toml - \
	    | grep -vE '$(LOCK_LEFT_OUT)'; } >constraints.txt.new
	@mv constraints.txt.new constraints.txt
