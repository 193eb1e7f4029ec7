"""Getting the Triton module out of an LLM reply: markdown with fenced code blocks, or bare Python.

Fenced blocks are found with markdown-it-py, which runs an unclosed fence to the end of the reply, so a reply
cut off by the token limit still yields its (incomplete) code and can be reported as truncated.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from markdown_it import MarkdownIt

from geak.evaluator import TEST_PREFIXES, defined_names, is_test_code, separator_index, statement_span
from geak.evaluator import parse_python as parse

PYTHON_LANGS = frozenset({"", "python", "py", "python3", "py3", "triton"})
MAX_STRATEGY_CHARS = 2000
NO_KERNEL = "no Python code block with a @triton.jit kernel"

KERNEL_MARK = re.compile(r"@\s*(?:triton\.)?jit\b|\btriton\.jit\b")
KERNEL_DEF = re.compile(r"^@\s*(?:triton\.)?jit\b.*\n(?:@.*\n)*(?:async\s+)?def\s+(\w+)", re.MULTILINE)
TOP_LEVEL_DEF = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)", re.MULTILINE)
TOP_LEVEL_ASSIGN = re.compile(r"^(\w+)\s*(?::[^=\n]*)?=(?!=)", re.MULTILINE)
# A reasoning model's thinking: a closed <think> block, one cut by the token limit (never closed: all of it is
# thinking), or the part before a lone </think> (templates that open the block in the prompt).
THINKING = re.compile(r"<think>.*?(?:</think>|\Z)|\A(?:(?!<think>).)*?</think>", re.DOTALL | re.IGNORECASE)
STRATEGY_HEADING = re.compile(r"\bstrateg(?:y|ies)\b", re.IGNORECASE)

_MARKDOWN = MarkdownIt("commonmark", {"html": False})


@dataclass(frozen=True)
class Extraction:
    """The code found in a reply (None when unusable, with `reason` saying why) and the prose around it.

    `truncated`: the reply was cut off (finish_reason "length", or a code fence that never closed)."""

    code: str | None
    reason: str | None
    prose: str
    truncated: bool = False


@dataclass(frozen=True)
class _Block:
    code: str
    closed: bool

    @cached_property
    def has_kernel(self) -> bool:
        return bool(KERNEL_MARK.search(self.code))

    @cached_property
    def kernels(self) -> frozenset[str]:
        return frozenset(KERNEL_DEF.findall(self.code))

    @cached_property
    def defines(self) -> frozenset[str]:
        return frozenset(TOP_LEVEL_DEF.findall(self.code)) | frozenset(TOP_LEVEL_ASSIGN.findall(self.code))

    @cached_property
    def imports_only(self) -> bool:
        try:
            body = parse(self.code).body
        except SyntaxError:
            return False
        return bool(body) and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body)

    def launches(self, kernels: frozenset[str]) -> bool:
        return any(re.search(rf"\b{re.escape(k)}\s*\[", self.code) for k in kernels)


@dataclass(frozen=True)
class _Fence:
    lang: str
    content: str
    first_line: int  # 0-based, the opening fence line
    end_line: int  # exclusive
    closed: bool


def extract_code(reply: str, *, required_names: Sequence[str] = (), finish_reason: str | None = None) -> Extraction:
    """Find the Triton module in `reply`.

    Prefers Python (or untagged) fenced blocks containing ``triton.jit``; kernels and the `required_names`
    (wrappers) split over several blocks are joined in order; a later block redefining code of an earlier one
    wins. A reply without fences is accepted when it parses as Python with a ``@triton.jit`` kernel.
    A test section the model added (a line of 146+ ``#`` and the rest of its block, top-level ``test_*``,
    ``bench_*``, ``flops_*``, ``bytes_*`` functions and the calls to them, an ``if __name__ == "__main__":``
    block) is removed."""
    text = strip_thinking(reply)
    fences = _fences(text)
    prose = _prose(text, fences)
    required = tuple(dict.fromkeys(required_names))
    blocks = [_Block(f.content, f.closed) for f in fences if f.lang in PYTHON_LANGS]
    if not blocks and KERNEL_MARK.search(text) and (_parses(text) or finish_reason == "length"):
        blocks, prose = [_Block(text, closed=True)], ""

    selected = _select(blocks, required)
    if not selected:
        cut = finish_reason == "length"
        reason = "the reply was truncated (finish_reason=length) before any code" if cut else NO_KERNEL
        return Extraction(None, reason, prose, truncated=cut)
    truncated = finish_reason == "length" or not all(b.closed for b in selected)
    code = strip_test_code("\n\n".join(_cut_at_separator(b.code).strip("\n") for b in selected))
    try:
        tree = parse(code)
    except SyntaxError as e:
        if truncated:
            why = "finish_reason=length" if finish_reason == "length" else "its code block never closes"
            reason = f"the reply was truncated ({why}), so the code is incomplete"
        else:
            reason = f"the code does not parse: {e.msg} (line {e.lineno})"
        return Extraction(None, reason, prose, truncated)
    missing = missing_names(tree, required)
    if missing:
        reason = "the code does not define the required " + ", ".join(f"`{n}`" for n in missing)
        if truncated:
            reason += " (the reply was truncated)"
        return Extraction(None, reason, prose, truncated)
    return Extraction(code, None, prose, truncated)


def extract_strategy(reply: str) -> str:
    """The reply's strategy: its last section headed "Strategy" (the optimizer is asked for its analysis first,
    the strategy last), whole, wherever it sits; without one, the explanation before the first code block (trimmed,
    at most ~2000 characters)."""
    text = strip_thinking(reply)
    fences = _fences(text)
    section = _strategy_section(text, fences)
    if section:
        return section
    if fences:
        before = "\n".join(text.split("\n")[: fences[0].first_line])
    elif KERNEL_MARK.search(text) and _parses(text):
        before = ""
    else:
        before = text
    return _shorten(_squeeze_blank_lines(before).strip(), MAX_STRATEGY_CHARS)


def strip_thinking(reply: str) -> str:
    """`reply` without its reasoning (``THINKING``), with Unix line ends."""
    return THINKING.sub("", reply.replace("\r\n", "\n"))


def _strategy_section(text: str, fences: list[_Fence]) -> str:
    """The last markdown section whose heading names a strategy, up to the next heading of its level or above (code
    blocks inside it excluded), or ''."""
    lines = text.split("\n")
    headings = [
        (int(t.tag[1:]), t.map[0]) for t in _MARKDOWN.parse(text) if t.type == "heading_open" and t.map is not None
    ]
    chosen = [(i, h) for i, h in enumerate(headings) if STRATEGY_HEADING.search(lines[h[1]])]
    if not chosen:
        return ""
    index, (level, start) = chosen[-1]
    end = next((line for lvl, line in headings[index + 1 :] if lvl <= level), len(lines))
    inside_code = {i for f in fences for i in range(f.first_line, f.end_line)}
    kept = [line for i, line in enumerate(lines[start:end], start) if i not in inside_code]
    return _squeeze_blank_lines("\n".join(kept)).strip()


def strip_test_code(code: str) -> str:
    """Remove a test section: everything from a line of 146+ ``#``, then (when the rest parses) top-level
    functions named like the evaluator's test section (test_/bench_/flops_/bytes_), statements calling them
    and the ``__main__`` block. Other lines are kept as written."""
    code = _cut_at_separator(code)
    lines = code.split("\n")
    try:
        tree = parse(code)
    except SyntaxError:
        return code.rstrip() + "\n"
    removed_defs = {
        s.name
        for s in tree.body
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name.startswith(TEST_PREFIXES)
    }
    drop = [s for s in tree.body if _is_test_statement(s, removed_defs)]
    for stmt in reversed(drop):
        start, end = statement_span(stmt)
        del lines[start - 1 : end]
    return "\n".join(lines).rstrip() + "\n"


def _cut_at_separator(code: str) -> str:
    lines = code.split("\n")
    index = separator_index(lines, lenient=True)
    return code if index is None else "\n".join(lines[:index]) + ("\n" if index else "")


def _is_test_statement(stmt: ast.stmt, test_functions: set[str]) -> bool:
    """Test code (the evaluator's own rule), or a top-level statement calling a removed test function."""
    if is_test_code(stmt):
        return True
    if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        return any(
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in test_functions
            for node in ast.walk(stmt.value)
        )
    return False


def _select(blocks: list[_Block], required: tuple[str, ...]) -> list[_Block]:
    """The blocks that make up the module, in reply order."""
    kernel_blocks = [b for b in blocks if b.has_kernel]
    if not kernel_blocks:
        return []
    wanted = set(required)
    complete = [b for b in kernel_blocks if wanted <= b.defines and (wanted or not b.kernels or b.launches(b.kernels))]
    if complete and complete[-1] is kernel_blocks[-1]:
        return [complete[-1]]
    kernels = frozenset().union(*(b.kernels for b in kernel_blocks))
    relevant = [
        b for b in blocks if b.has_kernel or b.defines & wanted or b.imports_only or (b.defines and b.launches(kernels))
    ]
    kept: list[_Block] = []
    seen: set[str] = set()
    for block in reversed(relevant):  # a later block redefining everything of an earlier one supersedes it
        if block.imports_only or not block.defines or block.defines - seen:
            kept.append(block)
            seen |= block.defines
    return kept[::-1]


def _fences(text: str) -> list[_Fence]:
    lines = text.split("\n")
    fences = []
    for token in _MARKDOWN.parse(text):
        if token.type != "fence" or token.map is None:
            continue
        start, end = token.map
        closing = lines[end - 1].strip().lstrip(">").strip() if end - 1 > start else ""
        closed = bool(closing) and set(closing) == {token.markup[0]} and len(closing) >= len(token.markup)
        lang = token.info.strip().split()[0].lower() if token.info.strip() else ""
        fences.append(_Fence(lang.strip("{}."), token.content, start, end, closed))
    return fences


def _prose(text: str, fences: list[_Fence]) -> str:
    lines = text.split("\n")
    inside = {i for f in fences for i in range(f.first_line, f.end_line)}
    outside = "\n".join(line for i, line in enumerate(lines) if i not in inside)
    return _squeeze_blank_lines(outside).strip()


def missing_names(tree: ast.Module, required: Sequence[str]) -> list[str]:
    """The `required` names the module does not define at its top level."""
    defined = set().union(*(defined_names(stmt) for stmt in tree.body))
    return [name for name in required if name not in defined]


def _parses(code: str) -> bool:
    try:
        parse(code)
    except SyntaxError:
        return False
    return True


def _squeeze_blank_lines(text: str) -> str:
    return re.sub(r"\n[ \t]*(?:\n[ \t]*){2,}", "\n\n\n", text)


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip() + " ..."
