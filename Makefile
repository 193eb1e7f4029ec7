# `make demo`: set everything up and optimize a corpus kernel with the built-in defaults (no API key, any machine).
# `make test`: set everything up and run the checks CI runs.
# `make lock`: update constraints.txt, the versions scripts/setup.sh installs (run it after changing pyproject.toml's
#   dependencies, or to move to newer releases, and commit the file). It resolves pyproject's dependencies and the
#   `test` extra for Python 3.11 on Linux x86-64 with uv (installed into .venv where missing), beside the torch that
#   setup.sh installs, and leaves out torch, triton and the NVIDIA runtime wheels, which follow the machine's GPU.
DEMO_KERNEL ?= snippets/kernels/vector_add.py
LOCK_TORCH = $(shell sed -n 's/^TORCH_VERSION=$${GEAK_TORCH_VERSION:-\(.*\)}$$/\1/p' scripts/setup.sh)
LOCK_LEFT_OUT = ^(torch|triton|nvidia-[a-z0-9-]+|cuda-[a-z0-9-]+)==

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
	@{ echo "# The versions CI tested: scripts/setup.sh installs with -c constraints.txt. Update: make lock (Makefile)."; \
	  echo "# Python 3.11, Linux x86-64; torch, triton and the NVIDIA runtime wheels follow the machine's GPU: not here."; \
	  echo "torch==$(LOCK_TORCH)" | .venv/bin/uv pip compile --no-config --quiet --no-header --annotation-style line \
	    --python-version 3.11 --python-platform x86_64-manylinux_2_28 --extra test pyproject.toml - \
	    | grep -vE '$(LOCK_LEFT_OUT)'; } >constraints.txt.new
	@mv constraints.txt.new constraints.txt
