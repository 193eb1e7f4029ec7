"""The job side of the evaluator: everything that runs in a job process, beside the untrusted code under test.

The fork server (``worker``, started from a copy of this package under a neutral name) and what it forks: the job
process (``job_process``, confined by ``confinement`` in per-job namespaces, ``namespaces``) running a check
(``check_job``), a timing (``bench_job``, ``bench_preparation``, ``bench_capture``, the timer ``timing``), a
screening (``screening``), the device's ceilings (``device_ceilings``) or a profile (``kernel_profile``). The runtime
that instruments user code: ``sandbox`` (the zygote's runtime), Triton's launches and tunings in the modes of
``launch_modes`` (``launch_counter``, ``autotuning``), ``capture``, ``probes``, ``pytest_plugin``, ``rocm_bench`` and
the ``shims`` module of the ROCm suite. Triton's compiles (``compile``: in forked processes, ahead, watched, cached).
Triton's CPU interpreter made to run GPU-written files (``interpreter_shims`` and the ``interpreter_*`` modules).

It imports nothing of the caller's side (``api``, ``pool``, the verdicts): only its own modules, by relative imports,
and the plain data both sides share (``evaluator/shared``). ``tests/test_layering.py`` holds it to that.
"""
