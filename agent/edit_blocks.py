"""Edits as SEARCH/REPLACE blocks (the original GEAK's diff mode): for a large file the model replies with the lines
to change instead of the whole module, and its blocks are applied to the code it was shown.

    <<<<<<< SEARCH
    lines copied from the code
    =======
    the lines that take their place
    >>>>>>> REPLACE

A block's SEARCH lines must be found in exactly one place: as written first, then without the blank lines that open
and close them, then ignoring trailing whitespace, then ignoring indentation (the replacement is re-indented by the
same amount); lines copied with the ``12| `` numbers of the reflector's listing are read without them, and their
numbers choose among several matches. The blocks apply in order, each to the code as the blocks before it left it.
A block that matches nowhere or in several places, or a reply cut off inside its blocks, makes the whole reply
unusable (no edit is applied) with a reason that names the block and says why, for the reflector to hear.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from geak.evaluator import parse_python as parse

from .code_extraction import KERNEL_MARK, Extraction, extract_code, missing_names, strip_test_code, strip_thinking

SEARCH_LINE = re.compile(r"^\s*<{5,9} ?SEARCH\s*$")
DIVIDER_LINE = re.compile(r"^\s*={5,9}\s*$")
REPLACE_LINE = re.compile(r"^\s*>{5,9} ?REPLACE\s*$")
LINE_NUMBER = re.compile(r"^\s*\d+\| ?")
MAX_QUOTED_CHARS = 120  # of a code line quoted in a reason

FORMAT = """\
Reply with edits to the code you were given, as SEARCH/REPLACE blocks, not the whole module:
<<<<<<< SEARCH
lines copied exactly from the code (without line numbers)
=======
the lines that take their place
>>>>>>> REPLACE
- Each SEARCH section must match one place only: copy a few unchanged lines around the change where needed.
- Blocks apply in order, each to the code as the blocks before it left it. Keep each block short.
- To add a function, replace a line next to where it goes with that line and the new function.
- A block that matches nowhere or in more than one place makes the whole reply unusable."""


class EditError(ValueError):
    """Edit blocks that cannot be applied; the message names the block and says why."""


@dataclass(frozen=True)
class EditBlock:
    number: int  # 1-based, in reply order
    search: list[str]
    replace: list[str]


@dataclass(frozen=True)
class _Parsed:
    blocks: list[EditBlock]
    prose: str
    cut: str | None  # where the reply stops inside a block, if it does


def has_edit_blocks(reply: str) -> bool:
    """Does `reply` (its answer, not its thinking) contain a SEARCH marker?"""
    return any(SEARCH_LINE.match(line) for line in strip_thinking(reply).split("\n"))


def extract_edited(
    reply: str, base: str, *, required_names: Sequence[str] = (), finish_reason: str | None = None
) -> Extraction:
    """The module that `reply`'s edit blocks make of `base`. A reply without blocks is read as a whole module
    (`extract_code`), which a model may give instead of edits."""
    if not has_edit_blocks(reply):
        return extract_code(reply, required_names=required_names, finish_reason=finish_reason)
    parsed = _parse(strip_thinking(reply))
    count = len(parsed.blocks)
    if parsed.cut is not None:
        reason = f"the reply was truncated {parsed.cut}, so its edits are incomplete"
        return Extraction(None, reason, parsed.prose, True)
    if finish_reason == "length":
        reason = f"the reply was truncated (finish_reason=length) after {count} edit block(s): edits may be missing"
        return Extraction(None, reason, parsed.prose, True)
    try:
        edited = apply_blocks(base, parsed.blocks)
    except EditError as e:
        return Extraction(None, str(e), parsed.prose)
    code = strip_test_code(edited)
    reason = _unusable(code, required_names)
    return Extraction(None if reason else code, reason, parsed.prose)


def apply_blocks(code: str, blocks: Sequence[EditBlock]) -> str:
    """`code` with every block applied in order; raises `EditError` (nothing applied) when one cannot be."""
    lines = code.rstrip("\n").split("\n")
    for block in blocks:
        lines = _apply(lines, block, len(blocks))
    return "\n".join(lines) + "\n"


def _parse(text: str) -> _Parsed:
    blocks: list[EditBlock] = []
    prose: list[str] = []
    search: list[str] | None = None
    replace: list[str] | None = None
    for line in text.split("\n"):
        if search is None:
            if SEARCH_LINE.match(line):
                search = []
            elif not line.lstrip().startswith(("```", "~~~")):
                prose.append(line)
        elif replace is None:
            if DIVIDER_LINE.match(line):
                replace = []
            else:
                search.append(line)
        elif REPLACE_LINE.match(line):
            blocks.append(EditBlock(len(blocks) + 1, search, replace))
            search = replace = None
        else:
            replace.append(line)
    cut = None
    if search is not None:
        part = "SEARCH" if replace is None else "REPLACE"
        cut = f"inside the {part} section of edit block {len(blocks) + 1} (it never ends with `>>>>>>> REPLACE`)"
    return _Parsed(blocks, re.sub(r"\n\s*\n(\s*\n)+", "\n\n", "\n".join(prose)).strip(), cut)


def _apply(lines: list[str], block: EditBlock, count: int) -> list[str]:
    name = f"edit block {block.number} of {count}"
    search, replace = _trim_blank(block.search, block.replace)
    if not search:
        raise EditError(f"{name}: its SEARCH section is empty; copy the lines to change from the code")
    listed_at = None  # copied from the reflector's numbered listing: where it says the lines are
    if all(LINE_NUMBER.match(s) for s in search if s.strip()):
        listed_at = int(LINE_NUMBER.match(search[0]).group().strip().rstrip("|")) - 1
        search = [LINE_NUMBER.sub("", s, count=1) for s in search]
        replace = [LINE_NUMBER.sub("", r, count=1) for r in replace]
    tries = [(block.search, block.replace, _LEVELS[0])] if block.search != search else []  # blank lines as written
    tries += [(search, replace, same) for same in _LEVELS]
    for search, replace, same in tries:
        starts = [i for i in range(len(lines) - len(search) + 1) if _equal(lines[i : i + len(search)], search, same)]
        if not starts and search is block.search:
            continue
        if len(starts) > 1 and listed_at in starts:
            starts = [listed_at]
        if len(starts) == 1:
            at = starts[0]
            new = _reindented(replace, search, lines[at : at + len(search)])
            return lines[:at] + new + lines[at + len(search) :]
        if starts:
            places = ", ".join(f"line {i + 1}" for i in starts[:6]) + (" ..." if len(starts) > 6 else "")
            raise EditError(
                f"{name}: its SEARCH section matches {len(starts)} places ({places}){_edited(block)}; copy more "
                "unchanged lines around the change so that it matches one place only; no edit was applied"
            )
    raise EditError(f"{name}: its SEARCH section matches nowhere{_edited(block)}: {_first_miss(lines, search)}")


def _equal(window: list[str], search: list[str], same: Callable[[str, str], bool]) -> bool:
    return all(same(a, b) for a, b in zip(window, search, strict=True))


_LEVELS: tuple[Callable[[str, str], bool], ...] = (
    lambda a, b: a == b,
    lambda a, b: a.rstrip() == b.rstrip(),
    lambda a, b: a.strip() == b.strip(),
)


def _reindented(replace: list[str], search: list[str], found: list[str]) -> list[str]:
    """`replace`, shifted by the indentation the matched code has more (or less) than the SEARCH lines."""
    pair = next(((s, f) for s, f in zip(search, found, strict=True) if s.strip()), None)
    if pair is None:
        return replace
    written, actual = (_indent(line) for line in pair)
    if written == actual:
        return replace
    if actual.startswith(written):
        extra = actual[len(written) :]
        return [extra + r if r.strip() else r for r in replace]
    if written.startswith(actual):
        cut = len(written) - len(actual)
        return [r[cut:] if r[:cut].strip() == "" else r.lstrip() for r in replace]
    return replace


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _trim_blank(search: list[str], replace: list[str]) -> tuple[list[str], list[str]]:
    """Both sections without the blank lines that open and close the SEARCH section (as far as the REPLACE section
    repeats them), which the code may have fewer of."""
    start, end = 0, len(search)
    while start < end and not search[start].strip():
        start += 1
    while end > start and not search[end - 1].strip():
        end -= 1
    head = 0
    while head < min(start, len(replace)) and not replace[head].strip():
        head += 1
    tail = 0
    while tail < min(len(search) - end, len(replace) - head) and not replace[len(replace) - 1 - tail].strip():
        tail += 1
    return search[start:end], replace[head : len(replace) - tail]


def _edited(block: EditBlock) -> str:
    """Where the block was looked for, when the blocks before it changed the code."""
    if block.number == 1:
        return ""
    before = "block 1" if block.number == 2 else f"blocks 1-{block.number - 1}"
    return f" in the code as {before} left it"


def _first_miss(lines: list[str], search: list[str]) -> str:
    """Why a SEARCH section is nowhere: its first line the code does not have, or that its lines are scattered."""
    present = {line.strip() for line in lines}
    for number, line in enumerate(search, 1):
        if line.strip() and line.strip() not in present:
            return f"its line {number} (`{_quoted(line)}`) is not in the code; no edit was applied"
    return "each of its lines is in the code, but not one after another as written; no edit was applied"


def _quoted(line: str) -> str:
    text = line.strip()
    return text if len(text) <= MAX_QUOTED_CHARS else text[: MAX_QUOTED_CHARS - 3] + "..."


def _unusable(code: str, required: Sequence[str]) -> str | None:
    """Why the edited module cannot be a candidate, or None."""
    try:
        tree = parse(code)
    except SyntaxError as e:
        where = code.split("\n")[e.lineno - 1] if e.lineno and e.lineno <= code.count("\n") + 1 else ""
        quoted = f": `{_quoted(where)}`" if where.strip() else ""
        return f"the code after the edits does not parse: {e.msg} (line {e.lineno}{quoted})"
    if not KERNEL_MARK.search(code):
        return "the code after the edits has no @triton.jit kernel"
    missing = missing_names(tree, required)
    if missing:
        return "the code after the edits does not define the required " + ", ".join(f"`{n}`" for n in missing)
    return None
