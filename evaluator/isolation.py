"""Isolation of job processes by the operating system, the trusted side's half: every job (reference and candidate
alike) runs in Linux namespaces of its own, with a reduced environment and resource limits.

Two walls, both built from the trusted side:
- the fork server ("zygote") is started with an environment reduced to `ENV_ALLOW` (no keys, no `GEAK_*`
  markers) and, where `bwrap` (bubblewrap) is installed and works, inside a bubblewrap sandbox: the system read-only,
  empty home directories, no network, its own IPC and UTS namespaces (``bwrap_command``);
- each job process, forked from the zygote, enters namespaces of its own with unshare(2) (``job/namespaces.py``,
  under the `Policy` decided here by ``default_policy``): user, mount, PID, network, IPC and UTS. Its mount
  namespace shows the system read-only, a minimal /dev with the GPU nodes bound in, a /proc that lists only its own
  processes, empty private tmpfs over /tmp, the home directories, the caller's project and the evaluator's scratch
  root, and, writable, only its own job directory. Its capabilities are dropped (bounding set included),
  `no_new_privs` is set, and limits on processes, file size, core files (and, on the CPU interpreter, address space)
  apply. Job process = PID 1 of its namespace: when it ends, the kernel kills whatever it left running, and it
  cannot see, let alone signal, the zygote or the caller.

Where the namespaces cannot be created (an unprivileged user on a system that forbids user namespaces, a seccomp
filter), the mode is "process only" and every verdict says so; the zygote finds out once (``namespaces.probe``).
"""

from __future__ import annotations

import os
import shutil
import site
import sys
from collections.abc import Iterable

from .shared.isolation_policy import Policy, gpu_nodes, python_roots, within

# Variables a job may inherit (names, or prefixes ending in "_"). Everything else (API keys, tokens, the caller's
# GEAK_* settings, proxies, SSH agents...) is dropped before the zygote starts.
ENV_ALLOW = (
    "PATH",
    "HOME",
    "PYTHONPATH",
    "LANG",
    "LANGUAGE",
    "LC_",
    "TZ",
    "TERM",
    "LD_LIBRARY_PATH",
    "PYTHONHASHSEED",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "KMP_",
    "CUDA_",
    "CUBLAS_",
    "CUDNN_",
    "NVIDIA_",
    "NCCL_",
    "HIP_",
    "HSA_",
    "ROCR_",
    "ROCM_",
    "GPU_DEVICE_ORDINAL",
    "AMD_",
    "MIOPEN_",
    "TRITON_",
    "TORCH_",
    "PYTORCH_",
)
ENV_DENY = ("TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR")  # set per job (``confine``)

# The GPU toolkits a job's compiles use (ROCm's linker and device libraries, CUDA's ptxas), shown read-only where they
# lie in a hidden folder (a ROCm installed under the home directory).
TOOLKIT_PATHS = ("ROCM_PATH", "HIP_PATH", "CUDA_HOME", "CUDA_PATH")

# System paths hidden behind an empty private tmpfs (writable, thrown away with the job).
HIDDEN_SYSTEM = ("/home", "/root", "/run", "/var/run", "/var/tmp", "/tmp", "/mnt", "/media", "/srv")


def job_environment(environ: dict[str, str], python_home: str | None = None) -> dict[str, str]:
    """The caller's environment reduced to what GPU runtimes, BLAS and Python need (`ENV_ALLOW`); with
    `python_home` (the zygote's link to the Python environment, ``job_package``), search paths into the environment
    lead through the link."""
    allowed = {}
    for name, value in environ.items():
        if name in ENV_DENY:
            continue
        if any(name == a or (a.endswith("_") and name.startswith(a)) for a in ENV_ALLOW):
            allowed[name] = _through(value, python_home) if name in _SEARCH_PATHS else value
    return allowed


_SEARCH_PATHS = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH")


def _through(value: str, python_home: str | None) -> str:
    """A search path whose folders inside the Python environment are named through `python_home`."""
    if python_home is None:
        return value
    prefix = sys.prefix.rstrip(os.sep)
    return os.pathsep.join(
        python_home + entry[len(prefix) :] if within(entry, prefix) else entry for entry in value.split(os.pathsep)
    )


