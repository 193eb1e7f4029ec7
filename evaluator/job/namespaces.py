"""Isolation of job processes by the operating system, the zygote's half: each job process, forked from the fork
server, enters Linux namespaces of its own with unshare(2) (``confine``) under the `Policy` the trusted side decided
(``evaluator/isolation.py``, which also builds the first wall: the zygote's reduced environment and bubblewrap).

User, mount, PID, network, IPC and UTS namespaces: the job's mount namespace shows the system read-only, a minimal
/dev with the GPU nodes bound in, a /proc that lists only its own processes, empty private tmpfs over /tmp, the home
directories, the caller's project and the evaluator's scratch root, and, writable, only its own job directory. Its
capabilities are dropped (bounding set included), `no_new_privs` is set, and limits on processes, file size, core
files (and, on the CPU interpreter, address space) apply. Job process = PID 1 of its namespace: when it ends, the
kernel kills whatever it left running, and it cannot see, let alone signal, the zygote or the caller.

Where the namespaces cannot be created (an unprivileged user on a system that forbids user namespaces, a seccomp
filter), the mode is "process only" and every verdict says so; ``probe`` finds out once per zygote.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import resource
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..shared.isolation_policy import PROCESS_ONLY, Policy, gpu_nodes, python_roots, within
from .compile.trusted_cache import JOB_CACHE

DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")

TMPFS_SIZE = "size=1g"  # each private tmpfs (/tmp, /dev/shm, the hidden directories): memory, used only when written
MAX_PROCESSES = 4096  # threads count too (torch starts one per core)
MAX_FILE_BYTES = 16 << 30
CPU_ADDRESS_SPACE = 32 << 30  # interpreter only: CUDA reserves far more virtual memory than it uses

# Linux constants (x86-64 and arm64 agree on these).
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
O_PATH = getattr(os, "O_PATH", 0o10000000)
_FLAG_OF_OPTION = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}


class IsolationError(RuntimeError):
    """The namespaces of a job could not be set up."""


@dataclass
class Status:
    """The mechanism in force in a zygote: "bwrap + namespaces", "namespaces" or "process only" (with why)."""

    mechanism: str
    reason: str = ""
    user_ns: bool = True  # jobs get a user namespace too (see ``probe``)

    @property
    def isolated(self) -> bool:
        return self.mechanism != PROCESS_ONLY


def probe(policy: Policy, under_bwrap: bool, cpu_only: bool, inside: Callable[[], Any] = lambda: None) -> Status:
    """Find the way to confine jobs that works here, in throw-away forked processes (the zygote itself must stay
    in its namespaces), running `inside` in the sandbox (opening the GPU: are its device nodes bound in?). With
    CAP_SYS_ADMIN (root, outside bubblewrap) the namespaces are made without a user namespace: a fresh /proc can
    then be mounted even where the host's /proc has masked entries (containers); else with one."""
    import tempfile

    failures = []
    for user_ns in (False, True) if _has_sys_admin() else (True,):
        scratch = tempfile.mkdtemp(dir=os.getcwd())
        forker = JobForker(user_ns)
        answer = _in_probe_process(lambda: _probe_once(policy, scratch, cpu_only, user_ns, inside), forker)  # noqa: B023
        forker.close()
        shutil.rmtree(scratch, ignore_errors=True)
        if answer == "ok":
            return Status("bwrap + namespaces" if under_bwrap else "namespaces", user_ns=user_ns)
        failures.append(answer)
    return Status(PROCESS_ONLY, failures[-1])


