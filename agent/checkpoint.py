"""Checkpoints in GEAK's layout, so a run killed at any moment resumes without losing finished work.

* ``{stem}_mem.json``: the whole memory, rewritten atomically after every evaluated candidate (what resume reads).
* ``{stem}_mem_{round}.json`` and ``{stem}_{round}.jsonl``: snapshots at the end of each round, as GEAK writes them
  (memory, and one result line per problem: file, best code, speedup, pass flags).
No secret is ever written: the configuration is stored through ``AgentConfig.to_public_dict``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .memory import ProblemMemory

FORMAT_VERSION = 1


@dataclass(frozen=True)
class CheckpointPaths:
    root: Path
    stem: str

    @property
    def latest(self) -> Path:
        return self.root / f"{self.stem}_mem.json"

    def memory(self, round_: int) -> Path:
        return self.root / f"{self.stem}_mem_{round_}.json"

    def results(self, round_: int) -> Path:
        return self.root / f"{self.stem}_{round_}.jsonl"


def check_writable(root: Path) -> None:
    """Create `root` if needed and make sure files can be written in it; raises ValueError in one line if not."""
    if root.exists() and not root.is_dir():
        raise ValueError(f"the checkpoint folder {root} is a file, not a folder (choose another with --output)")
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as e:
        raise ValueError(f"cannot write checkpoints in {root}: {e.strerror} (choose another with --output)") from None


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def save(paths: CheckpointPaths, problems: dict[str, ProblemMemory], config: dict[str, Any], usage: dict) -> None:
    data = {
        "format": FORMAT_VERSION,
        "config": config,
        "usage": usage,
        "problems": {key: p.to_dict() for key, p in problems.items()},
    }
    _atomic_write(paths.latest, json.dumps(data, indent=1))


def snapshot(paths: CheckpointPaths, round_: int, problems: dict[str, ProblemMemory]) -> None:
    """The end-of-round files: memory and one results line per problem."""
    if paths.latest.exists():
        _atomic_write(paths.memory(round_), paths.latest.read_text())
    lines = []
    for key, problem in problems.items():
        best = problem.best()
        passing = problem.passing()
        lines.append(
            json.dumps(
                {
                    "problem": key,
                    "filename": problem.file,
                    "predict": best.code if best else None,
                    "speedup": best.evaluation.speedup if best and best.evaluation else None,
                    "call_pass": any(c.evaluation and c.evaluation.called for c in problem.candidates),
                    "exe_pass": bool(passing),
                    "candidates": len(problem.candidates),
                }
            )
        )
    _atomic_write(paths.results(round_), "\n".join(lines) + "\n")


def memory_for_results(results: Path) -> Path:
    """GEAK's `result_path` resume: `{stem}_{round}.jsonl` → the memory snapshot of that round beside it."""
    match = re.fullmatch(r"(.+)_(\d+)\.jsonl", results.name)
    if match is None:
        raise ValueError(f"result_path {results} is not a round's results file ({{stem}}_{{round}}.jsonl)")
    memory = results.with_name(f"{match.group(1)}_mem_{match.group(2)}.json")
    if not memory.exists():
        raise ValueError(f"result_path {results}: its memory snapshot {memory.name} is missing beside it")
    return memory


def load(path: Path) -> tuple[dict[str, ProblemMemory], dict[str, Any]]:
    """Problems and token usage from a memory file; raises ValueError with a clear message if unusable."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"no checkpoint at {path}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"checkpoint {path} is not valid JSON ({e})") from e
    if data.get("format") != FORMAT_VERSION:
        raise ValueError(f"checkpoint {path} has format {data.get('format')!r}, expected {FORMAT_VERSION}")
    problems = {key: ProblemMemory.from_dict(p) for key, p in data["problems"].items()}
    return problems, data.get("usage", {})
