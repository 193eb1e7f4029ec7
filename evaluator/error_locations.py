"""Turning worker errors into diagnostics on the user's lines (compile errors at the kernel line)."""

from __future__ import annotations

from typing import Any

from .results import Diagnostic
from .shared.test_ids import test_function
from .triton_file import Composed, TritonFile


def locate(
    error: dict[str, Any],
    composed: Composed,
    candidate: TritonFile,
    reference: TritonFile | None,
) -> tuple[str, int, int]:
    """(file, line, column) in the user's files for an error described by `sandbox.describe_error`."""
    compile_loc = error.get("compile_location")
    if compile_loc:
        line, column = compile_loc["line"], compile_loc["column"]
    elif error.get("frames"):
        frame = error["frames"][-1]  # the deepest frame in the user's file
        line, column = frame["line"], 1
    else:
        return candidate.path, 1, 1
    origin, original = composed.origin(line)
    if origin == "test" and reference is not None:
        return reference.path, original, column
    return candidate.path, original, column


def error_diagnostic(
    error: dict[str, Any],
    composed: Composed,
    candidate: TritonFile,
    reference: TritonFile | None,
    prefix: str = "",
) -> Diagnostic:
    file, line, column = locate(error, composed, candidate, reference)
    compile_loc = error.get("compile_location")
    if compile_loc:
        message = f"Triton compile error in {compile_loc['kernel']}: {compile_loc['message']}"
    else:
        message = error.get("message", "error")
    return Diagnostic(line=line, column=column, severity="error", message=prefix + message, file=file)


def definition_line(tfile: TritonFile, name: str) -> int:
    """The line defining a function, class, method (`Class::method`) or test case (`test_x[4]`)."""
    function = test_function(name)
    return tfile.def_lines.get(function) or tfile.def_lines.get(function.split("::", 1)[0], 1)
