"""Putting new kernel code back into the user's file, and the diff to show for it."""

from __future__ import annotations

import difflib

from geak.evaluator import SEPARATOR, TritonFile, parse_triton_file


def merged_file(original: TritonFile, candidate_code: str) -> str:
    """The user's file with its kernel code replaced by `candidate_code`; the test is kept as written.

    A candidate that is a whole file (a launch-parameter rewrite of the original) is returned as it is."""
    candidate = parse_triton_file(candidate_code, original.path, require_tests=False)
    if candidate.tests:  # already a whole file with its test
        return candidate_code
    code = candidate.kernel_section.rstrip("\n")
    lines = original.text.splitlines()
    if original.format == "tritonbench":
        sep = next(i for i, line in enumerate(lines) if line.rstrip() == SEPARATOR)
        return code + "\n" + "\n".join(lines[sep:]) + "\n"
    blocks = ["\n".join(lines[start - 1 : start - 1 + len(block)]) for start, block in original.test_blocks]
    return code + "\n\n\n" + "\n\n\n".join(blocks) + "\n"


def unified_diff(before: str, after: str, path: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
        )
    )
