"""`geak check --base REV` and `geak check --changed` over many files: each against its version at the base with one
evaluator (``base_comparison`` says what of each), their counts, and the command's exit status."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from geak.evaluator import BadInput, EvalOptions, Evaluator, ModuleTests, RepositoryError, module_tests

from ..base_comparison import VERDICTS, BaseVerdict, base_folder, compare_file, is_same, same
from ..base_revision import Base, BaseVersion
from .exits import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_NOT_CHECKABLE, EXIT_OK
from .module_check import is_module

log = logging.getLogger(__name__)


async def compare_files(
    versions: list[BaseVersion],
    base: Base,
    options: EvalOptions,
    *,
    max_slowdown: float | None = None,
    on_done: Callable[[BaseVerdict], None] | None = None,
    on_progress: Callable[[Path, str], None] | None = None,
    tests: list[str] | None = None,
) -> list[BaseVerdict]:
    """Every file against its base with one evaluator (`options.max_concurrent` files at once), in the order given;
    timed on a GPU. Files the same as their base are said without an evaluator. A repository's module (a file with
    kernels and no test of its own, or each file with `tests`: `--tests`) is judged by its repository's tests
    (``module_targets``); one whose tests cannot be found is bad input, saying why."""
    verdicts: dict[int, BaseVerdict] = {}
    targets: dict[int, ModuleTests] = {}
    for i, version in enumerate(versions):
        if is_same(version):
            verdicts[i] = same(base, version)
        elif is_module(str(version.file), tests):
            try:
                targets[i] = module_tests(version.file, tests)
            except RepositoryError as e:
                verdicts[i] = BaseVerdict(str(version.file), "bad input", str(e), version.path)
        if i in verdicts and on_done is not None:
            on_done(verdicts[i])
    work = [i for i in range(len(versions)) if i not in verdicts]
    if work:
        limit = asyncio.Semaphore(max(1, options.max_concurrent))
        with base_folder() as folder:
            readable = tuple(sorted({str(t.repository.root) for t in targets.values()}))
            async with Evaluator(options, readable=readable) as evaluator:
                timed = (await evaluator.runtime()).get("backend") != "interpreter"

                async def one(i: int) -> BaseVerdict:
                    version = versions[i]
                    async with limit:
                        report = (lambda m: on_progress(version.file, m)) if on_progress else None
                        try:
                            verdict = await compare_file(evaluator, base, version, folder, timed=timed,
                                                         max_slowdown=max_slowdown, progress=report,
                                                         module=targets.get(i))  # fmt: skip
                        except BadInput as e:
                            verdict = BaseVerdict(str(version.file), "bad input", str(e), version.path)
                    log.info("%s: %s", version.file, verdict.verdict)  # `geak -v check --changed`: each as it ends
                    if on_done is not None:
                        on_done(verdict)
                    return verdict

                found = await asyncio.gather(*(one(i) for i in work))
        verdicts.update(zip(work, found, strict=True))
    return [verdicts[i] for i in range(len(versions))]


def exit_code(verdicts: list[BaseVerdict]) -> int:
    """0 all pass or the same as their base, 1 a file fails, differs or is slower beyond the limit, 2 a file is bad
    input, 3 the others cannot be checked on this backend."""
    kinds = {v.verdict for v in verdicts}
    if kinds <= {"pass", "same"}:
        return EXIT_OK
    if kinds & {"fail", "slower"}:
        return EXIT_FAIL
    return EXIT_BAD_INPUT if "bad input" in kinds else EXIT_NOT_CHECKABLE


def summary(verdicts: list[BaseVerdict]) -> dict[str, int]:
    counts = Counter(v.verdict for v in verdicts)
    return {"files": len(verdicts), **{k: counts.get(k, 0) for k in VERDICTS}}
