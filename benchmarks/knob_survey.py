"""Which launch configurations the suites' files set, and how: files with each kind of tunable knob, as GEAK's
discovery finds them now (``agent/tuning/launch_params.py``, ``agent/tuning/autotune_configs.py``) and, with
``--before REV``, as the discovery of an earlier commit found them. Pure source analysis of each file's kernel section
(no GPU).

    python benchmarks/knob_survey.py [--suites ../shared/suites] [--before c49a5ac]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path

from geak.agent.tuning.autotune_configs import find_autotune_sites
from geak.agent.tuning.launch_params import VIAS, find_tunable_params
from geak.evaluator.triton_file import TritonFileError, read_triton_file

SUITES = {"TritonBench-revised": "tritonbench_revised/TritonBench_G_v1", "ROCm": "rocm/ROCm_v1"}
ROWS = (
    ("any knob (launch option omitted: not counted)", "set"),
    ("any knob, omitted num_warps/num_stages included", "any"),
    *((f"reached through: {via}", f"via:{via}") for via in VIAS),
    ("@triton.autotune config list", "autotune"),
    ("num_warps set by the file", "kind:num_warps"),
    ("num_stages set by the file", "kind:num_stages"),
    ("num_ctas set by the file", "kind:num_ctas"),
    ("ROCm options (waves_per_eu, matrix_instr_nonkdim, kpack)", "rocm"),
    ("nothing tunable", "none"),
)


def survey(path: Path, backend: str | None) -> set[str]:
    """The kinds of knob one file has (its kernel section only: knobs in the test do not change the kernels)."""
    try:
        source = read_triton_file(path).kernel_section
    except TritonFileError:
        return {"none"}
    params = find_tunable_params(source, backend)
    kinds = {f"via:{p.via}" for p in params if not p.default} | {f"kind:{p.kind}" for p in params if not p.default}
    if params:
        kinds.add("any")
    if any(not p.default for p in params):
        kinds.add("set")
    if any(not p.default and p.kind in ("waves_per_eu", "matrix_instr_nonkdim", "kpack") for p in params):
        kinds.add("rocm")
    if find_autotune_sites(source, backend):
        kinds |= {"autotune", "set", "any"}
    return kinds or {"none"}


def survey_before(path: Path, old: types.ModuleType) -> set[str]:
    try:
        source = read_triton_file(path).kernel_section
        params = old.find_tunable_params(source)
    except (TritonFileError, ValueError):
        return {"none"}
    kinds = {f"kind:{p.kind}" for p in params if not p.default}
    kinds |= {"any"} if params else set()
    kinds |= {"set"} if any(not p.default for p in params) else set()
    return kinds or {"none"}


def old_discovery(revision: str) -> types.ModuleType:
    """`agent/launch_params.py` as it was at `revision`."""
    text = subprocess.run(
        ["git", "show", f"{revision}:agent/launch_params.py"], capture_output=True, text=True, check=True
    ).stdout
    module = types.ModuleType("launch_params_before")
    sys.modules[module.__name__] = module
    exec(compile(text, f"{revision}:agent/launch_params.py", "exec"), module.__dict__)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", type=Path, default=Path("../shared/suites"))
    parser.add_argument("--before", help="a git revision whose discovery to compare with")
    args = parser.parse_args()
    old = old_discovery(args.before) if args.before else None
    columns: list[tuple[str, Counter[str], int]] = []
    for name, folder in SUITES.items():
        files = sorted((args.suites / folder).glob("*.py"))
        backend = "rocm" if name == "ROCm" else None
        now = Counter(kind for f in files for kind in survey(f, backend))
        columns.append((f"{name} ({len(files)})", now, len(files)))
        if old is not None:
            columns.append((f"{name}, before", Counter(k for f in files for k in survey_before(f, old)), len(files)))
    print("| files with | " + " | ".join(title for title, _, _ in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for label, key in ROWS:
        print(f"| {label} | " + " | ".join(str(counts.get(key, 0)) for _, counts, _ in columns) + " |")


if __name__ == "__main__":
    main()
