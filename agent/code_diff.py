"""Candidate code stored as line edits of the original, so a checkpoint holds each big file once.

`encode(base, text)` gives a JSON-ready list of operations: an int n > 0 copies the next n lines of `base`, n < 0
skips -n lines of it, a string is inserted as is. `decode(base, ops)` rebuilds `text` exactly.
"""

from __future__ import annotations

from difflib import SequenceMatcher

Ops = list[int | str]

MAX_MATCHED_LINES = 20_000  # past this many differing lines, the middle is stored whole (SequenceMatcher is O(n²))


def encode(base: str, text: str) -> Ops:
    a, b = base.splitlines(keepends=True), text.splitlines(keepends=True)
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    ops: Ops = []
    _add(ops, head)
    if len(middle_a) == len(middle_b):  # lines edited in place (launch parameters): pair them, O(n)
        i = 0
        while i < len(middle_a):
            j = i
            same = middle_a[i] == middle_b[i]
            while j < len(middle_a) and (middle_a[j] == middle_b[j]) == same:
                j += 1
            if same:
                _add(ops, j - i)
            else:
                _add(ops, i - j, "".join(middle_b[i:j]))
            i = j
    elif max(len(middle_a), len(middle_b)) > MAX_MATCHED_LINES:
        _add(ops, -len(middle_a), "".join(middle_b))
    else:
        for tag, i1, i2, j1, j2 in SequenceMatcher(None, middle_a, middle_b, autojunk=False).get_opcodes():
            if tag == "equal":
                _add(ops, i2 - i1)
            else:
                _add(ops, -(i2 - i1), "".join(middle_b[j1:j2]))
    _add(ops, tail)
    return ops


def decode(base: str, ops: Ops) -> str:
    lines = base.splitlines(keepends=True)
    out: list[str] = []
    at = 0
    for op in ops:
        if isinstance(op, str):
            out.append(op)
        elif op > 0:
            out.extend(lines[at : at + op])
            at += op
        else:
            at -= op
    if at != len(lines):
        raise ValueError("the stored edits do not fit the original")
    return "".join(out)


def _add(ops: Ops, *items: int | str) -> None:
    for item in items:
        if item:
            ops.append(item)
