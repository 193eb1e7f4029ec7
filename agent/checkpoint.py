"""Checkpoints, so a run killed at any moment resumes without losing finished work, and two runs never mix.

Each optimized file has its own folder, keyed by the file's full path: ``{output_path}/{stem}-{hash of the path}/``:

* ``{stem}_original.py`` and ``{stem}_original_kernel.py``: the file and its kernel section as they were, written
  once; candidates are stored as line edits of them (`code_diff`), so a big file is stored once, not per candidate;
* ``{stem}_candidates.jsonl``: append-only, a line per finished candidate (later lines carry only what changed);
* ``{stem}_mem.json``: the run's state (chains, baseline, token usage, configuration, how much of the candidates file
  is valid; no code), replaced atomically (a unique temporary file, then a rename) after every candidate;
* GEAK's ``{stem}_mem_{round}.json`` and ``{stem}_{round}.jsonl`` at the end of each round: the state then, and one
  result line per problem (file, best code, speedup, pass flags).

A run holds a lock on its folder (``{folder}.lock``, `filelock`: released by the OS if the run dies), so a second
run on the same file is refused with a clear message. A fresh run never replaces an earlier checkpoint: the earlier
folder is moved to ``{folder}.{n}`` and the move is reported. No secret is ever written: the configuration is
stored through ``AgentConfig.to_public_dict``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import filelock
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from . import code_diff
from .memory import Candidate, ChainState, Evaluation, ProblemMemory

FORMAT_VERSION = 2


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, written or locked; the message is one line."""


@dataclass(frozen=True)
class CheckpointPaths:
    root: Path  # this file's checkpoint folder
    stem: str

    @property
    def latest(self) -> Path:
        return self.root / f"{self.stem}_mem.json"

    def memory(self, round_: int) -> Path:
        return self.root / f"{self.stem}_mem_{round_}.json"

    def results(self, round_: int) -> Path:
        return self.root / f"{self.stem}_{round_}.jsonl"

    @property
    def candidates(self) -> Path:
        return self.root / f"{self.stem}_candidates.jsonl"

    @property
    def original(self) -> Path:
        return self.root / f"{self.stem}_original.py"

    @property
    def original_kernel(self) -> Path:
        return self.root / f"{self.stem}_original_kernel.py"

    @property
    def lock(self) -> Path:
        return self.root.with_name(self.root.name + ".lock")


def paths_for(output_path: str | Path, file: str | Path) -> CheckpointPaths:
    """The checkpoint of `file` under `output_path`: one folder per full path, so files that share a name (or a
    file and its copy elsewhere) never share a checkpoint."""
    resolved = Path(file).resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    return CheckpointPaths(Path(output_path) / f"{resolved.stem}-{digest}", resolved.stem)


class _Problem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str
    chains: list[ChainState]
    baseline: Evaluation | None = None
    completed_rounds: int = 0
    search_done: bool = False
    search_state: dict[str, Any] = {}


class _State(BaseModel):
    """The `{stem}_mem.json` file."""

    model_config = ConfigDict(extra="forbid")
    format: Literal[2]
    source: str
    config: dict[str, Any]
    usage: dict[str, int]
    problem: _Problem
    candidates_file: str
    candidate_bytes: int
    original_file: str
    original_kernel_file: str


_CANDIDATE = TypeAdapter(Candidate)


@dataclass
class Loaded:
    """What a checkpoint holds."""

    memory: ProblemMemory
    usage: dict[str, int]
    path: Path
    candidate_bytes: int
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # as written, without code


