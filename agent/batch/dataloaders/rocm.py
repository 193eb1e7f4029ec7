"""The ROCm benchmark (GEAK-eval's `ROCm_v1`): 31 pytest modules and the instruction JSON (`file`,
`target_kernel_name`, `instruction`, `label` = golden code)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .golden_suite import GoldenFileSuite
from .problem import ProblemState


class ROCmLoader(GoldenFileSuite):
    """`data_path` is the suite folder (with `ROCm_v1/` and `ROCm_eval_complex_instruct_v1.json`); `py_folder`
    and `instruction_path` override either part."""

    suite = "rocm"
    folder = "ROCm_v1"
    instructions = "ROCm_eval_complex_instruct_v1.json"

    def _problem(self, item: dict[str, Any], name: str, path: Path, test_code: str) -> ProblemState:
        return ProblemState(
            instruction=str(item.get("instruction") or "").strip(),
            filename=name,
            label=item.get("label"),
            test_code=test_code,
            target_kernel_name=item.get("target_kernel_name"),
            path=str(path),
        )
