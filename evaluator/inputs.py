"""What the evaluator is given: Triton files and source texts read for it, and the error for one it cannot
evaluate (``BadInput``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .results import CheckResult
from .triton_file import TritonFile, TritonFileError, read_source, read_triton_file


class BadInput(ValueError):
    """The input cannot be evaluated (missing file, not a Triton file, no test, a reference that fails). A reference
    that fails its own test carries that verdict (`verdict`)."""

    def __init__(self, message: str, verdict: CheckResult | None = None):
        super().__init__(message)
        self.verdict = verdict


def read_file(path: str | Path, role: str) -> TritonFile:
    """The Triton file at `path`, read for its `role` ("reference", "file"); BadInput where it cannot be."""
    try:
        return read_triton_file(path)
    except FileNotFoundError as e:
        raise BadInput(f"{role} {path}: no such file") from e
    except TritonFileError as e:
        raise BadInput(f"{role} {path}: {e}") from e


def source_text(file: str | Path | None) -> str:
    """The source text of `file`; BadInput where there is none."""
    if file is None:
        raise BadInput("give a file or source text")
    try:
        return read_source(file)
    except FileNotFoundError as e:
        raise BadInput(f"{file}: no such file") from e
    except TritonFileError as e:
        raise BadInput(str(e)) from e


def text_key(text: str) -> str:
    """The key of a source text (its compilations, its run as a reference): its SHA-256."""
    return hashlib.sha256(text.encode()).hexdigest()
