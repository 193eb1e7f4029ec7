"""The job side of the evaluator: everything that runs in a job process, beside the untrusted code under test.

The fork server and the job process (``worker``, started from a copy of this package under a neutral name), the runtime
that instruments user code (``sandbox``, ``capture``, ``probes``, ``pytest_plugin``, ``rocm_bench`` and the
``shims`` module of the ROCm suite), the timer (``timing``) and device ceilings (``device_ceilings``), Triton's CPU
interpreter made to run GPU-written files (``interpreter_shims``, ``interpreter_block_pointers``), the per-job
namespaces (``namespaces``) and compiles (``compile``).

It imports nothing of the caller's side (``api``, ``pool``, the verdicts): only its own modules, by relative imports,
and the plain data both sides share (``evaluator/shared``). ``tests/test_layering.py`` holds it to that.
"""
