"""One-shot example retrieval: the corpus kernels most similar in code to a given kernel (BM25).

The corpus is the package's ``snippets/kernels/*.py`` plus any user folders. Each file contributes its kernel
section (wrappers and kernels, without the test/bench/flops functions and without the TritonBench test part
after the ``#####`` separator), tokenised into identifiers: attribute chains both split and joined
(``tl.load`` -> ``tl``, ``load``, ``tl.load``) and names split into their snake/camel-case parts, so that
``BLOCK_SIZE_K`` and ``block_k`` share ``block`` and ``k``. Ranking is ``rank_bm25.BM25Okapi`` with each query
term counted once.
"""

from __future__ import annotations

import ast
import io
import keyword
import logging
import re
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rank_bm25 import BM25Okapi

from geak.evaluator import is_kernel_def, is_test_code, separator_index, statement_span
from geak.evaluator import parse_python as parse
from geak.snippets import KERNELS_DIR

logger = logging.getLogger(__name__)

_HEADER = re.compile(r"#\s*geak-(family|gpu-only):\s*(.*?)\s*$")
_NAME_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")  # BLOCK / Size / block / 16
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*")
_COMMENT_OR_STRING = re.compile(r"#[^\n]*|'''.*?'''|\"\"\".*?\"\"\"|'[^'\n]*'|\"[^\"\n]*\"", re.DOTALL)
_KEPT_OPERATORS = frozenset({"@", "**"})


@dataclass(frozen=True)
class CorpusEntry:
    """One example kernel file: its family (``# geak-family:``), GPU-only reason, and kernel section."""

    path: Path
    name: str
    family: str | None
    gpu_only: str | None
    code: str


def kernel_section(source: str) -> str:
    """``source`` without the TritonBench test part and the top-level test code (`is_test_code`).

    Raises ``SyntaxError`` when the kept part does not parse.
    """
    lines = source.splitlines(keepends=True)
    separator = separator_index(lines, lenient=True)
    lines = lines if separator is None else lines[:separator]
    tree = parse("".join(lines))
    dropped: set[int] = set()  # 0-based line numbers
    for node in tree.body:
        if is_test_code(node):
            first, last = statement_span(node)
            dropped.update(range(first - 1, last))
    kept = "".join(line for index, line in enumerate(lines) if index not in dropped)
    return re.sub(r"\n{3,}", "\n\n\n", kept).strip() + "\n"


def _has_kernel(code: str) -> bool:
    """Whether ``code`` (which parses) defines a ``@triton.jit`` kernel."""
    return any(is_kernel_def(node) for node in ast.walk(parse(code)))


def load_entry(path: Path) -> CorpusEntry:
    """Read one kernel file. Raises ``OSError``/``UnicodeDecodeError`` (unreadable) or ``SyntaxError``."""
    source = path.read_text(encoding="utf-8")
    headers: dict[str, str] = {}
    for line in source.splitlines():
        if not line.startswith("#"):
            break
        match = _HEADER.match(line)
        if match:
            headers[match.group(1)] = match.group(2)
    return CorpusEntry(
        path=path,
        name=path.stem,
        family=headers.get("family") or None,
        gpu_only=headers.get("gpu-only") or None,
        code=kernel_section(source),
    )


def code_tokens(code: str) -> list[str]:
    """Lower-cased identifier tokens of ``code`` (comments, strings and numbers dropped), for BM25.

    Works on code that does not tokenise (falls back to a regular expression).
    """
    try:
        chains = list(_token_chains(code))
    except (tokenize.TokenError, SyntaxError):
        stripped = _COMMENT_OR_STRING.sub(" ", code)
        chains = [[part.strip() for part in word.split(".")] for word in _WORD.findall(stripped)]
    tokens: list[str] = []
    for chain in chains:
        if chain[0] in _KEPT_OPERATORS:
            tokens.append(chain[0])
            continue
        for name in chain:
            tokens.extend(_name_tokens(name))
        if len(chain) > 1:
            tokens.append(".".join(chain).lower())
    return tokens


