"""What the built-in loaders share: problems backed by golden files, GEAK's results JSONL in and out, matching a
prediction to its problem (by file name, instruction or golden code), and GEAK's `test_opt_correctness`."""

from __future__ import annotations

import asyncio
import functools
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from geak.evaluator import SEPARATOR, EvalOptions, Evaluator

from .problem import ProblemError, ProblemState, reference_text
from .scoring import Score, reference_file, score_code

CHAT_END_TOKENS = ("<|im_end|>", "<|EOT|>")


class SuiteError(ValueError):
    """A suite folder or instruction file that cannot be read; the message names the path."""


def normalized(text: str | None) -> str:
    """Text compared for matching: chat end tokens removed, white space collapsed."""
    if not text:
        return ""
    for token in CHAT_END_TOKENS:
        text = text.replace(token, "")
    return re.sub(r"\s+", " ", text).strip()


def read_json_list(path: Path, what: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(f"{what} {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SuiteError(f"{what} {path}: not readable JSON ({e})") from e
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise SuiteError(f"{what} {path}: expected a JSON list of objects")
    return data


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) per non-blank line; a line that is not a JSON object raises SuiteError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SuiteError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SuiteError(f"{path}: not readable ({e})") from e
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise SuiteError(f"{path}:{number}: not valid JSON ({e.msg})") from e
        if not isinstance(row, dict):
            raise SuiteError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        rows.append((number, row))
    return rows


class GoldenFileSuite:
    """Base of the built-in loaders: golden files in a folder (`folder` under the suite folder) and a JSON list of
    instructions (`instructions`). Subclasses turn each listed item with a golden file into a problem
    (`_problem`) and may add instruction variants to match (`_instructions`)."""

    suite = "suite"
    folder = ""  # the golden files' folder inside the suite folder
    instructions = ""  # the instruction JSON inside the suite folder

    def __init__(
        self,
        data_path: str | Path | None = None,
        *,
        py_folder: str | Path | None = None,
        instruction_path: str | Path | None = None,
    ):
        """`data_path` is the suite folder; `py_folder` and `instruction_path` override either part."""
        if data_path is None and (py_folder is None or instruction_path is None):
            raise SuiteError(f"{self.suite}: give data_path (the suite folder), or py_folder and instruction_path")
        root = Path(data_path).expanduser() if data_path is not None else None
        self.py_folder = Path(py_folder if py_folder is not None else root / self.folder).expanduser()
        self.instruction_path = Path(
            instruction_path if instruction_path is not None else root / self.instructions
        ).expanduser()
        if not self.py_folder.is_dir():
            raise SuiteError(f"{self.suite} golden files: {self.py_folder} is not a folder")
        self.skipped: list[str] = []  # instruction entries without a golden file, or the reverse
        self.unmatched: list[str] = []  # lines of the last load_ps(path) that matched no problem
        self.problem_states: list[ProblemState] = self._load_suite()
        if not self.problem_states:
            raise SuiteError(f"{self.suite}: no problem found in {self.py_folder} with {self.instruction_path}")
        self._by_file = {ps.filename: ps for ps in self.problem_states}

    def _load_suite(self) -> list[ProblemState]:
        states = []
        for item in read_json_list(self.instruction_path, f"{self.suite} instructions"):
            name = str(item.get("file", ""))
            path = self.py_folder / name
            if not name or not path.is_file():
                self.skipped.append(f"{name or '(no file)'}: no golden file in {self.py_folder}")
                continue
            _, test_code = split_golden(path)
            states.append(self._problem(item, name, path, test_code))
        listed = {ps.filename for ps in states}
        self.skipped += [
            f"{p.name}: not in {self.instruction_path.name}"
            for p in sorted(self.py_folder.glob("*.py"))
            if p.name not in listed
        ]
        return states

    def _problem(self, item: dict[str, Any], name: str, path: Path, test_code: str) -> ProblemState:
        raise NotImplementedError

    def _instructions(self, ps: ProblemState) -> list[str]:
        return [ps.instruction]

    def __len__(self) -> int:
        return len(self.problem_states)

    # ------------------------------------------------------------------------------------------ matching

    def find(
        self, *, filename: str | None = None, instruction: str | None = None, label: str | None = None
    ) -> ProblemState | None:
        """The problem a prediction belongs to: by file name, else by instruction (equal, or contained in a longer
        prompt), else by golden code (equal, or at least 80% of it contained in it, as GEAK matches)."""
        if filename:
            found = self._by_file.get(Path(filename).name)
            if found is not None:
                return found
        wanted = normalized(instruction)
        if wanted:
            for ps, instructions, _ in self._matching:
                if wanted in instructions:
                    return ps
            inside = [(len(t), ps) for ps, instructions, _ in self._matching for t in instructions if t in wanted]
            if inside:
                return max(inside, key=lambda pair: pair[0])[1]
        code = normalized(label)
        if code:
            for ps, _, golden in self._matching:
                if golden == code:
                    return ps
            for ps, _, golden in self._matching:  # GEAK's rule (the code inside the golden one), near-whole code only
                if golden and len(code) >= 0.8 * len(golden) and code in golden:
                    return ps
        return None

    @functools.cached_property
    def _matching(self) -> list[tuple[ProblemState, tuple[str, ...], str]]:
        """Each problem with its instructions and golden code as `find` compares them (`normalized`; empty
        instructions left out), made once: a predictions file matched line by line would otherwise normalize every
        problem's texts again for each line."""
        return [
            (ps, tuple(t for t in map(normalized, self._instructions(ps)) if t), normalized(ps.label))
            for ps in self.problem_states
        ]

    # ------------------------------------------------------------------------------------------ GEAK's interface

    def load_ps(self, path: str | Path | None = None) -> list[ProblemState]:
        """The suite's problems (`path` None), or one problem state per line of a results/predictions JSONL file
        (GEAK's own: `filename` + `predict`; TritonBench's: `instruction`, `predict`, `label`) with `solution` set.
        Lines that match no problem are listed in `unmatched`."""
        if path is None:
            return list(self.problem_states)
        self.unmatched = []
        states = []
        for number, row in read_jsonl(Path(path)):
            ps = self.find(
                filename=row.get("filename") or row.get("file"),
                instruction=row.get("instruction"),
                label=row.get("label"),
            )
            if ps is None:
                self.unmatched.append(
                    f"{path}:{number}: matches no problem of {self.suite} by file, instruction or label"
                )
                continue
            predict = row.get("predict")
            if predict is not None and not isinstance(predict, str):
                self.unmatched.append(f"{path}:{number}: `predict` is not a string")
                continue
            speedup = row.get("speedup")
            states.append(
                replace(
                    ps,
                    solution=predict,
                    pass_call=bool(row.get("pass_call", row.get("call_pass", False))),
                    pass_exe=bool(row.get("pass_exe", row.get("exe_pass", False))),
                    speedup=float(speedup) if isinstance(speedup, (int, float)) else None,
                )
            )
        return states

    def write_file(self, path: str | Path) -> None:
        """GEAK's results JSONL: instruction, label, filename, test_code, predict, speedup (+ pass flags)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as out:
            for ps in self.problem_states:
                out.write(json.dumps(results_line(ps)) + "\n")

    def test_opt_correctness(
        self, code: str, filename: str, tmp_dir: str, exe_dir: str = "pass_exe"
    ) -> tuple[bool, bool, float | None, str, str]:
        """GEAK's scorer, synchronous (call it outside a running event loop): the code goes to `tmp_dir`, is
        checked against the golden file in a fresh evaluator, and a passing file is saved in `exe_dir`."""
        ps = self.find(filename=filename)
        if ps is None:
            raise ProblemError(f"{self.suite} has no problem {filename!r}")
        Path(tmp_dir).mkdir(parents=True, exist_ok=True)
        (Path(tmp_dir) / Path(filename).name).write_text(code)
        score = asyncio.run(_score_once(ps, code, Path(tmp_dir)))
        if score.pass_exe:
            Path(exe_dir).mkdir(parents=True, exist_ok=True)
            (Path(exe_dir) / Path(filename).name).write_text(code)
        return score.pass_call, score.pass_exe, score.speedup, "", "" if score.pass_exe else score.message


def results_line(ps: ProblemState) -> dict[str, Any]:
    return {
        "instruction": ps.instruction,
        "label": ps.label,
        "filename": ps.filename,
        "test_code": ps.test_code,
        "predict": ps.solution,
        "speedup": ps.speedup,
        "pass_call": ps.pass_call,
        "pass_exe": ps.pass_exe,
    }


def split_golden(path: Path) -> tuple[str, str | None]:
    """A golden file's (code, test code): the text before and after its separator line (146 `#`, trailing white
    space allowed); test code None without a separator."""
    lines = reference_text(ProblemState(instruction="", filename=path.name, path=str(path))).splitlines()
    index = next((i for i, line in enumerate(lines) if line.rstrip() == SEPARATOR), None)
    if index is None:
        return "\n".join(lines) + "\n", None
    return "\n".join(lines[:index]) + "\n", "\n".join(lines[index + 1 :]).strip("\n") + "\n"


async def _score_once(ps: ProblemState, code: str, scratch: Path) -> Score:
    async with Evaluator(EvalOptions(spares=0)) as evaluator:
        timing = (await evaluator.runtime()).get("backend") != "interpreter"
        return await score_code(evaluator, code, reference_file(ps, scratch), timing=timing)
