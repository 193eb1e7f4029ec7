"""Runs and measures Triton kernels against their embedded unit tests. Knows nothing of LLMs.

The modules here are the caller's side (the trusted process: ``api``, the pool, the verdicts); what runs in a job
process, beside the code under test, is in ``job/``; what both sides agree on is in ``shared/``."""