class JobForker:
    """Forks job processes. Without a user namespace (CAP_SYS_ADMIN), each job process is created as PID 1 of a
    PID namespace of its own (unshare(CLONE_NEWPID) just before the fork, setns back just after), which spares
    ``confine`` a second fork of the large zygote: half the cost of isolation."""

    def __init__(self, user_ns: bool):
        self._own_pid_ns = None if user_ns else os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        if self._own_pid_ns is not None:
            try:  # a no-op now; refused where the PID namespace belongs to a more privileged user (bubblewrap)
                self._restore()
            except OSError:
                self.close()

    def fork(self, fork: Callable[[], int]) -> int:
        if self._own_pid_ns is None:
            return fork()
        _unshare(CLONE_NEWPID)
        try:
            pid = fork()
        except BaseException:
            self._restore()
            raise
        if pid == 0:
            os.close(self._own_pid_ns)
        else:
            self._restore()
        return pid

    def _restore(self) -> None:
        """Children forked from now on are in this process's own PID namespace again."""
        _check(_libc().setns(self._own_pid_ns, CLONE_NEWPID), "setns")

    def close(self) -> None:
        if self._own_pid_ns is not None:
            os.close(self._own_pid_ns)
            self._own_pid_ns = None


def _probe_once(policy: Policy, scratch: str, cpu_only: bool, user_ns: bool, inside: Callable[[], Any]) -> None:
    confine(policy, scratch, cpu_only, user_ns)
    _check_confined(scratch)
    inside()


def _in_probe_process(fn: Callable[[], None], forker: JobForker) -> str:
    """'ok', or why `fn` failed in a process forked as jobs are."""
    read_fd, write_fd = os.pipe()
    try:
        pid = forker.fork(os.fork)
    except OSError as e:
        return f"forking into a new PID namespace failed: {e}"
    if pid == 0:
        code = 1
        try:
            os.close(read_fd)
            try:
                fn()
                os.write(write_fd, b"ok")
            except BaseException as e:
                os.write(write_fd, f"{type(e).__name__}: {e}".encode()[:1000])
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        answer = pipe.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return answer or "the probe process died"


def _has_sys_admin() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 21))  # CAP_SYS_ADMIN
    return False


def _check_confined(scratch: str) -> None:
    """In the probe: what the job would see matches the policy."""
    if os.getpid() != 1:
        raise IsolationError(f"not alone in its PID namespace (pid {os.getpid()})")
    if any(name != "lo" for _, name in socket_interfaces()):
        raise IsolationError("network interfaces other than lo are visible")
    Path(scratch, "probe").write_text("ok")


def socket_interfaces() -> list[tuple[int, str]]:
    import socket

    return socket.if_nameindex()


def confine(policy: Policy, scratch: str, cpu_only: bool, user_ns: bool) -> None:
    """Called in a freshly forked (single-threaded) job process: move it into namespaces of its own where only
    `scratch` is writable. Unless ``JobForker`` made it PID 1 of a PID namespace already, it forks: the parent
    stays outside as the job's supervisor and exits with the job's status (never returns), the child (PID 1 of the
    new PID namespace) returns and runs the job. `cpu_only`: limit
    the address space too (never on a GPU: its runtime reserves huge virtual ranges). `user_ns`: in a user
    namespace of its own (needed without CAP_SYS_ADMIN), mapped to the caller's user and group."""
    uid, gid = os.getuid(), os.getgid()
    scratch = os.path.realpath(scratch)
    already_pid_1 = os.getpid() == 1  # forked by ``JobForker`` into a PID namespace of its own
    pid_ns = 0 if already_pid_1 else CLONE_NEWPID
    _unshare(CLONE_NEWNS | pid_ns | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | (CLONE_NEWUSER if user_ns else 0))
    if user_ns:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    writable = _build_view(policy, scratch)
    _make_read_only(keep_writable=writable)
    if not already_pid_1:
        pid = os.fork()
        if pid:
            _supervise(pid)
    # If the supervisor is already gone, this process was handed to the zygote, which kills what a job leaves.
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _limit_resources(cpu_only)
    _drop_capabilities()
    os.environ.update(TMPDIR="/tmp", TRITON_CACHE_DIR=os.path.join(scratch, JOB_CACHE))
    os.chdir(scratch)