def _token_chains(code: str) -> Iterator[list[str]]:
    """Dotted name chains (``["tl", "load"]``) and kept operators, from Python's tokenizer."""
    chain: list[str] = []
    after_dot = False
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.NAME and (after_dot or not chain):
            chain.append(token.string)
            after_dot = False
            continue
        if token.type == tokenize.OP and token.string == "." and chain and not after_dot:
            after_dot = True
            continue
        if chain:
            yield chain
            chain, after_dot = [], False
        if token.type == tokenize.NAME:
            chain.append(token.string)
        elif token.type == tokenize.OP and token.string in _KEPT_OPERATORS:
            yield [token.string]
    if chain:
        yield chain


def _name_tokens(name: str) -> list[str]:
    """``name`` lower-cased, plus its snake/camel-case parts when it has several."""
    if keyword.iskeyword(name):
        return [name]
    parts = [p.lower() for p in _NAME_PART.findall(name)]
    whole = name.lower()
    return [whole, *parts] if len(parts) > 1 else [whole]


class KernelCorpus:
    """The example kernels, indexed for similarity search."""

    def __init__(self, entries: Sequence[CorpusEntry]) -> None:
        self._entries = tuple(entries)
        documents = [code_tokens(entry.code) for entry in self._entries]
        # epsilon=0: terms found in more than half of the documents carry no weight (the library's default
        # floor gives them more weight than moderately common terms, and negative weight in small corpora)
        self._index = BM25Okapi(documents, epsilon=0.0) if any(documents) else None

    @classmethod
    def load(cls, extra_dirs: Sequence[Path] = ()) -> KernelCorpus:
        """The package corpus plus the ``*.py`` kernel files of ``extra_dirs`` (bad files are skipped)."""
        entries = _load_dir(KERNELS_DIR)
        for directory in extra_dirs:
            entries += _load_dir(Path(directory))
        return cls(entries)

    @property
    def entries(self) -> tuple[CorpusEntry, ...]:
        return self._entries

    def most_similar(self, code: str, k: int = 1, exclude: Path | None = None) -> list[tuple[CorpusEntry, float]]:
        """The ``k`` entries most similar to ``code`` (best first, ties by name) with their BM25 scores.

        ``exclude`` leaves out the entry read from that path (e.g. the query's own file). Pass the kernel
        section of a file (`kernel_section`) so its tests do not weigh in. Empty corpus: ``[]``.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if self._index is None:
            return []
        query = list(dict.fromkeys(code_tokens(code)))  # each term once, as in BM25 proper
        scores = self._index.get_scores(query)
        excluded = exclude.resolve() if exclude is not None else None
        ranked = sorted(range(len(self._entries)), key=lambda i: (-scores[i], self._entries[i].name))
        kept = [i for i in ranked if self._entries[i].path.resolve() != excluded]
        return [(self._entries[i], float(scores[i])) for i in kept[:k]]


def _load_dir(directory: Path) -> list[CorpusEntry]:
    if not directory.is_dir():
        logger.warning("kernel folder %s does not exist or is not a folder; skipped", directory)
        return []
    entries = []
    for path in sorted(directory.glob("*.py")):
        try:
            entry = load_entry(path)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
            logger.warning("skipping kernel file %s: %s", path, exc)
            continue
        if not _has_kernel(entry.code):
            logger.info("skipping %s: no @triton.jit kernel in it", path)
            continue
        entries.append(entry)
    return entries


def leave_one_out_hit_rate(corpus: KernelCorpus) -> tuple[float, list[tuple[str, str, str]]]:
    """How often the top-1 example retrieved for an entry (from the others) has the entry's family.

    Returns the rate over the entries that have a family, and (name, family, retrieved family) for each;
    the retrieved family is ``"-"`` when the retrieved entry has none.
    """
    outcomes: list[tuple[str, str, str]] = []
    for entry in corpus.entries:
        if entry.family is None:
            continue
        others = KernelCorpus([other for other in corpus.entries if other is not entry])
        best = others.most_similar(entry.code, k=1)
        retrieved = (best[0][0].family or "-") if best else "-"
        outcomes.append((entry.name, entry.family, retrieved))
    if not outcomes:
        return 0.0, []
    hits = sum(family == retrieved for _, family, retrieved in outcomes)
    return hits / len(outcomes), outcomes
