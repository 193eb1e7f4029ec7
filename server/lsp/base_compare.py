"""A saved file against its version at a git revision (the `geak.base` setting): finding that version (git, in a
thread), then the comparison's two steps on the warm evaluator — the saved kernels run on the base's test and probes,
and, on a GPU, their paired timing against it. A module of a repository (``modules``) is compared the same way, judged
by its repository's tests: the base's text in the module's place runs the same selected tests and probes as the
reference (as for `geak check MODULE --base REV`). ``base_comparison`` (shared with `geak check --base`) writes the
base's text where only the evaluator's jobs read it and names it `REV:path` in messages; the evaluator keeps the base's
own run by its content, so a later save does not run it again. What a comparison found is a `BaseReport`."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from geak.evaluator import (
    BadInput,
    BenchResult,
    CheckResult,
    Evaluator,
    TritonFileError,
    as_module,
    parse_triton_file,
)

from ..base_comparison import base_file, base_folder, failing_base, relabeled, same, unparsable_base
from ..base_revision import Base, BaseVersion, RevisionError, repository_root, resolve, same_code, version_at
from .analysis import content_key
from .engine import Engine
from .modules import ModuleTarget
from .timing_text import against_base

log = logging.getLogger(__name__)

# What a comparison found: the base's code (nothing ran), a file new since the base, a base that is no reference (or
# an unknown revision), no base at all (not a git repository), outputs that differ from the base's, the same outputs.
OUTCOMES = ("same", "new", "unusable", "none", "differs", "matches")
SAID_ONCE = ("same", "new", "unusable")  # said in the hover and the status, never as diagnostics


@dataclass(frozen=True)
class BaseTarget:
    """The revision a file is compared with and the file's version there; `module`: the file is a repository's
    module, and its version at the base, in its place, is judged by the same tests."""

    base: Base
    version: BaseVersion
    module: ModuleTarget | None = None

    @property
    def label(self) -> str:
        return self.version.label(self.base)

    @property
    def key(self) -> str | None:
        return content_key(self.version.text) if self.version.text is not None else None

    @property
    def root(self) -> str | None:
        """The repository whose evaluator runs a module's comparison (None: the warm evaluator of files)."""
        return self.module.root if self.module is not None else None


@dataclass
class BaseReport:
    """One content of a file against its base. `rev`: the setting that asked; `base_key`: the content key of the
    base's text (None where there is none); `message`: one line for the hover and the status; `result`: the check
    of the saved kernels against the base; `bench`: their timing against it (GPU), or `timing_note` why none."""

    rev: str
    base_key: str | None
    outcome: str
    message: str
    label: str = ""
    result: CheckResult | None = None
    bench: BenchResult | None = None
    timing_note: str = ""
    target: BaseTarget | None = None  # what the comparison ran against (its timing runs against it too)
    probed: bool = True  # False: "matches" on the base's test only, from the check's own job; the probes follow

    @property
    def timed(self) -> bool:
        return self.bench is not None or bool(self.timing_note)

    @property
    def said(self) -> str:
        """The whole message, with the speed against the base once timed (`same outputs as HEAD:add.py; 1.25×
        slower than HEAD [1.22, 1.28]`)."""
        speed = against_base(self.bench, self.rev) if self.bench is not None else None
        return f"{self.message}; {speed}" if speed else self.message

    @property
    def verdict(self) -> str:
        """A few words for the status bar (`same`, `outputs differ`, `1.25× slower`, `within noise`...)."""
        speedup = self.bench.speedup if self.bench is not None else None
        if self.outcome == "matches" and not self.probed:
            return "same test outputs, probing"
        if self.outcome == "matches" and speedup is not None:
            if speedup.significant:
                ratio = speedup.ratio if speedup.ratio >= 1 else 1 / speedup.ratio
                return f"{ratio:.2f}× {'faster' if speedup.ratio >= 1 else 'slower'}"
            return "within noise" if speedup.decided else "speed undecided"
        comparison = self.result.comparison if self.result is not None else None
        differ = "outputs differ" if comparison is not None and comparison.mismatches else "base's test fails"
        words = {"same": "same", "new": "new file", "unusable": "not compared", "none": "not compared",
                 "matches": "same outputs", "differs": differ}  # fmt: skip
        return words[self.outcome]


@dataclass
class BaseMemory:
    """What the editor's comparisons remember: the bases that are no reference, by revision and text (their failing
    runs are not kept by the evaluator), and the last comparison said, as (file name, report), for the status."""

    unusable: dict[tuple[str, str | None], BaseReport] = field(default_factory=dict)
    last: tuple[str, BaseReport] | None = None

    def known(self, target: BaseTarget, text: str) -> BaseReport | None:
        """What is said of `text` against `target` without a run (``without_running``, or a base known to be no
        reference); None: the comparison must run."""
        return without_running(target, text) or self.unusable.get((target.base.rev, target.key))

    def ran(self, target: BaseTarget, compared: BaseReport) -> None:
        """A comparison with `target` ran: a base found to be no reference is not run again."""
        if compared.outcome == "unusable" and compared.base_key is not None:
            self.unusable[(target.base.rev, target.key)] = compared

    def said(self, path: str, compared: BaseReport) -> None:
        """What a comparison found (outside a git repository there is nothing to say): the status and the log."""
        if compared.outcome != "none":
            self.last = (Path(path).name, compared)
            log.info("%s: %s", Path(path).name, compared.message)