def _supervise(pid: int) -> None:
    """The job's parent, outside its namespaces: wait for it and end the same way (exit status or signal)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _build_view(policy: Policy, scratch: str) -> set[str]:
    """Mount the job's view; returns the mount points that stay writable."""
    keep = {}  # path -> O_PATH fd opened before anything is covered
    for path in (*policy.exposed, scratch):
        keep[path] = os.open(path, O_PATH | os.O_CLOEXEC)
    devices = {}
    for path in [*(f"/dev/{n}" for n in DEV_NODES), *gpu_nodes()]:
        with contextlib.suppress(OSError):
            devices[path] = os.open(path, O_PATH | os.O_CLOEXEC)
    writable = {"/tmp", "/dev/shm", scratch}

    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755," + TMPFS_SIZE)
    for path, fd in devices.items():
        _bind_from_fd(fd, path)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ):
        with contextlib.suppress(FileExistsError):
            os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/shm", 0o1777)
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777," + TMPFS_SIZE)

    hidden = list(policy.hidden)
    siblings = os.path.dirname(scratch)  # other jobs' directories, wherever the caller put them
    if not any(within(siblings, h) for h in hidden) and not any(within(r, siblings) for r in python_roots()):
        hidden.append(siblings)
    for path in hidden:
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777," + TMPFS_SIZE)
        writable.add(path)
    if "/tmp" not in hidden:
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777," + TMPFS_SIZE)
    for path, fd in keep.items():
        _bind_from_fd(fd, path)
    for fd in [*keep.values(), *devices.values()]:
        os.close(fd)
    return writable


def _bind_from_fd(fd: int, target: str) -> None:
    """Bind what `fd` (O_PATH, opened before the covering mounts) points at onto `target`, creating the target."""
    source = f"/proc/self/fd/{fd}"
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    _mount(source, target, None, MS_BIND | MS_REC)


def _make_read_only(keep_writable: set[str]) -> None:
    """Remount every mount point read-only except `keep_writable` and /proc (replaced by the job's own), keeping
    the flags the kernel locks (nosuid, nodev, noexec, atime)."""
    for mount_point, options in _mounts():
        if mount_point in keep_writable or within(mount_point, "/proc"):
            continue
        if "ro" in options and mount_point != "/":
            continue
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        for option in options:
            flags |= _FLAG_OF_OPTION.get(option, 0)
        if not flags & (MS_NOATIME | MS_RELATIME):
            flags |= MS_STRICTATIME
        try:
            _mount(None, mount_point, None, flags)
        except OSError as e:
            # Covered by a later mount (its path now leads elsewhere): out of sight.
            if e.errno in (errno.ENOENT, errno.EACCES) or (
                e.errno == errno.EINVAL and not os.path.ismount(mount_point)
            ):
                continue
            raise


def _mounts() -> list[tuple[str, set[str]]]:
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[4])
        mounts.append((point, set(parts[5].split(","))))
    return mounts


def _limit_resources(cpu_only: bool) -> None:
    limits = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, MAX_PROCESSES),
        (resource.RLIMIT_FSIZE, MAX_FILE_BYTES),
    ]
    if cpu_only:
        limits.append((resource.RLIMIT_AS, CPU_ADDRESS_SPACE))
    for kind, value in limits:
        soft, hard = resource.getrlimit(kind)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        if soft == resource.RLIM_INFINITY or soft > cap:
            resource.setrlimit(kind, (cap, cap))


def _drop_capabilities() -> None:
    """No capability left, none to regain by exec (bounding set emptied, no_new_privs)."""
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two Data structs
    data = (Data * 2)()
    if _libc().capset(ctypes.byref(header), data) != 0:
        raise IsolationError(f"capset: {os.strerror(ctypes.get_errno())}")


# ------------------------------------------------------------------------------------------ syscalls


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _unshare(flags: int) -> None:
    _check(_libc().unshare(flags), "unshare")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None
    _check(_libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _prctl(option: int, value: int) -> None:
    _check(_libc().prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl {option}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
