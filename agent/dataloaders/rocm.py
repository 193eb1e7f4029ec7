"""The ROCm benchmark (GEAK-eval's `ROCm_v1`): 31 pytest modules and the instruction JSON (`file`,
`target_kernel_name`, `instruction`, `label` = golden code)."""

from __future__ import annotations

from pathlib import Path

from .golden_suite import GoldenFileSuite, SuiteError, read_json_list, split_golden
from .problem import ProblemState


class ROCmLoader(GoldenFileSuite):
    """`data_path` is the suite folder (with `ROCm_v1/` and `ROCm_eval_complex_instruct_v1.json`); `py_folder`
    and `instruction_path` override either part."""

    suite = "rocm"

    def __init__(
        self,
        data_path: str | Path | None = None,
        *,
        py_folder: str | Path | None = None,
        instruction_path: str | Path | None = None,
    ):
        if data_path is None and (py_folder is None or instruction_path is None):
            raise SuiteError("rocm: give data_path (the suite folder), or py_folder and instruction_path")
        root = Path(data_path).expanduser() if data_path is not None else None
        super().__init__(
            py_folder if py_folder is not None else root / "ROCm_v1",
            instruction_path if instruction_path is not None else root / "ROCm_eval_complex_instruct_v1.json",
        )

    def _load_suite(self) -> list[ProblemState]:
        states = []
        for item in read_json_list(self.instruction_path, "rocm instructions"):
            name = str(item.get("file", ""))
            path = self.py_folder / name
            if not name or not path.is_file():
                self.skipped.append(f"{name or '(no file)'}: no golden file in {self.py_folder}")
                continue
            _, test_code = split_golden(path)
            states.append(
                ProblemState(
                    instruction=str(item.get("instruction") or "").strip(),
                    filename=name,
                    label=item.get("label"),
                    test_code=test_code,
                    target_kernel_name=item.get("target_kernel_name"),
                    path=str(path),
                )
            )
        listed = {ps.filename for ps in states}
        self.skipped += [
            f"{p.name}: not in {self.instruction_path.name}"
            for p in sorted(self.py_folder.glob("*.py"))
            if p.name not in listed
        ]
        return states
