"""Parsing Python source in a process with threads: one parse at a time.

CPython 3.11 (3.11.7 here) can fail a parse spuriously with "SystemError: AST constructor recursion depth mismatch"
when two threads build ASTs at once (python/cpython#106905): the language server analyses documents on threads
while its event loop parses candidates. Every parse of the caller's side goes through ``parse``.
"""

from __future__ import annotations

import ast
import threading

_ONE_AT_A_TIME = threading.Lock()


def parse(text: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse`, serialized across threads."""
    with _ONE_AT_A_TIME:
        return ast.parse(text, filename=filename)
