"""How a zygote's job processes are isolated: per-job namespaces under the caller's policy (``namespaces``), or
plain processes."""

from __future__ import annotations

import os
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..shared.isolation_policy import PROCESS_ONLY, Policy
from . import process_ties


@dataclass(frozen=True)
class Confinement:
    """How this zygote's job processes are isolated (``namespaces.confine`` with `policy`, or process only)."""

    status: Any  # namespaces.Status
    policy: Policy | None  # None when jobs run as plain processes
    cpu_only: bool
    forker: Any | None = None  # namespaces.JobForker
    trusted_cache: str | None = None  # see compile/trusted_cache.py: only with isolated jobs (which compile privately)

    def fork(self) -> int:
        return self.forker.fork(process_ties.fork_process) if self.forker is not None else process_ties.fork_process()

    def enter(self, scratch: str | None) -> None:
        from . import namespaces

        if self.policy is None:
            return
        if not scratch:  # a job that writes no file (peaks): an empty directory in the worker's own
            scratch = tempfile.mkdtemp(prefix="job-", dir=os.getcwd())
        namespaces.confine(self.policy, scratch, self.cpu_only, self.status.user_ns)

    def driver_built(self, scratch: str) -> bool:
        """Create Triton's driver in a process confined as a job is (its paths, hence its helper's cache key, are a
        job's) that runs no user code, with `scratch` as its folder: its helper module compiled into the job cache
        there. True if the process did."""
        from . import sandbox

        pid = self.fork()
        if pid == 0:  # never returns
            code = 1
            try:
                self.enter(scratch)
                sandbox.load_driver()
                code = 0
            except BaseException:
                traceback.print_exc()  # to the zygote's log
            finally:
                os._exit(code)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def confine_jobs(config: dict[str, Any], info: Any, open_runtime: Callable[[], None]) -> Confinement:
    """Probe the per-job namespaces once (with the runtime opened inside); "namespaces" demands them, "process"
    skips them."""
    from . import namespaces

    cpu_only = info.backend == "interpreter"
    mode = config.get("isolation", "auto")
    if mode == "process" or not config.get("policy"):
        return Confinement(namespaces.Status(PROCESS_ONLY, "turned off"), None, cpu_only)
    policy = Policy.from_json(config["policy"])
    status = namespaces.probe(policy, bool(config.get("bwrap")), cpu_only, open_runtime)
    if not status.isolated and mode == "namespaces" and not config.get("bwrap"):  # (the pool retries without)
        raise RuntimeError(f"job isolation was required but is not available: {status.reason}")
    if not status.isolated:
        return Confinement(status, None, cpu_only)
    from .compile import trusted_cache

    trusted = config.get("trusted_cache")
    trusted = trusted_cache.runtime_root(trusted, info) if trusted else None
    return Confinement(status, policy, cpu_only, namespaces.JobForker(status.user_ns), trusted)
