"""GEAK's dataloader interface as a typed protocol, and the problem state every loader produces.

A dataloader describes a benchmark suite: one `ProblemState` per problem (the task's instruction, the file name,
the golden code and its test), loads earlier results (`load_ps`), writes results (`write_file`) and can score one
piece of code (`test_opt_correctness`). GEAK's batch runner (`geak run`) and scorer (`geak eval`) check candidates
against each problem's *reference file* (`reference_text`): the golden code with its test section. Any class that
has these members plugs in by `dataloader: "package.module:Class"` in the run configuration.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from geak.evaluator import SEPARATOR


@dataclass
class ProblemState:
    """One problem of a suite, plus GEAK's result fields (`solution`, pass flags, `speedup`) once it is solved.

    `path`: the golden file (kernel code, the 146-`#` separator, the test). Without it the reference is composed
    from `label` (golden code) and `test_code`."""

    instruction: str
    filename: str
    label: str | None = None
    test_code: str | None = None
    difficulty: str | None = None
    target_kernel_name: str | None = None
    path: str | None = None
    solution: str | None = None
    pass_call: bool = False
    pass_exe: bool = False
    speedup: float | None = None

    @property
    def key(self) -> str:
        """The problem's identity in results and checkpoints: its file name."""
        return self.filename

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemState:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


class ProblemError(ValueError):
    """A problem that cannot be run or scored (no reference, an unreadable golden file)."""


def reference_text(ps: ProblemState) -> str:
    """The reference file of a problem: the golden file itself, else `label` + separator + `test_code`."""
    if ps.path:
        try:
            return Path(ps.path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ProblemError(f"{ps.filename}: cannot read the golden file {ps.path} ({e})") from e
    if ps.label and ps.test_code:
        return f"{ps.label.rstrip()}\n\n{SEPARATOR}\n{ps.test_code.lstrip(chr(10))}"
    raise ProblemError(
        f"{ps.filename}: no reference to check against: the problem state needs `path` (a golden file) "
        "or both `label` (golden code) and `test_code`"
    )


@runtime_checkable
class Dataloader(Protocol):
    """GEAK's dataloader interface (the members its agents use)."""

    problem_states: list[ProblemState]

    def __len__(self) -> int: ...

    def load_ps(self, path: str | Path | None) -> list[ProblemState]:
        """The suite's problems (`path` None), or the problem states of a results JSONL file (with `solution`)."""
        ...

    def test_opt_correctness(
        self, code: str, filename: str, tmp_dir: str, exe_dir: str = "pass_exe"
    ) -> tuple[bool, bool, float | None, str, str]:
        """Score one piece of code for problem `filename`: (pass_call, pass_exe, speedup, stdout, stderr)."""
        ...

    def write_file(self, path: str | Path) -> None:
        """Write the problem states (with their results) as GEAK's JSONL."""
        ...


class DataloaderError(ValueError):
    """A dataloader that cannot be found, built or used; the message says which and why."""


def load_dataloader(spec: str, kwargs: dict[str, Any] | None = None) -> Dataloader:
    """Build a user's dataloader from "package.module:Class" with keyword arguments `kwargs`."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise DataloaderError(f"dataloader {spec!r}: write it as 'package.module:ClassName'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise DataloaderError(f"dataloader {spec!r}: cannot import {module_name} ({e})") from e
    cls = getattr(module, attr, None)
    if cls is None or not inspect.isclass(cls):
        raise DataloaderError(f"dataloader {spec!r}: {module_name} has no class {attr}")
    try:
        loader = cls(**(kwargs or {}))
    except Exception as e:  # the user's constructor: any failure is a configuration problem
        raise DataloaderError(f"dataloader {spec!r}: {attr}(**dataloader_args) failed: {e}") from e
    missing = [
        m
        for m in ("problem_states", "__len__", "load_ps", "test_opt_correctness", "write_file")
        if not hasattr(loader, m)
    ]
    if missing:
        lacks = ", ".join(missing)
        raise DataloaderError(f"dataloader {spec!r}: {attr} lacks {lacks} (see geak.agent.batch.dataloaders)")
    for i, ps in enumerate(loader.problem_states):
        if not isinstance(ps, ProblemState):
            raise DataloaderError(
                f"dataloader {spec!r}: problem_states[{i}] is a {type(ps).__name__}, not a "
                "geak.agent.batch.dataloaders.ProblemState"
            )
    return loader
