"""TritonBench-revised (GEAK-eval's `TritonBench_G_v1`): 184 golden files and thunlp's instruction JSON (`file`,
`simp_instru`, `comp_instru`, `output` = the original golden code, `difficulty` "1".."5")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .golden_suite import GoldenFileSuite, SuiteError
from .problem import ProblemState

INSTRUCTION_KEYS = {"complex": "comp_instru", "simple": "simp_instru"}


class TritonBenchLoader(GoldenFileSuite):
    """`data_path` is the suite folder (with `TritonBench_G_v1/` and `TritonBench_G_v1.json`); `py_folder` and
    `instruction_path` override either part. `instruction`: "complex" (GEAK's setting) or "simple"."""

    suite = "tritonbench"
    folder = "TritonBench_G_v1"
    instructions = "TritonBench_G_v1.json"

    def __init__(
        self,
        data_path: str | Path | None = None,
        *,
        py_folder: str | Path | None = None,
        instruction_path: str | Path | None = None,
        instruction: str = "complex",
    ):
        if instruction not in INSTRUCTION_KEYS:
            raise SuiteError(f"instruction must be one of {', '.join(INSTRUCTION_KEYS)}, not {instruction!r}")
        self.instruction_key = INSTRUCTION_KEYS[instruction]
        self._variants: dict[str, list[str]] = {}
        super().__init__(data_path, py_folder=py_folder, instruction_path=instruction_path)

    def _problem(self, item: dict[str, Any], name: str, path: Path, test_code: str) -> ProblemState:
        difficulty = item.get("difficulty")
        self._variants[name] = [str(item.get(k) or "") for k in INSTRUCTION_KEYS.values()]
        return ProblemState(
            instruction=str(item.get(self.instruction_key) or "").strip(),
            filename=name,
            label=item.get("output"),
            test_code=test_code,
            difficulty=str(difficulty) if difficulty not in (None, "") else None,
            path=str(path),
        )

    def _instructions(self, ps: ProblemState) -> list[str]:
        return self._variants.get(ps.filename, [ps.instruction])
