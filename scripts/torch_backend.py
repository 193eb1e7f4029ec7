"""The backend that the torch in this environment gives GEAK, in one line, as scripts/setup.sh ends by printing it:
its build (CUDA, ROCm or CPU), the GPU it sees and the Triton beside it; with a warning where the build does not
fit the machine that scripts/torch_choice.sh found, or where two distributions write the `triton` package.

    .venv/bin/python scripts/torch_backend.py [cuda|rocm|cpu]    (the machine as torch_choice.sh found it)
"""

from __future__ import annotations

import sys
from importlib.metadata import packages_distributions, version
from typing import Any

INTERPRETER = "kernels run in Triton's interpreter (correctness only)"
BUILD_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "cpu": "CPU-only"}
MACHINE_WORDS = {"cuda": "an NVIDIA GPU", "rocm": "an AMD GPU", "cpu": "no GPU"}


def build_of(torch: Any) -> str:
    """What this torch was built for: "rocm", "cuda" or "cpu"."""
    if getattr(torch.version, "hip", None):
        return "rocm"
    return "cuda" if torch.version.cuda else "cpu"


def describe(torch: Any, tritons: dict[str, str]) -> str:
    """One line: torch's version and build, the GPU it sees (name, architecture, count) or that kernels run in the
    interpreter, and the distributions that provide the `triton` package (`tritons`: name to version)."""
    build = build_of(torch)
    words = f"torch {torch.__version__}"
    if build == "rocm":
        words += f" (ROCm {_major_minor(torch.version.hip)})"
    elif build == "cuda":
        words += f" (CUDA {torch.version.cuda})"
    if build == "cpu":
        words += ", CPU only: " + INTERPRETER
    elif not torch.cuda.is_available():
        words += ", but it sees no GPU: " + INTERPRETER
    else:
        props = torch.cuda.get_device_properties(0)
        arch = props.gcnArchName.split(":")[0] if build == "rocm" else f"sm_{props.major}{props.minor}"
        count = torch.cuda.device_count()
        words += f", {props.name} ({arch})" + (f" × {count}" if count > 1 else "")
    if not tritons:
        return words + "; no Triton installed"
    return words + "; Triton " + ", ".join(f"{number} ({name})" for name, number in sorted(tritons.items()))


def warnings_for(torch: Any, machine: str | None, tritons: dict[str, str]) -> list[str]:
    """What the user must fix: a torch built for another backend than the machine's GPU, or two distributions
    writing the one `triton` package (PyPI's over a ROCm torch's own, which carries AMD's linker)."""
    build = build_of(torch)
    found = []
    if machine in MACHINE_WORDS and machine != build:
        found.append(
            f"this torch is a {BUILD_NAMES[build]} build, but the machine has {MACHINE_WORDS[machine]}: setup keeps "
            "an existing torch; `rm -rf .venv && make setup` installs the build for this machine"
        )
    if len(tritons) > 1 and "triton" in tritons:
        own = " ".join(f"{name}=={number}" for name, number in sorted(tritons.items()) if name != "triton")
        found.append(
            f"{' and '.join(sorted(tritons))} both write the `triton` package: uninstall PyPI's "
            f"(`.venv/bin/pip uninstall -y triton`), then reinstall torch's own "
            f"(`.venv/bin/pip install --force-reinstall --no-deps {own}`)"
        )
    return found


def triton_distributions() -> dict[str, str]:
    """The installed distributions that provide the top-level `triton` package, with their versions."""
    return {name: version(name) for name in set(packages_distributions().get("triton", []))}


def _major_minor(hip: str) -> str:
    return ".".join(hip.split(".")[:2])


def main(argv: list[str]) -> int:
    import torch

    machine = argv[0] if argv else None
    tritons = triton_distributions()
    print("setup: " + describe(torch, tritons))
    for warning in warnings_for(torch, machine, tritons):
        print("setup: warning: " + warning, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
