"""Runs and measures Triton kernels against their embedded unit tests. Knows nothing of LLMs."""