def load(path: Path) -> Loaded:
    """Read a `{stem}_mem.json` (or a round's `{stem}_mem_{round}.json`) with the files beside it. Raises
    `CheckpointError` naming the file and what is wrong with it."""
    state = _state(path)
    folder = path.parent
    original = _read_text(folder / state.original_file, path)
    kernel = _read_text(folder / state.original_kernel_file, path)
    records: dict[str, dict[str, Any]] = {}
    codes: dict[str, str] = {}
    for number, line in enumerate(_read_lines(folder / state.candidates_file, state.candidate_bytes, path), 1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                raise ValueError("not a candidate record")
            if "code" in record:
                edit = record.pop("code")
                codes[record["id"]] = code_diff.decode(original if edit["base"] == "file" else kernel, edit["ops"])
        except (ValueError, KeyError, TypeError) as e:
            damaged = f"line {number} of {state.candidates_file} is damaged ({e})"
            raise CheckpointError(f"checkpoint {path}: {damaged}") from None
        records[record["id"]] = {**records.get(record["id"], {}), **record}
    try:
        candidates = [_CANDIDATE.validate_python({**r, "code": codes.get(i, "")}) for i, r in records.items()]
    except ValidationError as e:
        raise CheckpointError(f"checkpoint {path}: a candidate in {state.candidates_file} is {_first(e)}") from None
    p = state.problem
    memory = ProblemMemory(
        p.file,
        kernel,
        candidates,
        p.chains,
        p.baseline,
        p.completed_rounds,
        p.search_done,
        original_text=original,
        search_state=p.search_state,
    )
    return Loaded(memory, state.usage, path, state.candidate_bytes, records)


def _state(path: Path) -> _State:
    data = _read_json(path, "checkpoint")
    if isinstance(data, dict) and data.get("format") != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path} has format {data.get('format')!r}, not {FORMAT_VERSION} (written by another GEAK "
            "version, or not a GEAK checkpoint): start afresh without --resume"
        )
    try:
        return _State.model_validate(data)
    except ValidationError as e:
        raise CheckpointError(f"{path} is not a GEAK checkpoint: {_first(e)}") from None


def memory_for_results(results: Path) -> Path:
    """GEAK's `result_path` resume: `{stem}_{round}.jsonl` → the memory snapshot of that round beside it."""
    match = re.fullmatch(r"(.+)_(\d+)\.jsonl", results.name)
    if match is None:
        raise CheckpointError(f"result_path {results} is not a round's results file ({{stem}}_{{round}}.jsonl)")
    memory = results.with_name(f"{match.group(1)}_mem_{match.group(2)}.json")
    if not memory.exists():
        raise CheckpointError(f"result_path {results}: its memory snapshot {memory.name} is missing beside it")
    return memory


