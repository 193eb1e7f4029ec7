# `make demo`: set everything up and optimize a corpus kernel with the built-in defaults (no API key, any machine).
# `make test`: set everything up and run the checks CI runs.
DEMO_KERNEL ?= snippets/kernels/vector_add.py

.PHONY: setup demo test lint
setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/geak optimize $(DEMO_KERNEL)

lint: setup
	.venv/bin/ruff check .

test: lint
	.venv/bin/python -m pytest -q -n 2 --dist loadfile
