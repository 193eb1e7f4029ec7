"""A file as it is at a git revision (the base a check compares with), read through git's plumbing.

Git runs as a program, never through a shell, and only ever reads: a revision is resolved with
``git rev-parse --verify --end-of-options REV^{commit}`` after names that could be taken for an option are refused, a
file's text at it comes from ``git cat-file``, and paths go to git as literal pathspecs. Nothing here imports or runs
the text it reads: the base version is code under test, which only the evaluator's jobs run. The command line and the
language server both use this module (they import nothing of each other).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from geak.evaluator import parse_python

GIT_TIMEOUT_S = 60.0  # a read of local objects; a git that takes longer waits on something (a network filesystem)
# No credential prompt (nothing here reaches a remote, but a hook or alias must not hang a command on one), and no
# index refresh written behind the user's back (``git diff`` would otherwise take the index lock).
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}


class RevisionError(Exception):
    """A base cannot be read: git is missing, not a repository, an unknown revision, a file outside the repository.
    The message is one line."""


@dataclass(frozen=True)
class Base:
    """A revision resolved in a repository: `rev` as the user named it, `commit` its full hash."""

    root: Path  # the top of the working tree (a linked worktree's own)
    rev: str
    commit: str

    @property
    def name(self) -> str:
        """`HEAD (1a2b3c4)`: how messages name the base."""
        return f"{self.rev} ({self.commit[:7]})" if self.rev != self.commit else self.commit[:12]

    def to_dict(self) -> dict[str, str]:
        return {"rev": self.rev, "commit": self.commit, "root": str(self.root)}


@dataclass(frozen=True)
class BaseVersion:
    """A working-tree file and its version at a base. `path` is where it was there, relative to the repository's top
    (another path where the file was renamed since); `text` is None where the file did not exist there."""

    file: Path
    path: str
    text: str | None
    renamed: bool = False

    def label(self, base: Base) -> str:
        """`HEAD:kernels/add.py`: the base version's name in messages (git's own `REV:path` syntax)."""
        return f"{base.rev}:{self.path}"


def repository_root(start: Path) -> Path:
    """The top of the git working tree holding `start` (a file or a folder)."""
    folder = start if start.is_dir() else start.parent
    if not folder.is_dir():
        raise RevisionError(f"{start}: no such file or folder")
    found = _git(folder, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise RevisionError(f"{start} is not in a git repository ({_said(found)})")
    return Path(os.fsdecode(found.stdout).strip())


def resolve(root: Path, rev: str) -> Base:
    """`rev` (HEAD, HEAD~3, a branch, a tag, a commit...) as a commit of the repository at `root`."""
    if not rev or rev.startswith("-") or any(ord(c) < 32 or c == "\x7f" for c in rev):
        raise RevisionError(f"{rev!r} is not a revision")
    found = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if found.returncode != 0:
        hint = ""
        if _git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == b"true":
            hint = " (a shallow clone: its history may not reach it; `git fetch --unshallow` fetches the rest)"
        elif _git(root, "rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
            hint = " (the repository has no commit yet)"
        raise RevisionError(f"unknown revision {rev!r} in {root}{hint}")
    return Base(root, rev, found.stdout.decode().strip())


def version_at(base: Base, file: Path) -> BaseVersion:
    """`file`'s version at `base`: at the same path, else where git sees it renamed from (a rename staged or
    committed since: ``git diff --find-renames``), else none (`text` None: new since the base)."""
    path = relative_path(base.root, file)
    text = _blob(base, path)
    if text is not None:
        return BaseVersion(file, path, text)
    renamed_from = _renames(base).get(path)
    if renamed_from is not None and (text := _blob(base, renamed_from)) is not None:
        return BaseVersion(file, renamed_from, text, renamed=True)
    return BaseVersion(file, path, None)


def changed_since(base: Base, under: list[Path] | None = None) -> list[Path]:
    """The files of the working tree that differ from `base` (committed since, staged, unstaged, or untracked and
    not ignored), those under `under` where given; files deleted since are not among them."""
    specs = ["--", *(relative_path(base.root, p) for p in under)] if under else []
    tracked = _git(base.root, "--literal-pathspecs", "diff", "--name-only", "-z", "--no-renames", base.commit, *specs)
    untracked = _git(base.root, "--literal-pathspecs", "ls-files", "-z", "--others", "--exclude-standard", *specs)
    for found in (tracked, untracked):
        if found.returncode != 0:
            raise RevisionError(f"git cannot list the files changed since {base.name}: {_said(found)}")
    names = [n for out in (tracked.stdout, untracked.stdout) for n in os.fsdecode(out).split("\0") if n]
    files = (base.root / name for name in dict.fromkeys(names))
    return sorted(f for f in files if f.is_file())


def relative_path(root: Path, file: Path) -> str:
    """`file`'s path from the top of the working tree, as git names it (POSIX); its folder's symbolic links are
    followed as git follows them, the file's own name is kept."""
    absolute = Path(os.path.abspath(file))
    try:
        return absolute.parent.resolve().joinpath(absolute.name).relative_to(root.resolve()).as_posix()
    except ValueError:
        raise RevisionError(f"{file} is not in the repository at {root}") from None


def same_code(a: str, b: str) -> bool:
    """Do two Python texts say the same, white space and comments aside (equal syntax trees)? A text that does not
    parse is the same only as itself."""
    if a == b:
        return True
    try:
        return _tree(a) == _tree(b)
    except (SyntaxError, ValueError):
        return False


def _tree(text: str) -> str:
    import ast

    return ast.dump(parse_python(text))


def _blob(base: Base, path: str) -> str | None:
    """The text of `path` at `base`, None where it is not a file there."""
    kind = _git(base.root, "cat-file", "-t", f"{base.commit}:{path}")
    if kind.returncode != 0 or kind.stdout.strip() != b"blob":
        return None
    found = _git(base.root, "cat-file", "blob", f"{base.commit}:{path}")
    if found.returncode != 0:
        raise RevisionError(f"git cannot read {base.rev}:{path}: {_said(found)}")
    # Not UTF-8: its bytes replaced, the base then fails to parse and is said unusable, as any other broken base.
    return found.stdout.decode("utf-8-sig", errors="replace")


def _renames(base: Base) -> dict[str, str]:
    """New path → old path, for the renames git detects between `base` and the working tree's tracked files."""
    found = _git(base.root, "diff", "--find-renames", "--name-status", "-z", base.commit)
    if found.returncode != 0:
        raise RevisionError(f"git cannot compare the working tree with {base.name}: {_said(found)}")
    fields = os.fsdecode(found.stdout).split("\0")
    renames, i = {}, 0
    while i < len(fields) and fields[i]:
        status = fields[i]
        if status[0] in "RC":  # R<score> old new
            renames[fields[i + 2]] = fields[i + 1]
            i += 3
        else:
            i += 2
    return renames


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            env={**os.environ, **GIT_ENV},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise RevisionError("git is not installed: a base revision is read with it") from None
    except subprocess.TimeoutExpired:
        raise RevisionError(f"git {args[0]} took longer than {GIT_TIMEOUT_S:.0f} s in {cwd}") from None


def _said(found: subprocess.CompletedProcess[bytes]) -> str:
    """Git's own reason, its last line (`fatal: ...`)."""
    lines = [line.strip() for line in found.stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].removeprefix("fatal: ") if lines else f"git exited with {found.returncode}"
