"""TritonBench-revised (GEAK-eval's `TritonBench_G_v1`): 184 golden files and thunlp's instruction JSON (`file`,
`simp_instru`, `comp_instru`, `output` = the original golden code, `difficulty` "1".."5")."""

from __future__ import annotations

from pathlib import Path

from .golden_suite import GoldenFileSuite, SuiteError, read_json_list, split_golden
from .problem import ProblemState

INSTRUCTION_KEYS = {"complex": "comp_instru", "simple": "simp_instru"}


class TritonBenchLoader(GoldenFileSuite):
    """`data_path` is the suite folder (with `TritonBench_G_v1/` and `TritonBench_G_v1.json`); `py_folder` and
    `instruction_path` override either part. `instruction`: "complex" (GEAK's setting) or "simple"."""

    suite = "tritonbench"

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
        if data_path is None and (py_folder is None or instruction_path is None):
            raise SuiteError("tritonbench: give data_path (the suite folder), or py_folder and instruction_path")
        root = Path(data_path).expanduser() if data_path is not None else None
        self.instruction_key = INSTRUCTION_KEYS[instruction]
        super().__init__(
            py_folder if py_folder is not None else root / "TritonBench_G_v1",
            instruction_path if instruction_path is not None else root / "TritonBench_G_v1.json",
        )

    def _load_suite(self) -> list[ProblemState]:
        self._variants: dict[str, list[str]] = {}
        states = []
        for item in read_json_list(self.instruction_path, "tritonbench instructions"):
            name = str(item.get("file", ""))
            path = self.py_folder / name
            if not name or not path.is_file():
                self.skipped.append(f"{name or '(no file)'}: no golden file in {self.py_folder}")
                continue
            _, test_code = split_golden(path)
            instruction = str(item.get(self.instruction_key) or "").strip()
            difficulty = item.get("difficulty")
            states.append(
                ProblemState(
                    instruction=instruction,
                    filename=name,
                    label=item.get("output"),
                    test_code=test_code,
                    difficulty=str(difficulty) if difficulty not in (None, "") else None,
                    path=str(path),
                )
            )
            self._variants[name] = [str(item.get(k) or "") for k in INSTRUCTION_KEYS.values()]
        listed = {ps.filename for ps in states}
        self.skipped += [
            f"{p.name}: not in {self.instruction_path.name}"
            for p in sorted(self.py_folder.glob("*.py"))
            if p.name not in listed
        ]
        return states

    def _instructions(self, ps: ProblemState) -> list[str]:
        return self._variants.get(ps.filename, [ps.instruction])
