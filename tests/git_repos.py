"""Real git repositories made in a test, and a tiny Triton file to commit in them.

`new_repo(path)` makes a repository with its own identity (no user or global git settings needed); `scale_file`
writes a kernel whose test checks only its output's shape, so that only a comparison with another version of it can
tell what it computes."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

SCALE = '''"""Scales a vector; its test checks only the shape of the output."""
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, {expr}, mask=mask)


def scale(x):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)
    return out


def test_scale():
    x = torch.randn(100, device="cuda")
    out = scale(x)
    assert out.shape == x.shape{check}
    return out
'''


def scale_file(expr: str = "x * 2.0", check: str = "") -> str:
    """The kernel's text, storing `expr`; `check` is appended to the test's assertion line."""
    return SCALE.format(expr=expr, check=check)


@dataclass(frozen=True)
class Repo:
    root: Path

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=self.root, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
        return done.stdout.strip()

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def commit(self, message: str = "a commit") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


def new_repo(path: Path) -> Repo:
    path.mkdir(parents=True, exist_ok=True)
    repo = Repo(path)
    repo.git("init", "-q", "-b", "main")
    for key, value in (("user.name", "GEAK tests"), ("user.email", "tests@geak.invalid"), ("commit.gpgsign", "false")):
        repo.git("config", key, value)
    return repo