class Checkpoint:
    """The checkpoint of one run of one file, locked from `open` to `close`."""

    def __init__(self, paths: CheckpointPaths, source: str | Path):
        self.paths = paths
        self.source = str(Path(source).resolve())
        self.moved_to: Path | None = None  # where an earlier checkpoint was moved by `start`
        self._lock = filelock.FileLock(paths.lock, timeout=0)
        self._written: dict[str, dict[str, Any]] = {}
        self._bytes = 0
        self._memory: ProblemMemory | None = None

    def open(self) -> None:
        """Make sure the folder can be written and lock it. Raises `CheckpointError`."""
        parent = self.paths.root.parent
        if parent.exists() and not parent.is_dir():
            raise CheckpointError(f"the checkpoint folder {parent} is a file, not a folder (choose another: --output)")
        try:
            parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=parent):
                pass
        except OSError as e:
            reason = f"{e.strerror} (choose another --output)"
            raise CheckpointError(f"cannot write checkpoints in {parent}: {reason}") from None
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise CheckpointError(
                f"another geak run is optimizing {self.source}: its checkpoint {self.paths.root} is locked "
                f"({self.paths.lock}); wait for it to finish or stop it, or use another --output"
            ) from None

    def close(self) -> None:
        self._lock.release()

    def exists(self) -> bool:
        return self.paths.latest.exists()

    def start(self, memory: ProblemMemory, loaded: Loaded | None) -> None:
        """Begin writing `memory`. Continuing this checkpoint's own latest state appends to its candidates file;
        anything else (a fresh run, a round snapshot, another folder's file) starts a new folder, after moving an
        earlier one aside (`moved_to`)."""
        self._memory = memory
        if loaded is not None and loaded.path.resolve() == self.paths.latest.resolve():
            with open(self.paths.candidates, "r+b") as f:
                f.truncate(loaded.candidate_bytes)  # drop a line half-written when the run was killed
            self._bytes = loaded.candidate_bytes
            self._written = loaded.records
            return
        if self.paths.latest.exists():
            self.moved_to = _free_name(self.paths.root)
            os.replace(self.paths.root, self.moved_to)
        elif self.paths.root.exists():  # a run stopped before its first candidate: nothing to keep
            shutil.rmtree(self.paths.root)
        self.paths.root.mkdir(parents=True)
        _atomic_write(self.paths.original, memory.original_text)
        _atomic_write(self.paths.original_kernel, memory.original_code)
        self.paths.candidates.touch()
        self._bytes, self._written = 0, {}

    def save(self, config: dict[str, Any], usage: dict[str, int]) -> None:
        """Append the candidates that are new or changed, then replace the state file. Raises `CheckpointError`."""
        memory = self._memory
        assert memory is not None, "start() first"
        lines = []
        for candidate in memory.candidates:
            record = asdict(candidate)
            code = record.pop("code")
            before = self._written.get(candidate.id)
            if before is None:
                base = "file" if candidate.origin == "search" else "kernel"
                original = memory.original_text if base == "file" else memory.original_code
                lines.append({**record, "code": {"base": base, "ops": code_diff.encode(original, code)}})
            elif record != before:
                lines.append({"id": candidate.id, **{k: v for k, v in record.items() if before.get(k) != v}})
            self._written[candidate.id] = record
        try:
            if lines:
                text = "".join(json.dumps(line) + "\n" for line in lines).encode()
                with open(self.paths.candidates, "ab") as f:
                    f.write(text)
                self._bytes += len(text)
            state = {
                "format": FORMAT_VERSION,
                "source": self.source,
                "config": config,
                "usage": usage,
                "problem": {
                    "file": memory.file,
                    "chains": [asdict(c) for c in memory.chains],
                    "baseline": asdict(memory.baseline) if memory.baseline else None,
                    "completed_rounds": memory.completed_rounds,
                    "search_done": memory.search_done,
                    "search_state": memory.search_state,
                },
                "candidates_file": self.paths.candidates.name,
                "candidate_bytes": self._bytes,
                "original_file": self.paths.original.name,
                "original_kernel_file": self.paths.original_kernel.name,
            }
            _atomic_write(self.paths.latest, json.dumps(state, indent=1))
        except OSError as e:
            raise CheckpointError(f"cannot write the checkpoint {self.paths.latest}: {e.strerror}") from None

    def snapshot(self, round_: int) -> None:
        """The end-of-round files: the state, and one results line (GEAK's format)."""
        memory = self._memory
        assert memory is not None, "start() first"
        best = memory.best()
        line = {
            "problem": memory.file,
            "filename": memory.file,
            "predict": best.code if best else None,
            "speedup": best.evaluation.speedup if best and best.evaluation else None,
            "call_pass": any(c.evaluation and c.evaluation.called for c in memory.candidates),
            "exe_pass": bool(memory.passing()),
            "candidates": len(memory.candidates),
        }
        try:
            _atomic_write(self.paths.memory(round_), self.paths.latest.read_text())
            _atomic_write(self.paths.results(round_), json.dumps(line) + "\n")
        except OSError as e:
            raise CheckpointError(f"cannot write the round {round_} files in {self.paths.root}: {e.strerror}") from None


def _atomic_write(path: Path, text: str) -> None:
    """Write `path` through a unique temporary file beside it, renamed over it: readers see the old or the new."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _free_name(folder: Path) -> Path:
    n = 1
    while folder.with_name(f"{folder.name}.{n}").exists():
        n += 1
    return folder.with_name(f"{folder.name}.{n}")


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"no {what} at {path}") from None
    except IsADirectoryError:
        raise CheckpointError(f"{what} {path} is a folder, not a file") from None
    except OSError as e:
        raise CheckpointError(f"cannot read the {what} {path}: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{what} {path} is not valid JSON ({e})") from None


def _read_text(path: Path, checkpoint: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError(f"checkpoint {checkpoint}: cannot read {path.name} beside it ({e})") from None


def _read_lines(path: Path, size: int, checkpoint: Path) -> list[str]:
    try:
        with open(path, "rb") as f:
            data = f.read(size)
    except OSError as e:
        raise CheckpointError(f"checkpoint {checkpoint}: cannot read {path.name} beside it ({e.strerror})") from None
    if len(data) < size:
        raise CheckpointError(f"checkpoint {checkpoint}: {path.name} is shorter than recorded (truncated?)")
    return data.decode("utf-8").splitlines()


def _first(e: ValidationError) -> str:
    err = e.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"]) or "the top level"
    more = f" (and {e.error_count() - 1} more problem(s))" if e.error_count() > 1 else ""
    return f"{where}: {err['msg']}{more}"