def default_policy(
    extra_hidden: Iterable[str] = (), python_home: str | None = None, shown: Iterable[str] = ()
) -> Policy:
    """Hide the system's private places, the caller's working directory (the project, unless it lies in `shown`), the
    temporary directory (every scratch directory of the evaluator) and `extra_hidden`; expose again, read-only, what
    Python needs: its installation, the folders on PYTHONPATH, and the environment (its prefix and site-packages),
    through `python_home` where the zygote starts through a link to it (``job_package``), the GPU toolkits named by
    ``TOOLKIT_PATHS``, and `shown` (a repository whose tests judge a module of it). The evaluator's own code is not
    exposed: job processes run what the zygote imported."""
    import tempfile

    repositories = [os.path.realpath(p) for p in shown]
    project = os.path.realpath(os.getcwd())
    # `geak check` run inside the repository it shows: hidden, the project could not be shown again (only folders
    # deeper than a hidden one are); it is the repository, shown read-only
    projects = [] if any(within(project, p) for p in repositories) else [project]
    candidates = [*HIDDEN_SYSTEM, os.path.expanduser("~"), tempfile.gettempdir(), *projects, *extra_hidden]
    roots = python_roots()
    hidden: list[str] = []
    for path in map(os.path.realpath, candidates):
        if path == "/" or not os.path.isdir(path) or path in hidden:
            continue
        if any(within(path, root) for root in roots):  # inside the Python install: nothing to hide
            continue
        hidden.append(path)
    hidden = [p for p in hidden if not any(p != q and within(p, q) for q in hidden)]  # outermost only
    python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    toolkits = [os.environ[name] for name in TOOLKIT_PATHS if os.environ.get(name)]
    environment = [python_home] if python_home else _environment_paths()
    needed = {*roots, *environment, *map(os.path.realpath, [*python_path, *toolkits]), *repositories}
    return Policy(tuple(hidden), _inside(needed, hidden))


def exposed_python(hidden: Iterable[str]) -> tuple[str, ...]:
    """The Python environment's folders (its prefix and site-packages, at their own paths) inside `hidden` ones:
    what a link to it reaches."""
    return _inside(_environment_paths(), tuple(hidden))


def _environment_paths() -> list[str]:
    return [os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, *site.getsitepackages())]


def _inside(paths: Iterable[str], hidden: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The outermost of `paths` that are folders inside a hidden one (what must be shown again)."""
    exposed = sorted(p for p in set(paths) if os.path.isdir(p) and any(within(p, h) and p != h for h in hidden))
    return tuple(p for p in exposed if not any(p != q and within(p, q) for q in exposed))


def bwrap_command(policy: Policy, writable: Iterable[str], env: dict[str, str]) -> list[str] | None:
    """The bubblewrap command line that starts the zygote (None when `bwrap` is not installed): the system
    read-only, `policy.hidden` empty, `writable` (the pool's and the evaluator's scratch directories) shared with the
    trusted side, the GPU nodes bound in, no network, the environment exactly `env`. PIDs and /proc stay the
    host's: the pool signals the job processes the zygote reports, and each job mounts a /proc of its own PID
    namespace (a kernel refuses that where the only /proc in sight has entries covered, as bubblewrap's own has)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    cmd = [
        bwrap,
        "--die-with-parent",
        "--unshare-user-try",
        "--unshare-ipc",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--ro-bind",
        "/",
        "/",
        "--bind",
        "/proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    for path in gpu_nodes(env):
        cmd += ["--dev-bind", path, path]
    for path in policy.hidden:
        cmd += ["--tmpfs", path]
    for path in policy.exposed:
        cmd += ["--ro-bind", path, path]
    for path in writable:
        cmd += ["--bind", path, path]
    cmd.append("--clearenv")
    for name, value in env.items():
        cmd += ["--setenv", name, value]
    return [*cmd, "--"]


def bwrap_works() -> tuple[bool, str]:
    """Whether bubblewrap can start a sandbox here (it needs user namespaces, or its setuid bit)."""
    import subprocess

    cmd = bwrap_command(Policy((), ()), (), {})
    if cmd is None:
        return False, "bwrap is not installed"
    try:
        done = subprocess.run([*cmd, "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"bwrap failed: {e}"
    if done.returncode != 0:
        return False, f"bwrap failed: {done.stderr.strip()[:300]}"
    return True, ""