def find_base(path: str, rev: str, module: ModuleTarget | None = None) -> BaseTarget | BaseReport:
    """The file's (or `module`'s) version at `rev` (blocking: git runs), or the report of why there is none to compare
    with."""
    try:
        root = repository_root(Path(path))
    except RevisionError as e:
        return BaseReport(rev, None, "none", f"not compared with {rev}: {e}")
    try:
        base = resolve(root, rev)
        version = version_at(base, Path(path))
    except RevisionError as e:
        return BaseReport(rev, None, "unusable", f"not compared with {rev}: {e}")
    if version.text is None:
        return BaseReport(rev, None, "new", f"new since {base.name}: nothing to compare with")
    return BaseTarget(base, version, module)


def without_running(target: BaseTarget, text: str) -> BaseReport | None:
    """What is said of `text` without any run: the same code as the base (white space and comments aside), or a base
    that does not parse as a Triton file with a test (a module's: as a module with kernels). None: the comparison
    must run."""
    label = target.label
    if same_code(text, target.version.text or ""):
        return BaseReport(target.base.rev, target.key, "same", same(target.base, target.version).message, label,
                          target=target)  # fmt: skip
    try:
        if target.module is None:
            parse_triton_file(target.version.text or "", label)
        else:
            as_module(target.module.tests, target.version.text or "", label)
    except TritonFileError as e:
        return BaseReport(target.base.rev, target.key, "unusable", f"{unparsable_base(label, e)}: checked alone", label)
    return None


async def check_and_compare(
    evaluator: Evaluator, target: BaseTarget, path: str, text: str
) -> tuple[CheckResult, BaseReport | None]:
    """The saved content's check and, from its very job, its test outputs against the base's kept run
    (``Evaluator.check_and_compare_tests``): a match is said at once (not yet `probed`); anything else, and the
    probes, are ``check_against``'s, which runs next."""
    with base_folder() as folder:
        written = base_file(folder, target.version)
        module = target.module.tests if target.module is not None else None
        own, compared = await evaluator.check_and_compare_tests(path, source=text, against=written, module=module)
    if compared is None or not compared.ok:
        return own, None
    label = target.label
    said = f"outputs on the test are {label}'s; probing other inputs"
    return own, BaseReport(target.base.rev, target.key, "matches", said, label, relabeled(compared, written, label),
                           target=target, probed=False)  # fmt: skip


async def check_against(evaluator: Evaluator, target: BaseTarget, path: str, text: str) -> BaseReport:
    """The saved kernels (`text`) on the base's test and probes, their outputs compared with the base's."""
    rev, label = target.base.rev, target.label
    with base_folder() as folder:
        written = base_file(folder, target.version)
        try:
            if target.module is None:
                checked = await evaluator.check(path, source=text, against=written)
            else:
                checked = await evaluator.check_module(target.module.tests, source=text, against=written)
            result = relabeled(checked, written, label)
        except BadInput as e:
            if e.verdict is None:
                raise
            return BaseReport(rev, target.key, "unusable", f"{failing_base(e, written, label)}: checked alone", label)
    if result.ok:
        return BaseReport(rev, target.key, "matches", f"same outputs as {label}", label, result, target=target)
    if result.not_checkable is not None:
        return BaseReport(rev, target.key, "unusable", f"not compared with {label}: {result.summary}", label, result)
    if result.comparison is not None and result.comparison.mismatches:
        first, *more = result.comparison.mismatches
        said = f"outputs differ from {rev}'s in {first.where}: {first.message}" + (
            f" (+{len(more)} more)" if more else ""
        )
        return BaseReport(rev, target.key, "differs", said, label, result)
    return BaseReport(rev, target.key, "differs", f"{label}'s test fails with these kernels: {result.summary}", label,
                      result)  # fmt: skip


async def bench_against(evaluator: Evaluator, target: BaseTarget, path: str, text: str) -> BenchResult:
    """The saved kernels timed against the base's, interleaved in one job (its check has passed)."""
    with base_folder() as folder:
        written = base_file(folder, target.version)
        module = target.module.tests if target.module is not None else None
        bench = await evaluator.bench(path, source=text, against=written, check_first=False, module=module)
        return relabeled(bench, written, target.label)


async def compare_on(engine: Engine, evaluator: Evaluator, target: BaseTarget, path: str, text: str) -> BaseReport:
    """``check_against`` on the engine, logged: cancelled (a later save; `Engine.run` returns once its job is killed),
    or failed (the evaluator itself: said, with no base key, so that the next save tries again)."""
    started = time.monotonic()
    try:
        return await engine.run(check_against(evaluator, target, path, text))
    except asyncio.CancelledError:
        log.info("the comparison of %s with %s was cancelled after %.1f s (its job stopped)", Path(path).name,
                 target.label, time.monotonic() - started)  # fmt: skip
        raise
    except Exception as e:
        log.exception("the comparison of %s with %s could not run", path, target.label)
        return BaseReport(target.base.rev, None, "unusable", f"GEAK could not compare with {target.label}: {e}",
                          target.label)  # fmt: skip
