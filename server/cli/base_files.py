"""Which files a `--base REV` or `--changed` command compares, and their versions at the base: the command-line side
of ``base_revision`` (git), whose errors are bad input here (exit 2, one line each)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geak.evaluator import looks_like_triton

from ..base_revision import Base, BaseVersion, RevisionError, changed_since, repository_root, resolve, version_at
from .check_many import triton_files
from .exits import CommandError

DEFAULT_BASE = "HEAD"


@dataclass(frozen=True)
class BaseSelection:
    """The resolved base and the files to compare with it, each with its version there."""

    base: Base
    versions: list[BaseVersion]


def selected(paths: list[str], rev: str | None, *, changed: bool) -> BaseSelection:
    """The Triton files of `paths` (files, and those in folders), or with `changed` the Triton files changed since
    the base (in the whole repository, or under `paths`' folders; a file named is taken as it is), with their
    versions at `rev` (default HEAD). One repository: that of the first path, else of the working directory."""
    for raw in paths:
        if not Path(raw).exists():
            raise CommandError(f"{raw}: no such file or folder")
    try:
        root = repository_root(Path(paths[0]) if paths else Path.cwd())
        base = resolve(root, rev or DEFAULT_BASE)
        files = _changed(base, [Path(p) for p in paths]) if changed else triton_files(paths)
        return BaseSelection(base, [version_at(base, f) for f in files])
    except RevisionError as e:
        raise CommandError(str(e)) from None


def only_version(selection: BaseSelection) -> BaseVersion:
    """The one file of a single-file comparison; one that did not exist at the base is bad input."""
    (version,) = selection.versions
    if version.text is None:
        raise CommandError(f"{version.file} is not in {selection.base.name} (new since then): nothing to compare it "
                           "with (check it without --base)")  # fmt: skip
    return version


def _changed(base: Base, paths: list[Path]) -> list[Path]:
    """Triton files changed since `base`: under the folders named (all of the repository where none is), and each
    file named that is a Triton file (a pre-commit hook names the staged files, Python or not)."""
    folders = [p for p in paths if p.is_dir()]
    named = [p for p in paths if not p.is_dir()]
    found = changed_since(base, folders) if folders or not named else []
    candidates = [*named, *(f for f in found if f.suffix == ".py")]
    return [f for f in dict.fromkeys(candidates) if looks_like_triton(f)]
