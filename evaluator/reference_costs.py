"""How long each reference's own run took, kept between runs beside the compile store, so that work over many
references starts the slow ones first (``longest_first``).

A batch is as long as its slowest file started last: golden files that fail or hang in their own test (to the time
limit), started late in line order, hold back the end of all the checks, while every timing waits. Their cost is
known after one run; a later eval of other predictions of the same suite starts them first. Where it is not known (a
first run), the costlier text goes first (``text_cost``: its size, and the autotune configurations it writes): the
checks that end a batch last are mostly of its large files, which line order may start late. (What size cannot
foretell, a small file whose candidate spins on the GPU in a probe until its stall limit, it places late.) Only the
caller writes the file (jobs never see the store's folder)
and it only orders work: a wrong or missing figure changes no verdict.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .python_source import parse
from .triton_file import decorator_name, is_config_call

FILE = "reference-seconds.json"
MAX_ENTRIES = 20_000  # the file stays small: past this, the entries recorded longest ago go


def load(root: str | None) -> dict[str, float]:
    """Reference key -> seconds of its last own run; empty where there is no store or nothing readable in it."""
    if root is None:
        return {}
    try:
        data = json.loads(Path(root, FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(k, str) and isinstance(v, (int, float))}


def record(root: str | None, key: str, seconds: float) -> None:
    """Keep `seconds` for `key` (the file replaced whole: a reader never sees half of it; two writers at once may
    lose one's figure, which only orders work)."""
    if root is None or not os.path.isdir(root):
        return
    costs = load(root)
    costs.pop(key, None)
    costs[key] = round(seconds, 2)  # the newest last, so the oldest go first past MAX_ENTRIES
    kept = dict(list(costs.items())[-MAX_ENTRIES:])
    try:
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{FILE}.")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(kept, f)
        os.replace(tmp, Path(root, FILE))
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def longest_first(references: list[Path], known: Mapping[Path, float]) -> list[Path]:
    """`references` in the order work over them should start: those whose own run took longest here before first
    (`known`, ``Evaluator.known_reference_seconds``), then those not known, the costliest first by their text
    (``text_cost``)."""
    return sorted(references, key=lambda path: (-known.get(path, 0.0), -text_cost(path)))


BYTES_PER_CONFIG = 200  # what one `triton.Config` written weighs against a byte of source (``text_cost``)


def text_cost(path: Path) -> int:
    """What a file's text foretells of its own run's length: its size in bytes, each autotune configuration it
    writes counting ``BYTES_PER_CONFIG`` more (``configs_written``), since its test compiles and times every one: a
    mid-sized file of hundreds of configs can outlast the largest files without autotuning, yet by size alone it
    would start late. A file that cannot be read costs 0."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    return len(data) + BYTES_PER_CONFIG * configs_written(data.decode(errors="replace"))


def configs_written(text: str) -> int:
    """How many `triton.Config(...)` the source builds, by reading it: each call counted once for every pass of the
    loops and comprehensions around it over a literal list, tuple or set or a `range` of constants (other loops
    count once). 0 where it does not parse."""
    if "Config" not in text:  # most files: no parse needed (a parse costs milliseconds a file)
        return 0
    try:
        tree = parse(text)
    except (SyntaxError, ValueError):
        return 0
    total = 0

    def walk(node: ast.AST, passes: int) -> None:
        nonlocal total
        if is_config_call(node):
            total += passes
        if isinstance(node, (ast.For, ast.AsyncFor)):
            walk(node.iter, passes)
            for child in node.body:
                walk(child, passes * _passes(node.iter))
            for child in node.orelse:
                walk(child, passes)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for generator in node.generators:
                walk(generator.iter, passes)
                passes *= _passes(generator.iter)
            for part in (getattr(node, "elt", None), getattr(node, "key", None), getattr(node, "value", None)):
                if part is not None:
                    walk(part, passes)
            return
        for child in ast.iter_child_nodes(node):
            walk(child, passes)

    walk(tree, 1)
    return total


def _passes(iterable: ast.expr) -> int:
    """How many times a loop over `iterable` runs, where the source says (else 1)."""
    if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)):
        return max(1, len(iterable.elts))
    if isinstance(iterable, ast.Call) and decorator_name(iterable) == "range" and 1 <= len(iterable.args) <= 3:
        bounds = [a.value for a in iterable.args if isinstance(a, ast.Constant) and type(a.value) is int]
        if len(bounds) == len(iterable.args) and (len(bounds) < 3 or bounds[2] != 0):
            return max(1, len(range(*bounds)))
    return 1
